-- Reward dimensions and the verifier's own evidence (issues #40, #41): every key of the verifier's
-- reward.json (Harbor's "rewards"; {"reward": x} for a reward.txt), and how the reward was read: which
-- rule gave the scalar, the files as they were when tests/test.sh exited, test.sh's exit status, the
-- processes still alive then, the pytest sessions the observer saw, and why a reward was void.
ALTER TABLE episode ADD COLUMN rewards_json VARCHAR NOT NULL DEFAULT '';
ALTER TABLE episode ADD COLUMN verifier_json VARCHAR NOT NULL DEFAULT '';
