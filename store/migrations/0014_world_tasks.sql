-- The world's tasks (issue #28): what a task version's import noticed, kept with the version so `tasks`,
-- the TUI's task detail and the audit show it — warnings (ignored keys, conversion notes) and what
-- Bandpass cannot run as the author meant (a multi-step task, a separate verifier image).
ALTER TABLE task_version ADD COLUMN warnings_json VARCHAR NOT NULL DEFAULT '[]';
ALTER TABLE task_version ADD COLUMN unsupported_json VARCHAR NOT NULL DEFAULT '[]';

-- The audit's harness probes (kill_sandbox, memory_hog, fork_bomb) test Bandpass's attribution, not the
-- task: their outcomes are kept per base image, engine and limits, and reused by the next audit with the
-- same setting instead of running three more containers per task.
CREATE TABLE probe_cache (
    key VARCHAR NOT NULL PRIMARY KEY,
    setting_json VARCHAR NOT NULL DEFAULT '{}',
    results_json VARCHAR NOT NULL DEFAULT '{}',
    task_version_id INTEGER,
    created_at DATETIME NOT NULL
);

-- Harbor jobs in: what an imported trial recorded that Bandpass has no column for: agent_result (input, cached
-- and output tokens, cost, per model; summed over a multi-step trial's steps) and the metadata Harbor's traces
-- exporter reads (agent, model, provider, run, trial, result), so `export --format traces` can write its rows.
ALTER TABLE episode ADD COLUMN imported_json VARCHAR NOT NULL DEFAULT '';
