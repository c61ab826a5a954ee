-- Diagnosis (issue 15; written as 0005 on its branch, renumbered after main's 0005 and 0006): one row per
-- finished episode saying why it ended (engine/review/diagnosis.py). Recomputed on
-- demand (`bandpass diagnose`); rules_version tells rows made by older rules apart. checks_json holds the
-- failing checks parsed from the verifier output and reports; signature groups failures into clusters.
CREATE TABLE diagnosis (
	episode_id INTEGER NOT NULL,
	code VARCHAR NOT NULL,
	tag VARCHAR NOT NULL,
	confidence FLOAT NOT NULL,
	summary VARCHAR NOT NULL,
	evidence_json VARCHAR NOT NULL,
	checks_json VARCHAR NOT NULL,
	signature VARCHAR NOT NULL,
	rules_version INTEGER NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (episode_id),
	FOREIGN KEY(episode_id) REFERENCES episode (id)
);
CREATE INDEX ix_diagnosis_signature ON diagnosis (signature);
