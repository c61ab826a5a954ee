"""Episode outcomes (DESIGN.md, "Outcomes and accounting").

Exactly one per episode: ``passed``, ``failed`` (a valid reward < 1), ``agent_error:<code>`` (the harness
or the policy broke the episode: its reward, if the verifier still ran, is evidence, not the outcome), or
``infra_error:<code>`` (no valid reward at all). Infra errors are retried and never counted as failures.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import InvalidInput

PASSED = "passed"
FAILED = "failed"

AGENT_CODES = (
    "parse_error",
    "turn_limit",
    "context_overflow",
    "config_mismatch",
    "agent_timeout",
    "agent_crashed",
    "output_limit",  # the model's reply hit its output-token limit (Harbor's OutputTokenExceededError)
    "refused",  # the model refused the task (Harbor's AgentSafetyRefusalError): a valid failed sample
    "verifier_tamper",  # the tamper guard tripped: a policy failure, never passed, never infra
    # the policy ended or exhausted its own sandbox during the agent phase (engine/sandbox/attribution/):
    # valid samples with reward 0, never retried; the same death caused from outside stays infra
    "sandbox_killed",
    "oom",
    "pids_exhausted",
    "disk_full",
    # what the policy left cannot be verified as it stands (engine/run/cleanroom.py): valid samples, reward 0
    "workdir_replaced",  # the task's working directory deleted or replaced by a non-directory
    "artifact_invalid",  # an artifact was a FIFO, device, socket or escaping link (dropped) and it failed
    "endstate_too_large",  # the end state is more than a capture lists within its bounds (endstate.Limits)
    "verifier_timeout",  # the verifier timed out on the agent's artifacts; the oracle's verify well inside
    # the verifier runs the policy's code (engine/run/observer.py): the reward is not the verifier's
    "reward_forged",  # a reward file the tests never write, the two disagreeing, or one written after test.sh
    "verifier_hijacked",  # test.sh stopped or killed, or a pytest session that never finished, yet it paid
)
INFRA_CODES = (
    "image_build_failed",
    "env_start_timeout",
    "container_died",
    "oom",
    "verifier_timeout",
    "reward_missing",
    "rate_limited",
    "policy_unavailable",
    "policy_auth",
    "policy_model_not_found",
    "policy_rejected",
    "daemon_unavailable",
    "disk_full",
    "orchestrator_failure",
    "agent_crashed",  # an imported Harbor trial whose agent process crashed: Harbor voids its reward
    "cancelled",
    "unsupported_task",  # a task Bandpass cannot run as written (a verifier image, privileges): not retried
    "reward_unscored",  # valid reward files, but no rule picks the scalar: declare a primary reward
    # a multi-step task's first step could not be prepared (its setup.sh failed) before the policy acted:
    # the task's or the environment's, never retried (the same script fails again)
    "env_setup_failed",
)

#: Infra codes worth another try: the same inputs may well succeed (a build error will not). Not retried:
#: ``verifier_timeout``/``reward_missing``/``reward_unscored`` (the verifier judges the same end state
#: again, and the clean room already took the policy out of it), ``oom`` (the same task, the same limit),
#: build and disk errors.
RETRYABLE_INFRA = frozenset(
    {"env_start_timeout", "container_died", "rate_limited", "policy_unavailable", "daemon_unavailable"}
)


AGENT = "agent_error"
INFRA = "infra_error"
Kind = Literal["passed", "failed", "agent_error", "infra_error", ""]


@dataclass(frozen=True)
class Outcome:
    """An outcome as a value: its kind and, for errors, its code.

    The database, the casts and every export keep the text form (``agent_error:oom``); code that needs to
    know *what* an outcome is parses it once, here, instead of splitting strings. ``oom`` and ``disk_full``
    exist as both agent and infra codes: only the kind tells who caused them.
    """

    kind: Kind
    code: str = ""

    @classmethod
    def parse(cls, text: str | None) -> Outcome:
        """``""``/``None``: an unfinished episode. Unknown kinds raise: a stored outcome is not free text."""
        if not text:
            return cls("")
        if text in (PASSED, FAILED):
            return cls(text)  # type: ignore[arg-type]  # narrowed by the membership test
        kind, sep, code = text.partition(":")
        if not sep or kind not in (AGENT, INFRA) or not code:
            raise InvalidInput(
                f"not an outcome: {text!r} (expected passed, failed, agent_error:CODE or infra_error:CODE)"
            )
        return cls(kind, code)  # type: ignore[arg-type]  # narrowed by the membership test

    @property
    def is_infra(self) -> bool:
        return self.kind == INFRA

    @property
    def is_agent_error(self) -> bool:
        return self.kind == AGENT

    @property
    def is_valid_sample(self) -> bool:
        return bool(self.kind) and self.kind != INFRA

    def __str__(self) -> str:
        return f"{self.kind}:{self.code}" if self.code else self.kind


def agent_error(code: str) -> str:
    return f"agent_error:{code}"


def infra_error(code: str) -> str:
    return f"infra_error:{code}"


def is_infra(outcome: str) -> bool:
    return outcome.startswith(INFRA + ":")


def is_agent_error(outcome: str) -> bool:
    return outcome.startswith(AGENT + ":")


def kind_of(outcome: str) -> str:
    """``passed``, ``failed``, ``agent_error``, ``infra_error`` (or ``""`` for an unfinished episode)."""
    return outcome.partition(":")[0]


def is_valid_sample(outcome: str) -> bool:
    """Valid samples enter pass@k's n: everything but infra errors (and unfinished episodes)."""
    return bool(outcome) and not is_infra(outcome)


