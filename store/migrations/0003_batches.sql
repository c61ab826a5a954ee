-- Schema 3: rollout batches. A batch remembers what was asked (agent or policy model, base-URL override,
-- k, agent parameters) so that `bandpass run --resume` needs no other flags; its episodes are the
-- episode rows carrying its id in episode.batch_id.
CREATE TABLE batch (
	id VARCHAR NOT NULL,
	agent VARCHAR NOT NULL,
	kind VARCHAR NOT NULL,
	base_url VARCHAR NOT NULL,
	k INTEGER NOT NULL,
	params_json VARCHAR NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id)
);
