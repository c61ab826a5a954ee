-- Full-text search over what the terminals showed (issue 33; engine/review/search_index.py; written as
-- 0014 on its branch, renumbered after main's 0014_world_tasks).
-- One document per (episode, terminal): its lines in the order they first appeared, `body` as the index
-- reads it (symbol words like >>> carry an extra token), `lines_json` the step, cast time, frame and kind
-- of each line, `facets` filter tokens (task, agent, outcome, terminal) matched inside the FTS query.
-- id = episode_id * 2 + (0 agent | 1 verifier), so rowid order is episode order.
CREATE TABLE search_doc (
	id INTEGER NOT NULL,
	episode_id INTEGER NOT NULL,
	terminal VARCHAR NOT NULL,
	body VARCHAR NOT NULL,
	facets VARCHAR NOT NULL,
	lines_json VARCHAR NOT NULL,
	PRIMARY KEY (id)
);
CREATE INDEX ix_search_doc_episode_id ON search_doc (episode_id);
-- External-content FTS5 over search_doc: the text is stored once; rows are added and removed together
-- with their search_doc rows, in the same transaction.
CREATE VIRTUAL TABLE search_fts USING fts5(
	body, facets, content='search_doc', content_rowid='id', tokenize='unicode61 remove_diacritics 2'
);
-- Which episodes the index holds, as of which finished row (ended_at) and transcript version: an
-- episode whose row changed since (a retry) or indexed by an older version is indexed again.
CREATE TABLE search_state (
	episode_id INTEGER NOT NULL,
	version INTEGER NOT NULL,
	ended_at VARCHAR NOT NULL,
	lines INTEGER NOT NULL,
	note VARCHAR NOT NULL,
	indexed_at DATETIME NOT NULL,
	PRIMARY KEY (episode_id)
);
