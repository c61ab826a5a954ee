"""Harbor 0.25's exception policy (``harbor/models/trial/error_policy.py``), as Bandpass outcomes.

Harbor records a failed trial as ``exception_info.exception_type`` (a class name) and decides from that name
alone whether the trial's reward stays *valid*: only the causes ``agent_exhausted_budget`` (the agent ran
out of time, context or output tokens) and ``agent_refused_task`` keep it (``TrialResult.reward_valid``).
Bandpass follows that exactly:

- a **reward-valid** exception is the policy's: the trial is a valid sample in n — ``passed`` when the
  verifier still gave 1, else ``agent_error:<code>`` (a failure; with no verifier run, a failure with no
  reward, as Harbor's own pass@k counts it);
- every **other** known exception makes the reward invalid: ``infra_error:<code>``, out of n, counted apart
  (Harbor counts ``NonZeroAgentExitCodeError`` here too: the agent process crashed, whatever the verifier
  said);
- an **unknown** name is Harbor's "unclassified", reward invalid: ``infra_error:<Type>``, listed at the
  end of the import so the curator sees it.

A multi-step trial's reward is valid only when every exception recorded, the trial's and each step's, is.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..core import outcomes

__all__ = ["POLICY", "Cause", "outcome_for"]


@dataclass(frozen=True)
class Cause:
    cause: str  # Harbor's FailureCause
    reward_valid: bool
    code: str  # the Bandpass outcome code


def _table() -> dict[str, Cause]:
    t: dict[str, Cause] = {}

    def put(cause: str, valid: bool, code: str, *names: str) -> None:
        for n in names:
            t[n] = Cause(cause, valid, code)

    put("agent_exhausted_budget", True, "agent_timeout", "AgentTimeoutError")
    put(
        "agent_exhausted_budget",
        True,
        "context_overflow",
        "ContextWindowExceededError",
        "ContextLengthExceededError",
    )
    put(
        "agent_exhausted_budget",
        True,
        "output_limit",
        "OutputTokenExceededError",
        "OutputLengthExceededError",
    )
    put("agent_refused_task", True, "refused", "AgentSafetyRefusalError", "ContentPolicyViolationError")
    put(
        "sandbox_failed",
        False,
        "env_start_timeout",
        "EnvironmentStartTimeoutError",
        "AgentSetupTimeoutError",
        "HealthcheckError",
        "SSHAccessError",
        "GKEExecStreamClosedError",
        "GKEPodNotFoundError",
        "RuntimeRequestError",
    )
    put("sandbox_failed", False, "image_build_failed", "SandboxBuildFailedError")
    put("sandbox_failed", False, "oom", "SandboxLikelyOutOfMemoryError", "MemoryLimitExceededError")
    put("sandbox_failed", False, "orchestrator_failure", "AddTestsDirError", "DownloadVerifierDirError")
    put("model_provider_failed", False, "rate_limited", "ApiRateLimitError", "RateLimitError")
    put(
        "model_provider_failed",
        False,
        "policy_unavailable",
        "ApiError",
        "ApiInternalServerError",
        "ApiOverloadedError",
        "ApiConnectionClosedError",
        "ApiResponseStalledError",
        "UnknownApiError",
        "NetworkConnectionError",
        "ApiConnectionError",
        "ApiUsageLimitError",
        "InternalServerError",
        "ServiceUnavailableError",
        "APIConnectionError",
        "APIError",
        "Timeout",
    )
    put(
        "model_provider_failed",
        False,
        "policy_rejected",
        "BadRequestError",
        "UnprocessableEntityError",
        "UnsupportedParamsError",
        "APIResponseValidationError",
        "BudgetExceededError",
    )
    put("model_provider_failed", False, "policy_auth", "AgentAuthenticationError", "AuthenticationError")
    put("model_provider_failed", False, "policy_auth", "PermissionDeniedError")
    put(
        "model_provider_failed",
        False,
        "policy_model_not_found",
        "ModelNotFoundError",
        "ApiProviderResourceNotFoundError",
        "NotFoundError",
    )
    put(
        "harbor_failed",
        False,
        "orchestrator_failure",
        "ServiceOperationsUnsupportedError",
        "VercelScopeError",
        "DspyImportError",
        "MissingExtraError",
        "RegradeError",
    )
    put("unclassified", False, "agent_crashed", "NonZeroAgentExitCodeError")
    put("verifier_failed", False, "verifier_timeout", "VerifierTimeoutError")
    put(
        "verifier_failed",
        False,
        "reward_missing",
        "RewardFileNotFoundError",
        "RewardFileEmptyError",
        "VerifierOutputParseError",
    )
    put("cancelled", False, "cancelled", "CancelledError")
    return t


#: Harbor 0.25's exception class name -> its cause, reward validity and Bandpass code.
POLICY: dict[str, Cause] = _table()


def outcome_for(exception_types: list[str], reward: float | None) -> tuple[str, list[str]]:
    """(outcome, unknown exception names) for a trial that recorded ``exception_types`` (trial first, then
    its steps') and whose verifier gave ``reward``."""
    unknown = [t for t in exception_types if t not in POLICY]
    if unknown:
        return outcomes.infra_error(unknown[0]), unknown
    causes = [POLICY[t] for t in exception_types]
    invalid = next((c for c in causes if not c.reward_valid), None)
    if invalid is not None:
        return outcomes.infra_error(invalid.code), []
    if reward is not None and reward >= 1.0:
        return outcomes.PASSED, []
    if causes:
        return outcomes.agent_error(causes[0].code), []
    if reward is None:
        return outcomes.infra_error("reward_missing"), []
    return outcomes.from_reward(reward), []
