"""An episode try as explicit phases, each with a timeout, a timing record and typed errors.

Harbor's trial is the model: set up the environment, run the agent, capture the end state, verify,
finalise. A phase that cannot go on raises a :class:`PhaseError` subclass that *carries its outcome*, so
"what outcome does this failure mean" is answered here, in one place, and nowhere else:

- :func:`from_exception` maps Docker/OS exceptions raised inside a phase to an infra outcome;
- :func:`container_stopped` / :func:`terminal_start_failed` name the infra code of a container found
  stopped; *who* stopped it during the agent phase is judged by the attribution
  (engine/sandbox/attribution/), whose verdict becomes a :class:`SandboxEnded`: the policy's doing is an
  agent error (reward 0, never retried), anything else keeps its infra code.
"""

from __future__ import annotations

import contextlib
import errno
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from typing import Any, Protocol, TypeVar

from ..core import outcomes
from ..sandbox.container import classify_docker_error

SETUP, AGENT, CAPTURE, VERIFY, FINALISE = "setup", "agent", "capture", "verify", "finalise"
#: Only when the harness's work after a clean agent phase failed: the verifier on a fresh container.
CONTROL = "control"


class PhaseError(Exception):
    """A phase ended the try. ``outcome`` is the episode's outcome string; ``detail`` the one-line why."""

    kind = "infra_error"
    code = "orchestrator_failure"

    def __init__(self, detail: str, code: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if code is not None:
            self.code = code

    @property
    def outcome(self) -> str:
        return f"{self.kind}:{self.code}"

    @property
    def keeps_reward(self) -> bool:
        """Agent errors keep the verifier's reward as evidence; infra errors have no valid reward."""
        return self.kind == "agent_error"


class TaskUnusable(PhaseError):
    code = "orchestrator_failure"


class TaskUnsupported(PhaseError):
    """A task Bandpass cannot run as its author meant (a multi-step task): refused before any container,
    in one line; not a sample and not retried."""

    code = "unsupported_task"


class DaemonUnavailable(PhaseError):
    code = "daemon_unavailable"


class ImageBuildFailed(PhaseError):
    code = "image_build_failed"


class EnvironmentFailed(PhaseError):
    """The container could not be had (start timeout, container died at start, OOM...)."""

    code = "env_start_timeout"


class ContainerStopped(PhaseError):
    code = "container_died"


class DiskFull(PhaseError):
    """The recordings disk is full: not retryable, the next try would hit the same disk."""

    code = "disk_full"

    def __init__(self, detail: str, casts: tuple[str, ...] = ()) -> None:
        super().__init__(detail)
        self.casts = casts  # which of the result's cast attributes may be empty and must then be cleared


class AgentInfra(PhaseError):
    """Something outside the policy broke the agent phase (the endpoint rate-limited us...)."""


class VerifierInfra(PhaseError):
    """The verifier produced no valid reward (timeout, reward missing, container died under it)."""


class VerifierTamper(PhaseError):
    """The tamper guard tripped: the policy changed what the verifier relies on. A policy failure."""

    kind = "agent_error"
    code = "verifier_tamper"


class WorkdirReplaced(PhaseError):
    """The policy deleted the task's working directory or replaced it with a non-directory: nothing can
    be verified there. The policy's doing: a valid sample, reward 0 (engine/run/cleanroom.py)."""

    kind = "agent_error"
    code = "workdir_replaced"


class ArtifactInvalid(PhaseError):
    """The verifier did not pass and an artifact had to be dropped (a FIFO, device, socket or a link
    leaving its root): the policy's output was not a file the verifier could read."""

    kind = "agent_error"
    code = "artifact_invalid"


class EndstateTooLarge(PhaseError):
    """The policy left more changed entries than the end-state capture lists within its bounds
    (``endstate.Limits``: entries, seconds): what it changed cannot be told, so it is not verified. The
    policy's doing: a valid sample, reward 0 — the capture's cost never becomes an infra error."""

    kind = "agent_error"
    code = "endstate_too_large"


class PolicyVerifierTimeout(PhaseError):
    """The verifier timed out on the policy's artifacts while the oracle's verify well inside the same
    timeout: a wrong solution that loops, not the machine."""

    kind = "agent_error"
    code = "verifier_timeout"


class PolicyReward(PhaseError):
    """The reward the verifier's files held is not the verifier's: the policy's code, which the verifier
    ran, forged it (``reward_forged``) or kept the tests from judging (``verifier_hijacked``)
    (engine/run/observer.py). A policy failure: the reward is kept as evidence, the episode counts 0."""

    kind = "agent_error"
    code = "reward_forged"


class PhaseTimeout(PhaseError):
    """A phase ran past its timeout and was abandoned (its container is removed or restarted)."""


class SandboxEnded(PhaseError):
    """The container or the agent's shell ended during the agent phase (or right after it); the outcome is
    the attribution's verdict (``agent_error:sandbox_killed``/``oom``/... or an ``infra_error`` code)."""

    def __init__(self, outcome: str, detail: str) -> None:
        parsed = outcomes.Outcome.parse(outcome)
        super().__init__(detail, parsed.code)
        self.kind = parsed.kind


def disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


def from_exception(exc: BaseException, casts: tuple[str, ...] = ()) -> PhaseError:
    """The one mapping from an exception escaping a phase to an outcome."""
    if isinstance(exc, PhaseError):
        return exc
    if disk_full(exc):
        return DiskFull(f"recordings disk full: {exc}", casts)
    return PhaseError(str(exc), classify_docker_error(exc))


class _Stoppable(Protocol):
    def oom_killed(self) -> bool: ...

    def is_running(self) -> bool: ...


def container_stopped(sandbox: _Stoppable, detail: str) -> ContainerStopped:
    """The infra code of a container found stopped: ``oom`` when the kernel killed it for memory, else
    ``container_died``. During the agent phase the attribution then decides whether the policy did it."""
    return ContainerStopped(detail, "oom" if sandbox.oom_killed() else "container_died")


def start_failure_code(sandbox: _Stoppable) -> str:
    """Why a terminal (the agent's or the verifier's) did not start: the container is gone (``oom`` /
    ``container_died``) or it runs and was only slow to answer (``env_start_timeout``, which a loaded
    machine produces on its own)."""
    if sandbox.oom_killed():
        return "oom"
    if not sandbox.is_running():
        return "container_died"
    return "env_start_timeout"


def terminal_start_failed(sandbox: _Stoppable, exc: BaseException) -> AgentInfra:
    """The agent's terminal did not start (see :func:`start_failure_code`)."""
    return AgentInfra(f"agent terminal did not start: {exc}", start_failure_code(sandbox))


def agent_outcome(error_code: str) -> str:
    return outcomes.agent_error(error_code)


_T = TypeVar("_T")


def bounded(
    fn: Callable[[], _T],
    timeout_s: float,
    *,
    what: str,
    code: str,
    on_timeout: Callable[[], object] | None = None,
) -> _T:
    """Runs ``fn`` with its phase's timeout *enforced*: past ``timeout_s`` the phase is abandoned,
    ``on_timeout`` unblocks what it waited on (removes or restarts the container), and
    :class:`PhaseTimeout` carries ``code``. A hung ``docker exec`` (a FIFO the policy left where the
    harness reads) cannot hold an episode any longer than its phase's budget."""
    value: list[_T] = []  # what ``fn`` returned, or
    error: list[BaseException] = []  # what it raised, handed to the caller's thread

    def run() -> None:
        try:
            value.append(fn())
        except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
            error.append(exc)

    t = threading.Thread(target=run, name=f"bandpass-phase-{what}", daemon=True)
    t.start()
    t.join(timeout_s)
    if t.is_alive():
        if on_timeout is not None:
            with contextlib.suppress(Exception):
                on_timeout()
        t.join(5)
        raise PhaseTimeout(f"{what} ran past its {timeout_s:g} s and was stopped", code)
    if error:
        raise error[0]
    return value[0]


@dataclass
class PhaseRecord:
    """How long a phase took against its budget, and the outcome it ended the try with, if any."""

    name: str
    timeout_s: float
    duration_s: float = 0.0
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class PhaseClock:
    """Times each phase; a PhaseError raised inside one is noted on its record and passed on."""

    records: list[PhaseRecord] = field(default_factory=list)

    @contextmanager
    def phase(self, name: str, timeout_s: float) -> Iterator[PhaseRecord]:
        rec = PhaseRecord(name, float(timeout_s))
        self.records.append(rec)
        started = time.monotonic()
        try:
            yield rec
        except PhaseError as exc:
            rec.error = exc.outcome
            raise
        except BaseException as exc:
            rec.error = type(exc).__name__
            raise
        finally:
            rec.duration_s = round(time.monotonic() - started, 4)

    def as_list(self) -> list[dict[str, Any]]:
        return [r.as_dict() for r in self.records]
