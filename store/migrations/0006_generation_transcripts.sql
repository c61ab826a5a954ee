-- Schema 5: generation attempts a curator can list and read. `turns` (replies taken as turns),
-- `lost_tokens_in/out` (tokens of streams that broke or ended without a stop reason: retried, never a turn,
-- kept apart from the billed totals) and `detail` (the one line explaining a failure: what, URL, the
-- server's own message).
ALTER TABLE generation ADD COLUMN turns INTEGER NOT NULL DEFAULT 0;
ALTER TABLE generation ADD COLUMN lost_tokens_in INTEGER NOT NULL DEFAULT 0;
ALTER TABLE generation ADD COLUMN lost_tokens_out INTEGER NOT NULL DEFAULT 0;
ALTER TABLE generation ADD COLUMN detail VARCHAR NOT NULL DEFAULT '';
