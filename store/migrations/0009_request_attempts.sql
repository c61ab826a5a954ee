-- Every HTTP request behind a policy step (latency, error, backoff before the next try), as a JSON list:
-- a step that timed out twice and then answered cost all three requests, and a slow server must show.
ALTER TABLE step ADD COLUMN attempts_json VARCHAR NOT NULL DEFAULT '[]';
