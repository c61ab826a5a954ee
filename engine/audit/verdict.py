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

from bandpass.engine.core.taxonomy import ALWAYS_BLOCKING

__all__ = [
    "ACCEPTED",
    "COULD_NOT_AUDIT",
    "GUARD_CONFLICT",
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
#: The oracle tripped the tamper guard: the task is rejected until an allowance covers what it does.
GUARD_CONFLICT = "harness.guard_conflict"
#: The task needs what Bandpass cannot run as written: not its fault, but no verdict is possible.
UNSUPPORTED = "infra.unsupported_task"


def blames_task(code: str) -> bool:
    """A finding that is the task's fault (invalidity, misalignment, a guard conflict)."""
    return (code.split(".", 1)[0] in ALWAYS_BLOCKING and code not in WARNING_CODES) or code == GUARD_CONFLICT


def leaves_unanswered(code: str) -> bool:
    """A finding that leaves a check without an answer: infrastructure, or a task Bandpass cannot run."""
    return code.startswith("infra.") or code == UNSUPPORTED


def decide(reasons: list[str]) -> str:
    if any(blames_task(c) for c in reasons):
        return REJECTED
    if any(leaves_unanswered(c) for c in reasons):
        return COULD_NOT_AUDIT
    return WARNING if reasons else ACCEPTED
