-- Claude's reviews of episodes (issue #16): suggestions only. A review never becomes a failure tag by
-- itself; accepted_tag_id is set when a curator accepts it, pointing at the tag the curator wrote
-- (no foreign key: undoing that tag deletes it, and the review must not block the undo).
CREATE TABLE review_suggestion (
	id INTEGER NOT NULL,
	episode_id INTEGER NOT NULL,
	model VARCHAR NOT NULL,
	prompt_version VARCHAR NOT NULL,
	run_id VARCHAR NOT NULL,
	"cluster" VARCHAR NOT NULL,
	status VARCHAR NOT NULL,
	verdict VARCHAR NOT NULL,
	tag_class VARCHAR NOT NULL,
	subclass VARCHAR NOT NULL,
	explanation VARCHAR NOT NULL,
	citations_json VARCHAR NOT NULL,
	dropped_json VARCHAR NOT NULL,
	raw_input_json VARCHAR NOT NULL,
	tokens_in INTEGER NOT NULL,
	tokens_out INTEGER NOT NULL,
	cost_usd FLOAT,
	latency_s FLOAT NOT NULL,
	api_retries INTEGER NOT NULL,
	tool_errors INTEGER NOT NULL,
	error VARCHAR NOT NULL,
	accepted_tag_id INTEGER,
	created_at DATETIME NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(episode_id) REFERENCES episode (id)
);
CREATE INDEX ix_review_suggestion_episode_id ON review_suggestion (episode_id);
CREATE INDEX ix_review_suggestion_run_id ON review_suggestion (run_id);
