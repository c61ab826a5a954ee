-- No honest work lost to where Bandpass verifies (issue #41): what a task version's oracle was found to
-- need outside its declared artifacts, adopted for the version (carried into the clean room beside the
-- declared ones, written into the task.toml an export writes), and the footprint it was learnt from — by
-- the audit or before the version's first rollout ('' = not learnt yet: the next rollout learns it).
ALTER TABLE task_version ADD COLUMN adopted_artifacts_json VARCHAR NOT NULL DEFAULT '[]';
ALTER TABLE task_version ADD COLUMN footprint_json VARCHAR NOT NULL DEFAULT '';
