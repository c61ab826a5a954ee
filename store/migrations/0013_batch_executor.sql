-- Where a batch's episodes run (issue #23): the executor of its latest runner (local | ray; '' before
-- any runner started), so the TUI can show it for batches other processes run.
ALTER TABLE batch ADD COLUMN executor VARCHAR NOT NULL DEFAULT '';
