"""The default executor: a bounded thread pool on this machine's Docker engine (or ``DOCKER_HOST``'s).

Each worker thread keeps one Docker client (a client per thread, as before executors existed) and calls
``run_episode``, which writes the store itself: on one machine the store is right here. A version's image
is built once before its first episode so k concurrent workers do not start the same build.

When an episode ends ``infra_error:daemon_unavailable`` the engine is gone (stopped, restarting, the
remote host unreachable): claiming more would only turn the rest of the queue into infra errors, so the
gate (``wait_ready``) holds new claims until the engine answers again, removes what the outage left
behind, and lets the batch continue. The wait is bounded; after it the batch stops unfinished and
``bandpass run --resume`` picks it up.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Sequence
from concurrent.futures import Future
from typing import Any

from ...core import outcomes
from ...sandbox import pool as sandbox_pool
from .base import (
    DaemonPool,
    EpisodeJob,
    Executor,
    ExecutorError,
    JobResult,
    RunContext,
    default_concurrency,
)

log = logging.getLogger(__name__)

DAEMON_DOWN = outcomes.infra_error("daemon_unavailable")


class LocalExecutor(Executor):
    """Episodes in ``concurrency`` threads on the local Docker engine."""

    name = "local"

    def __init__(self, concurrency: int | None = None, *, probe_interval_s: float = 1.0) -> None:
        self._slots = max(1, concurrency or default_concurrency())
        self.probe_interval_s = probe_interval_s
        self._ctx: RunContext | None = None
        self._pool: DaemonPool | None = None
        self._lock = threading.Lock()
        self._tls = threading.local()
        self._generation = 0  # bumped when the engine comes back: every thread reconnects
        self._down: list[int] = []  # episodes that ended daemon_unavailable since the engine was last seen
        self._version_locks: dict[int, threading.Lock] = {}
        self._built: set[int] = set()

    @property
    def slots(self) -> int:
        return self._slots

    def open(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._pool = DaemonPool(self._slots, f"rollout-{ctx.batch.id}")

    def submit(self, job: EpisodeJob) -> Future[JobResult]:
        if self._pool is None:
            raise ExecutorError("local executor used before open()")
        return self._pool.submit(self._run, job)

    # --- one episode --------------------------------------------------------------------------------

    def _client(self) -> Any:
        """This thread's Docker client, or None when the engine is away (the episode then reports it)."""
        if getattr(self._tls, "generation", None) == self._generation and self._tls.client is not None:
            return self._tls.client
        from ...sandbox.docker_engine import get_client

        try:
            client = get_client()
        except Exception as exc:  # noqa: BLE001 - the episode will end infra_error:daemon_unavailable
            log.warning("no Docker client for a rollout worker: %s", exc)
            client = None
        self._tls.client, self._tls.generation = client, self._generation
        return client

    def _prebuild(self, client: Any, version_id: int) -> None:
        """Builds a version's image once, before its first episode. Failures are left for the episode
        itself to report (as its outcome)."""
        ctx = self._ctx
        assert ctx is not None
        with self._lock:
            vlock = self._version_locks.setdefault(version_id, threading.Lock())
        with vlock:
            if version_id in self._built or client is None:
                return
            from ....store import queries
            from ....store.db import session
            from ...tasks.taskdir import load_task
            from ..episode import ensure_image

            try:
                with session(ctx.ws.engine) as s:
                    version = queries.get_version(s, version_id)
                assert version is not None
                ensure_image(ctx.ws, client, version, load_task(ctx.ws.abs(version.path)), ctx.bus)
            except Exception as exc:  # noqa: BLE001 - a pre-build only: the episode reports the failure
                log.info("pre-build of version %s failed (the episode will report it): %s", version_id, exc)
            self._built.add(version_id)

    def _run(self, job: EpisodeJob) -> JobResult:
        from ..episode import run_episode

        ctx = self._ctx
        assert ctx is not None
        client = self._client()
        self._prebuild(client, job.version_id)
        res = run_episode(
            ctx.ws,
            job.version_id,
            ctx.agent_factory,
            client=client,
            bus=ctx.bus,
            episode_id=job.episode_id,
            attempt=job.attempt,
            batch_id=job.batch_id,
            max_infra_retries=ctx.max_infra_retries,
            retry_backoff_s=ctx.retry_backoff_s,
        )
        if res.outcome == DAEMON_DOWN:
            with self._lock:
                self._down.append(job.episode_id)
            self._tls.client = None
        return JobResult(job.episode_id, res.outcome, res.reward)

    # --- the engine gate ----------------------------------------------------------------------------

    def wait_ready(self, stop: threading.Event, timeout_s: float) -> bool:
        """Holds claims while the engine is away; True once it answers (after cleaning up), False when
        ``stop`` was set or ``timeout_s`` passed first."""
        with self._lock:
            if not self._down:
                return True
        from ...sandbox.docker_engine import DockerUnavailable, get_client

        log.warning("Docker engine unavailable: holding new episodes until it answers (%.0fs)", timeout_s)
        deadline = time.monotonic() + timeout_s
        while not stop.is_set():
            try:
                get_client()
            except DockerUnavailable:
                if time.monotonic() >= deadline:
                    return False
                stop.wait(self.probe_interval_s)
                continue
            with self._lock:
                down, self._down = self._down, []
                self._generation += 1
            self.abandon(down)  # containers a dead engine could not remove are there again now
            log.warning("Docker engine is back: continuing the batch")
            return True
        return False

    def abandon(self, episode_ids: Sequence[int]) -> None:
        if self._ctx is not None and episode_ids:
            sandbox_pool.remove_episode_containers(self._ctx.ws.root, episode_ids)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


__all__ = ["LocalExecutor"]
