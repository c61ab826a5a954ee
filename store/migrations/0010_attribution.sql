-- Attribution evidence (engine/sandbox/attribution.py): who ended an episode's sandbox during the agent
-- phase, with the Docker engine's events, exit code, OOMKilled and the verdict, as JSON. '' when nothing
-- ended it (a clean agent phase) or for episodes recorded before this migration.
ALTER TABLE episode ADD COLUMN evidence_json VARCHAR NOT NULL DEFAULT '';