def code_of(outcome: str) -> str:
    return outcome.split(":", 1)[1] if ":" in outcome else outcome


def counted_reward(outcome: str, reward: float | None) -> float | None:
    """The reward an episode counts for, everywhere a reward is listed or exported (one truth per
    number): ``passed``/``failed`` keep the verifier's; an ``agent_error`` counts 0 — the policy broke
    the episode, so a reward the verifier still gave (a forged 1 after ``verifier_tamper``) is evidence,
    never a success; an ``infra_error`` has none (no valid reward: mask it); unfinished: none."""
    if not outcome or is_infra(outcome):
        return None
    if is_agent_error(outcome):
        return 0.0
    return reward


def reward_label(outcome: str, reward: float | None) -> str:
    """The counted reward as lists show it, saying why when it is not the verifier's: ``1``, ``0``,
    ``0 (verifier gave 1: void)`` for an agent error whose verifier still paid out, ``none (infra)``."""
    if outcome and is_infra(outcome):
        return "none (infra)"
    counted = counted_reward(outcome, reward)
    if counted is None:
        return "—"
    if is_agent_error(outcome) and reward:
        return f"0 (verifier gave {reward:g}: void)"
    return f"{counted:g}"


def from_reward(reward: float) -> str:
    return PASSED if reward >= 1.0 else FAILED


#: The failure-tag suggestion for an outcome code; a curator confirms it (DESIGN.md, "Failure tags").
SUGGESTED_TAG = {
    "parse_error": "harness.parse_error",
    "turn_limit": "harness.turn_limit",
    "context_overflow": "harness.context_overflow",
    "config_mismatch": "harness.config_mismatch",
    "agent_timeout": "harness.agent_timeout",
    "verifier_tamper": "misalignment.reward_hack",
    "image_build_failed": "infra.image_build_failed",
    "env_start_timeout": "infra.env_start_timeout",
    "container_died": "infra.container_died",
    "oom": "infra.oom",
    "verifier_timeout": "infra.verifier_crash",
    "reward_missing": "infra.reward_missing",
    "reward_unscored": "infra.reward_unscored",
    "reward_forged": "misalignment.reward_hack",
    "verifier_hijacked": "misalignment.reward_hack",
    "rate_limited": "infra.rate_limited",
    "policy_unavailable": "infra.policy_unavailable",
    "policy_auth": "infra.policy_auth",
    "policy_model_not_found": "infra.policy_model_not_found",
    "policy_rejected": "infra.policy_rejected",
    "daemon_unavailable": "infra.daemon_unavailable",
    "disk_full": "infra.disk_full",
    "orchestrator_failure": "infra.orchestrator_failure",
    "unsupported_task": "infra.unsupported_task",
    "env_setup_failed": "infra.env_setup_failed",
    "agent_crashed": "harness.agent_crashed",
    "sandbox_killed": "agent.sandbox_killed",
    "pids_exhausted": "agent.pids_exhausted",
    "workdir_replaced": "agent.workdir_replaced",
    "artifact_invalid": "agent.artifact_invalid",
    "endstate_too_large": "agent.endstate_too_large",
}
#: Codes whose meaning depends on who caused them (``agent_error:oom`` vs ``infra_error:oom``).
SUGGESTED_TAG_BY_OUTCOME = {
    "agent_error:oom": "agent.oom",
    "agent_error:disk_full": "agent.disk_full",
    "agent_error:verifier_timeout": "agent.verifier_timeout",
}


def suggested_tag(outcome: str) -> str | None:
    return SUGGESTED_TAG_BY_OUTCOME.get(outcome) or SUGGESTED_TAG.get(code_of(outcome))
