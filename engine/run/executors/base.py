"""The executor interface: where a claimed episode runs, behind one small API.

``engine.run.rollouts.run_batch`` owns the queue (claiming rows, stop/Ctrl-C, progress, the per-batch lock);
an executor owns only *running* a claimed episode and getting its outcome into the store. Keeping the
queue on the head means every executor inherits the same guarantees (no attempt run twice, ``--resume``
finishes exactly the unfinished rows) and an executor is small enough to add for another cluster engine.

``local`` runs episodes in a bounded thread pool against the local (or ``DOCKER_HOST``) Docker engine;
``ray`` runs them as Ray tasks on an existing cluster, each node on its own engine, and the head writes
what they send back.
"""

from __future__ import annotations

import os
import queue
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable, Sequence
from concurrent.futures import Future
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, ClassVar

from ...core.errors import BandpassError

if TYPE_CHECKING:
    from ....store.models import Batch
    from ...core.events import EventBus
    from ...core.workspace import Workspace
    from ..agents.base import Agent


class ExecutorError(BandpassError, RuntimeError):
    """An executor cannot start or keep running (no cluster, missing extra); one line for the CLI."""


@dataclass(frozen=True)
class EpisodeJob:
    """A claimed episode row: everything an executor needs to know which attempt to run."""

    episode_id: int
    version_id: int
    attempt: int
    batch_id: str


@dataclass
class RunContext:
    """What is the same for every episode of one ``run_batch`` call."""

    ws: Workspace
    batch: Batch
    agent_factory: Callable[[], Agent]
    bus: EventBus
    max_infra_retries: int = 2
    retry_backoff_s: float = 1.0


@dataclass(frozen=True)
class JobResult:
    """What the head learns when an episode is finished and its row is ``done`` in the store."""

    episode_id: int
    outcome: str
    reward: float | None = None


class Executor(ABC):
    """Runs claimed episodes; ``submit`` returns a future that resolves once the row is written.

    Contract: when a future resolves with a ``JobResult`` the episode's row is ``done`` in the head's
    store. When it raises, the row is untouched (still ``running``) and the caller records the failure
    as ``infra_error:orchestrator_failure``. ``slots`` bounds how many futures may be pending at once.
    """

    name: ClassVar[str] = ""

    @property
    @abstractmethod
    def slots(self) -> int:
        """How many episodes may be in flight at once (the caller never submits more)."""

    @abstractmethod
    def open(self, ctx: RunContext) -> None:
        """Prepares for one batch run (thread pool, cluster connection); called once before ``submit``."""

    @abstractmethod
    def submit(self, job: EpisodeJob) -> Future[JobResult]:
        """Starts one episode; never blocks for its duration."""

    def connect(self) -> None:  # noqa: B027 - optional hook
        """Reaches where episodes will run (a cluster); called before a batch is planned, so a failed
        connection leaves nothing queued. Raises ``ExecutorError``. Default: nothing to reach."""

    def cleanup_stale(self, ws: Workspace, batch_id: str) -> int:
        """Removes what a dead runner of ``batch_id`` left where episodes ran (beyond this machine's
        engine, which ``run_batch`` cleans itself); returns containers removed. Default: nothing."""
        return 0

    def wait_ready(self, stop: threading.Event, timeout_s: float) -> bool:
        """Blocks until the executor can usefully take another episode; False when it gave up.

        The local executor closes this gate while its Docker engine is away, so a stopped ``dockerd``
        costs the episodes in flight, not the whole queue. Default: always ready.
        """
        return True

    def abandon(self, episode_ids: Sequence[int]) -> None:  # noqa: B027 - optional hook
        """Best effort after an abort: stop remote work for these episodes and remove their containers."""

    @abstractmethod
    def close(self) -> None:
        """Releases pools and connections; in-flight work was already drained or abandoned."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class DaemonPool:
    """A fixed pool of *daemon* threads returning futures.

    Not ``ThreadPoolExecutor``: its workers are joined at interpreter exit, so a second Ctrl-C (which
    requeues the episodes in flight and exits) would hang until every episode finished on its own.
    """

    def __init__(self, size: int, name: str) -> None:
        self._q: queue.SimpleQueue[tuple[Future[Any], Callable[..., Any], tuple[Any, ...]] | None] = (
            queue.SimpleQueue()
        )
        self._threads = [
            threading.Thread(target=self._work, name=f"{name}-{i}", daemon=True) for i in range(size)
        ]
        for t in self._threads:
            t.start()

    def _work(self) -> None:
        while (item := self._q.get()) is not None:
            fut, fn, args = item
            if not fut.set_running_or_notify_cancel():
                continue
            try:
                fut.set_result(fn(*args))
            except BaseException as exc:  # noqa: BLE001 - handed to whoever waits on the future
                fut.set_exception(exc)

    def submit(self, fn: Callable[..., Any], *args: Any) -> Future[Any]:
        fut: Future[Any] = Future()
        self._q.put((fut, fn, args))
        return fut

    def shutdown(self) -> None:
        """Lets idle workers exit; busy ones finish their item first (nobody waits for them)."""
        for _ in self._threads:
            self._q.put(None)


__all__ = ["DaemonPool", "EpisodeJob", "Executor", "ExecutorError", "JobResult", "RunContext"]


#: Episodes in flight by default. Each holds a container (cpus/memory from task.toml) plus a terminal
#: reader thread; beyond the core count they just queue for CPU and stretch every agent's deadline.
MAX_DEFAULT_CONCURRENCY = 4


def default_concurrency() -> int:
    return max(1, min(os.cpu_count() or 1, MAX_DEFAULT_CONCURRENCY))
