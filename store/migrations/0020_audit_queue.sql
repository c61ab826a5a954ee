-- Audits at scale (issue #43): an audit run is a queue of task versions to audit, claimed one at a time
-- by runners (local threads or Ray tasks) exactly like a rollout batch's episodes, so a runner killed
-- mid-run loses only the audits in flight and `bandpass audit --resume` finishes the rest. `phase` is what
-- a running audit is doing now (static, build, footprint, probes, verdict): the CLI and the Tasks screen
-- show it live. `batch_id` is the episodes' batch of the current try (their containers carry it).
CREATE TABLE audit_run (
	id VARCHAR NOT NULL,
	executor VARCHAR NOT NULL DEFAULT '',
	params_json VARCHAR NOT NULL DEFAULT '{}',
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id)
);
CREATE TABLE audit_job (
	id INTEGER NOT NULL,
	run_id VARCHAR NOT NULL,
	task_version_id INTEGER NOT NULL,
	status VARCHAR NOT NULL DEFAULT 'queued',
	phase VARCHAR NOT NULL DEFAULT '',
	node VARCHAR NOT NULL DEFAULT '',
	batch_id VARCHAR NOT NULL DEFAULT '',
	tries INTEGER NOT NULL DEFAULT 0,
	audit_id INTEGER,
	created_at DATETIME NOT NULL,
	started_at DATETIME,
	ended_at DATETIME,
	PRIMARY KEY (id),
	FOREIGN KEY(run_id) REFERENCES audit_run (id),
	FOREIGN KEY(task_version_id) REFERENCES task_version (id),
	FOREIGN KEY(audit_id) REFERENCES audit (id)
);
CREATE INDEX ix_audit_job_run_status ON audit_job (run_id, status);
CREATE UNIQUE INDEX ux_audit_job_run_version ON audit_job (run_id, task_version_id);
