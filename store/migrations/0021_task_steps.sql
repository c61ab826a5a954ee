-- Multi-step tasks (issue 41): one row per task step of an episode ([[steps]], Harbor's schema 1.1), in
-- order: the step's outcome, its verifier's reward (and every key of its reward file), where in the agent
-- cast it began, its own verifier recording and output, where it was verified, what crossed into its
-- clean room (each step's end state is archived beside the casts as endstate.step<N>.tar) and how its
-- reward was read (engine/tasks/rewards.py, the verifier's observer). The episode's reward is the steps'
-- by the task's multi_step_reward_strategy (engine/tasks/steps.py aggregate).
CREATE TABLE episode_task_step (
	id INTEGER NOT NULL,
	episode_id INTEGER NOT NULL,
	position INTEGER NOT NULL,
	name VARCHAR NOT NULL,
	outcome VARCHAR NOT NULL,
	reward FLOAT,
	rewards_json VARCHAR NOT NULL,
	detail VARCHAR NOT NULL,
	marker_time FLOAT NOT NULL,
	verifier_cast VARCHAR NOT NULL,
	verifier_output VARCHAR NOT NULL,
	verify_mode VARCHAR NOT NULL,
	counted BOOLEAN NOT NULL,
	duration_s FLOAT NOT NULL,
	carry_json VARCHAR NOT NULL,
	verifier_evidence_json VARCHAR NOT NULL,
	PRIMARY KEY (id),
	FOREIGN KEY(episode_id) REFERENCES episode (id)
);
CREATE INDEX ix_episode_task_step_episode_id ON episode_task_step (episode_id);
