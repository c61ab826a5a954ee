-- Rewards a policy cannot forge: each episode's end state (changes against the image, archived content)
-- and tamper-guard findings; per-try phase timings; regraded episodes linked to their source episode.
ALTER TABLE episode ADD COLUMN phases_json VARCHAR NOT NULL DEFAULT '[]';
ALTER TABLE episode ADD COLUMN origin VARCHAR NOT NULL DEFAULT '';
ALTER TABLE episode ADD COLUMN source_episode_id INTEGER;
CREATE INDEX ix_episode_source_episode_id ON episode (source_episode_id);
CREATE TABLE episode_endstate (
	episode_id INTEGER NOT NULL,
	archive VARCHAR NOT NULL,
	image VARCHAR NOT NULL,
	changes_json VARCHAR NOT NULL,
	findings_json VARCHAR NOT NULL,
	archived_bytes INTEGER NOT NULL,
	cap_bytes INTEGER NOT NULL,
	over_cap INTEGER NOT NULL,
	capture_s FLOAT NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (episode_id),
	FOREIGN KEY(episode_id) REFERENCES episode (id)
);
