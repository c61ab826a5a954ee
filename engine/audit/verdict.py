"""The audit's verdicts, and which party each finding blames.

A task version's audit ends in one of three verdicts (plus ``warning``, an accepted task with findings a
curator should read):

- ``accepted``: every check ran and the task passed them all;
- ``rejected``: the task's own fault, with the taxonomy codes that say what (its oracle fails, it leaks
  its answer, its verifier can be gamed, its Dockerfile does not build...);
- ``could_not_audit``: the audit could not get an answer, through no fault of the task — the registry was
  unreachable, every oracle try ended in an infrastructure error, or the task needs what Bandpass cannot
  run as written (a multi-step task, a separate verifier image). It is retried later
  (``bandpass audit --retry``) and never counted as a task defect.

A task defect found by a check that needs no container (a leaked solution in the Dockerfile) rejects the
task even when the build then fails for the environment: static evidence does not depend on the registry.
"""

from __future__ import annotations

from ..core.taxonomy import ALWAYS_BLOCKING

__all__ = [
    "ACCEPTED",
    "COULD_NOT_AUDIT",
    "GUARD_CONFLICT",
    "NOTE_CODES",
    "REWARD_CONFLICT",
    "REWARD_UNSCORED",
    "REJECTED",
    "UNSUPPORTED",
    "VERDICTS",
    "WARNING",
    "WARNING_CODES",
    "blames_task",
    "decide",
    "leaves_unanswered",
]

ACCEPTED = "accepted"
WARNING = "warning"
REJECTED = "rejected"
COULD_NOT_AUDIT = "could_not_audit"
VERDICTS = (ACCEPTED, WARNING, REJECTED, COULD_NOT_AUDIT)

#: Findings worth reading that do not make a task wrong.
WARNING_CODES = frozenset({"invalidity.instruction_untested", "invalidity.tests_unstated_behavior"})
#: Findings that say what Bandpass did about the task and leave the verdict as it is: the artifacts its
#: oracle needs outside the declared ones were adopted for the version (engine/audit/footprint.py), so
#: every episode is verified with them and an export declares them — nothing left for a curator to judge.
NOTE_CODES = frozenset({"invalidity.artifacts_undeclared"})
#: The oracle tripped the tamper guard: the task is rejected until an allowance covers what it does.
GUARD_CONFLICT = "harness.guard_conflict"
#: The task needs what Bandpass cannot run as written: not its fault, but no verdict is possible.
UNSUPPORTED = "infra.unsupported_task"
#: The task's own verifier (the oracle's run) leaves reward files Bandpass reads as forged: rejected until
#: the task declares the files it writes (``[metadata.bandpass] reward_files``) or its files agree.
REWARD_CONFLICT = "harness.reward_conflict"
#: The verifier writes several rewards and none is the score: rejected until a primary is declared.
REWARD_UNSCORED = "invalidity.reward_unscored"


def blames_task(code: str) -> bool:
    """A finding that is the task's fault (invalidity, misalignment, a guard conflict)."""
    quiet = WARNING_CODES | NOTE_CODES
    return (code.split(".", 1)[0] in ALWAYS_BLOCKING and code not in quiet) or code in (
        GUARD_CONFLICT,
        REWARD_CONFLICT,
    )


def leaves_unanswered(code: str) -> bool:
    """A finding that leaves a check without an answer: infrastructure, or a task Bandpass cannot run."""
    return code.startswith("infra.") or code == UNSUPPORTED


def decide(reasons: list[str]) -> str:
    if any(blames_task(c) for c in reasons):
        return REJECTED
    if any(leaves_unanswered(c) for c in reasons):
        return COULD_NOT_AUDIT
    return WARNING if [c for c in reasons if c not in NOTE_CODES] else ACCEPTED
