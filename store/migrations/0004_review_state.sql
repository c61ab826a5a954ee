-- Schema 4: the tagging queue's review state. A row exists only for an episode a curator set aside
-- ("skipped"); pending and tagged are derived from the episode and its tags, so they cannot disagree.
CREATE TABLE review_state (
	episode_id INTEGER NOT NULL,
	state VARCHAR NOT NULL,
	author VARCHAR NOT NULL,
	updated_at DATETIME NOT NULL,
	PRIMARY KEY (episode_id),
	FOREIGN KEY(episode_id) REFERENCES episode (id)
);
