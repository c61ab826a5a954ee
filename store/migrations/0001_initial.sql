-- Schema 1: the first released schema. Never edit a released migration; add a new one.
CREATE TABLE export (
	id INTEGER NOT NULL,
	model VARCHAR NOT NULL,
	params_json VARCHAR NOT NULL,
	out_dir VARCHAR NOT NULL,
	task_count INTEGER NOT NULL,
	manifest_sha256 VARCHAR NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id)
);
CREATE TABLE policy_model (
	id INTEGER NOT NULL,
	name VARCHAR NOT NULL,
	base_url VARCHAR NOT NULL,
	served_name VARCHAR NOT NULL,
	params_json VARCHAR NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id)
);
CREATE UNIQUE INDEX ix_policy_model_name ON policy_model (name);
CREATE TABLE task (
	id INTEGER NOT NULL,
	name VARCHAR NOT NULL,
	source_path VARCHAR NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id)
);
CREATE UNIQUE INDEX ix_task_name ON task (name);
CREATE TABLE task_version (
	id INTEGER NOT NULL,
	task_id INTEGER NOT NULL,
	hash VARCHAR NOT NULL,
	path VARCHAR NOT NULL,
	instruction VARCHAR NOT NULL,
	category VARCHAR NOT NULL,
	difficulty VARCHAR NOT NULL,
	tags_json VARCHAR NOT NULL,
	metadata_json VARCHAR NOT NULL,
	origin VARCHAR NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(task_id) REFERENCES task (id)
);
CREATE UNIQUE INDEX ix_task_version_hash ON task_version (hash);
CREATE INDEX ix_task_version_task_id ON task_version (task_id);
CREATE TABLE audit (
	id INTEGER NOT NULL,
	task_version_id INTEGER NOT NULL,
	verdict VARCHAR NOT NULL,
	reasons_json VARCHAR NOT NULL,
	details_json VARCHAR NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(task_version_id) REFERENCES task_version (id)
);
CREATE INDEX ix_audit_task_version_id ON audit (task_version_id);
CREATE TABLE episode (
	id INTEGER NOT NULL,
	task_version_id INTEGER NOT NULL,
	agent VARCHAR NOT NULL,
	attempt INTEGER NOT NULL,
	status VARCHAR NOT NULL,
	outcome VARCHAR NOT NULL,
	reward FLOAT,
	retries INTEGER NOT NULL,
	error VARCHAR NOT NULL,
	agent_cast VARCHAR NOT NULL,
	verifier_cast VARCHAR NOT NULL,
	verifier_output VARCHAR NOT NULL,
	started_at DATETIME,
	ended_at DATETIME,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(task_version_id) REFERENCES task_version (id)
);
CREATE INDEX ix_episode_agent ON episode (agent);
CREATE INDEX ix_episode_status ON episode (status);
CREATE INDEX ix_episode_task_version_id ON episode (task_version_id);
CREATE TABLE generation (
	id INTEGER NOT NULL,
	prompt_version VARCHAR NOT NULL,
	model VARCHAR NOT NULL,
	seed_axes_json VARCHAR NOT NULL,
	difficulty VARCHAR NOT NULL,
	tokens_in INTEGER NOT NULL,
	tokens_out INTEGER NOT NULL,
	cost_usd FLOAT NOT NULL,
	wall_s FLOAT NOT NULL,
	api_retries INTEGER NOT NULL,
	transcript_json VARCHAR NOT NULL,
	outcome VARCHAR NOT NULL,
	reason VARCHAR NOT NULL,
	task_version_id INTEGER,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(task_version_id) REFERENCES task_version (id)
);
CREATE TABLE image_build (
	id INTEGER NOT NULL,
	task_version_id INTEGER NOT NULL,
	tag VARCHAR NOT NULL,
	ok BOOLEAN NOT NULL,
	log VARCHAR NOT NULL,
	duration_s FLOAT NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(task_version_id) REFERENCES task_version (id)
);
CREATE INDEX ix_image_build_task_version_id ON image_build (task_version_id);
CREATE TABLE failure_tag (
	id INTEGER NOT NULL,
	episode_id INTEGER NOT NULL,
	tag_class VARCHAR NOT NULL,
	subclass VARCHAR NOT NULL,
	note VARCHAR NOT NULL,
	author VARCHAR NOT NULL,
	blocking BOOLEAN NOT NULL,
	cleared BOOLEAN NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(episode_id) REFERENCES episode (id)
);
CREATE INDEX ix_failure_tag_episode_id ON failure_tag (episode_id);
CREATE TABLE step (
	id INTEGER NOT NULL,
	episode_id INTEGER NOT NULL,
	"index" INTEGER NOT NULL,
	prompt_tokens INTEGER NOT NULL,
	completion_tokens INTEGER NOT NULL,
	latency_s FLOAT NOT NULL,
	action_json VARCHAR NOT NULL,
	raw_reply VARCHAR NOT NULL,
	observation VARCHAR NOT NULL,
	marker_time FLOAT NOT NULL,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(episode_id) REFERENCES episode (id)
);
CREATE INDEX ix_step_episode_id ON step (episode_id);
