-- Schema 2: rollout batches (for --resume), image aliases used per task version (a validity risk shown
-- to the curator) and per-step context cuts (harness evidence).
ALTER TABLE episode ADD COLUMN batch_id VARCHAR NOT NULL DEFAULT '';
CREATE INDEX ix_episode_batch_id ON episode (batch_id);
ALTER TABLE task_version ADD COLUMN image_aliases_json VARCHAR NOT NULL DEFAULT '[]';
ALTER TABLE step ADD COLUMN cuts_json VARCHAR NOT NULL DEFAULT '[]';
