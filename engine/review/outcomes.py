"""Episode outcomes (DESIGN.md, "Outcomes and accounting").

Exactly one per episode: ``passed``, ``failed`` (a valid reward < 1), ``agent_error:<code>`` (the harness
or the policy broke the episode: its reward, if the verifier still ran, is evidence, not the outcome), or
``infra_error:<code>`` (no valid reward at all). Infra errors are retried and never counted as failures.
"""

from __future__ import annotations

PASSED = "passed"
FAILED = "failed"

AGENT_CODES = (
    "parse_error",
    "turn_limit",
    "context_overflow",
    "config_mismatch",
    "agent_timeout",
    "agent_crashed",
    "verifier_tamper",  # the tamper guard tripped: a policy failure, never passed, never infra
    # the policy ended or exhausted its own sandbox during the agent phase (engine/sandbox/attribution.py):
    # valid samples with reward 0, never retried; the same death caused from outside stays infra
    "sandbox_killed",
    "oom",
    "pids_exhausted",
    "disk_full",
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
)

#: Infra codes worth another try: the same inputs may well succeed (a build error will not).
RETRYABLE_INFRA = frozenset(
    {"env_start_timeout", "container_died", "rate_limited", "policy_unavailable", "daemon_unavailable"}
)


def agent_error(code: str) -> str:
    return f"agent_error:{code}"


def infra_error(code: str) -> str:
    return f"infra_error:{code}"


def is_infra(outcome: str) -> bool:
    return outcome.startswith("infra_error:")


def is_valid_sample(outcome: str) -> bool:
    """Valid samples enter pass@k's n: everything but infra errors (and unfinished episodes)."""
    return bool(outcome) and not is_infra(outcome)


def code_of(outcome: str) -> str:
    return outcome.split(":", 1)[1] if ":" in outcome else outcome


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
    "rate_limited": "infra.rate_limited",
    "policy_unavailable": "infra.policy_unavailable",
    "policy_auth": "infra.policy_auth",
    "policy_model_not_found": "infra.policy_model_not_found",
    "policy_rejected": "infra.policy_rejected",
    "daemon_unavailable": "infra.daemon_unavailable",
    "disk_full": "infra.disk_full",
    "orchestrator_failure": "infra.orchestrator_failure",
    "agent_crashed": "harness.agent_crashed",
    "sandbox_killed": "agent.sandbox_killed",
    "pids_exhausted": "agent.pids_exhausted",
}
#: Codes whose meaning depends on who caused them (``agent_error:oom`` vs ``infra_error:oom``).
SUGGESTED_TAG_BY_OUTCOME = {
    "agent_error:oom": "agent.oom",
    "agent_error:disk_full": "agent.disk_full",
}


def suggested_tag(outcome: str) -> str | None:
    return SUGGESTED_TAG_BY_OUTCOME.get(outcome) or SUGGESTED_TAG.get(code_of(outcome))
