-- Clean-room verification (issue #27): where each episode's verifier ran (clean_room | in_place; '' before
-- the clean room existed: in place), what crossed into the clean room (or what stayed alive in place), and
-- the verification mode the audit settled for a task version ('' = the task's own or the default).
ALTER TABLE episode ADD COLUMN verify_mode VARCHAR NOT NULL DEFAULT '';
ALTER TABLE episode_endstate ADD COLUMN carry_json VARCHAR NOT NULL DEFAULT '{}';
ALTER TABLE task_version ADD COLUMN verify_mode VARCHAR NOT NULL DEFAULT '';
