-- Where an episode ran (issue #23): the Ray node id and address of its last try ('' when local).
ALTER TABLE episode ADD COLUMN node_id VARCHAR NOT NULL DEFAULT '';
ALTER TABLE episode ADD COLUMN node_address VARCHAR NOT NULL DEFAULT '';
