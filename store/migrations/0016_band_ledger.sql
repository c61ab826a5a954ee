-- The band ledger (issue #32): every band decision recorded per (task version, model) with the checkpoint
-- the model stands for (bandpass.toml series and checkpoint_step), the band, k and confidence it was
-- decided at, its interval (per-sample pass rate and pass@k) and the episodes behind it. A row is added
-- only when the evidence or the parameters differ from the latest row of the same (version, model), so
-- the table is the history of where each task stood and how sure that was.
CREATE TABLE band_decision (
	id INTEGER NOT NULL,
	task_version_id INTEGER NOT NULL,
	model VARCHAR NOT NULL,
	series VARCHAR NOT NULL,
	checkpoint_step INTEGER,
	lo FLOAT NOT NULL,
	hi FLOAT NOT NULL,
	k INTEGER NOT NULL,
	confidence FLOAT NOT NULL,
	min_samples INTEGER NOT NULL,
	decision VARCHAR NOT NULL,
	n INTEGER NOT NULL,
	c INTEGER NOT NULL,
	infra_errors INTEGER NOT NULL,
	rate_lo FLOAT NOT NULL,
	rate_hi FLOAT NOT NULL,
	pass_lo FLOAT NOT NULL,
	pass_hi FLOAT NOT NULL,
	episodes_json VARCHAR NOT NULL,
	source VARCHAR NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(task_version_id) REFERENCES task_version (id)
);
CREATE INDEX ix_band_decision_task_version_id ON band_decision (task_version_id);
CREATE INDEX ix_band_decision_model ON band_decision (model);
-- Adaptive batches (`bandpass run --adaptive`): their settings (band, k, confidence, budget, max-k, round
-- sizes) and, once the sampler stops on its own, why ('stopped'); '' for a fixed-k batch. A batch whose
-- sampler has not stopped is unfinished even when no episode is queued, so `--resume` continues it.
ALTER TABLE batch ADD COLUMN adaptive_json VARCHAR NOT NULL DEFAULT '';
