-- Episodes from elsewhere and selective retries. `source` names where an episode came from when Bandpass
-- did not run it (a Harbor trial: "harbor:<job id>/<trial name>"), so importing a job twice adds nothing;
-- `prior_tries_json` keeps what a `--retry` re-run replaced (outcome, error, recordings), so a retried
-- attempt is still one sample and its history is never lost.
ALTER TABLE episode ADD COLUMN source VARCHAR NOT NULL DEFAULT '';
CREATE INDEX ix_episode_source ON episode (source);
ALTER TABLE episode ADD COLUMN prior_tries_json VARCHAR NOT NULL DEFAULT '[]';
