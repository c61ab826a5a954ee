"""Rollout batches: k attempts per task version for one agent, queued in the database, run concurrently.

A batch is planned first (one ``batch`` row plus one *queued* episode row per (version, attempt)) and run
second: workers claim queued rows one at a time with an atomic UPDATE and hand each to ``run_episode``.
Because the plan lives in the store, not in the runner's memory, a runner that crashes, is SIGKILLed or is
stopped with Ctrl-C loses nothing but the episodes in flight: ``bandpass run --resume`` requeues those and
finishes only what is unfinished, never duplicating a finished attempt (which would bias pass@k).

Runners coordinate through a lock file per batch: each live runner holds it *shared*; requeuing stale
``running`` rows (and removing their leftover containers) is done only by a runner that could take it
*exclusively*, i.e. when no other runner is alive to own those rows. The kernel drops the lock of a killed
process, so no stale-lock cleanup is ever needed.

Claiming stays here whatever runs the episodes: ``engine.run.executors`` decides only *where* a claimed row
runs (``local``: a thread pool on this Docker engine; ``ray``: tasks on a Ray cluster, the head writing
what they return), so every executor keeps the no-duplicates and ``--resume`` guarantees above.

A batch can grow while it runs: ``run_batch(next_round=...)`` calls the hook whenever the queue is empty
(and again after each episode that finishes meanwhile); the hook adds rows with ``extend_batch`` and says
how many. The adaptive sampler (``engine.calibration.adaptive``) is such a hook: its rounds are rows in
the same queue, claimed, resumed and run on any executor exactly like the first ones, and the executor
stays open between rounds.
"""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.models import Batch, pk
from ..core import outcomes
from ..core.errors import BandpassError
from ..core.events import EventBus
from ..core.events import bus as default_bus
from ..core.runner_lock import runner_lock
from ..core.workspace import Workspace
from ..sandbox import leftovers
from ..sandbox import pool as sandbox_pool
from . import hooks
from .agents.base import Agent
from .agents.factory import (
    AgentConfigError,
    batch_agent_factory,
)
from .executors.base import (
    EpisodeJob,
    Executor,
    JobResult,
    RunContext,
    default_concurrency,
)
from .executors.local import LocalExecutor

log = logging.getLogger(__name__)

#: How long new claims wait for a Docker engine that went away mid-batch before the batch stops unfinished
#: (``--resume`` continues it). Long enough for a dockerd restart or upgrade.
DEFAULT_DAEMON_WAIT_S = 300.0
#: This many episodes in a row ending ``infra_error:policy_unavailable`` stop the batch: the endpoint is
#: down, and every further episode would only burn a container start to record the same infra error.
#: The rest stay queued for ``--resume`` once the endpoint is back.
DEFAULT_MAX_CONSECUTIVE_UNAVAILABLE = 3
POLICY_UNAVAILABLE = "infra_error:policy_unavailable"


class BatchError(BandpassError, RuntimeError):
    """A batch cannot be planned or run; the message is the one line the CLI prints."""


def new_batch_id() -> str:
    """Sortable and readable in a terminal: ``b20250101-120000-1a2b``."""
    return f"b{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


# --- planning -----------------------------------------------------------------------------------------


def _check_agent(model_name: str, kind: str) -> None:
    if kind not in ("model", "builtin"):
        raise BatchError(f"unknown batch kind {kind!r} (model or builtin)")
    if kind == "builtin":
        from .agents.builtin import BUILTIN

        if model_name not in BUILTIN:
            raise BatchError(
                f"unknown built-in agent {model_name!r} (built-in: {', '.join(sorted(BUILTIN))})"
            )
    if not model_name:
        raise BatchError("a batch needs a model or agent name")


def new_batch(
    ws: Workspace,
    model_name: str,
    k: int,
    *,
    batch_id: str | None = None,
    kind: str = "model",
    base_url: str = "",
    params: dict[str, Any] | None = None,
    adaptive: dict[str, Any] | None = None,
) -> str:
    """Creates an empty batch row (no episodes yet) and returns its id: a batch that grows while it runs
    (``extend_batch``) starts here; ``adaptive`` is stored with it in the same transaction."""
    if k < 1:
        raise BatchError(f"k must be at least 1, got {k}")
    _check_agent(model_name, kind)
    batch_id = batch_id or new_batch_id()
    with session(ws.engine) as s:
        if queries.get_batch(s, batch_id) is not None:
            raise BatchError(f"batch {batch_id} already exists")
        queries.create_batch(
            s, batch_id, agent=model_name, kind=kind, base_url=base_url, k=k, params=params or {}
        )
        if adaptive is not None:
            s.flush()
            queries.set_batch_adaptive(s, batch_id, adaptive)
    return batch_id


def plan_batch(
    ws: Workspace,
    model_name: str,
    version_ids: Sequence[int],
    k: int,
    *,
    batch_id: str | None = None,
    kind: str = "model",
    base_url: str = "",
    params: dict[str, Any] | None = None,
) -> str:
    """Creates the batch and its queued episodes (attempts ``0..k-1`` per version); returns the batch id.

    Idempotent per batch id: planning an existing batch again adds only the (version, attempt) rows it
    lacks, so a re-run of the same command can never double-count an attempt.
    """
    if k < 1:
        raise BatchError(f"k must be at least 1, got {k}")
    _check_agent(model_name, kind)
    if not version_ids:
        raise BatchError("no task versions to run (import tasks first: bandpass import DIR)")
    batch_id = batch_id or new_batch_id()
    with session(ws.engine) as s:
        batch = queries.get_batch(s, batch_id)
        if batch is None:
            queries.create_batch(
                s,
                batch_id,
                agent=model_name,
                kind=kind,
                base_url=base_url,
                k=k,
                params=params or {},
            )
        elif (batch.agent, batch.kind) != (model_name, kind):
            raise BatchError(f"batch {batch_id} already exists for {batch.kind} {batch.agent!r}")
        have = {(e.task_version_id, e.attempt) for e in queries.episodes(s, batch_id=batch_id)}
        for vid in dict.fromkeys(version_ids):
            if queries.get_version(s, vid) is None:
                raise BatchError(f"task version {vid} does not exist")
            for attempt in range(k):
                if (vid, attempt) not in have:
                    queries.create_episode(s, vid, model_name, attempt=attempt, batch_id=batch_id)
    return batch_id


def extend_batch(ws: Workspace, batch_id: str, attempts: dict[int, int]) -> int:
    """Queues ``attempts[version]`` more attempts of each version in the batch, numbered after the
    version's last attempt in it; returns how many rows were added. Used between rounds of a batch that
    grows while it runs (``run_batch(next_round=...)``)."""
    added = 0
    with session(ws.engine) as s:
        batch = queries.get_batch(s, batch_id)
        if batch is None:
            raise BatchError(f"no batch {batch_id!r} in {ws.root}")
        have = queries.batch_attempts(s, batch_id)
        for vid, extra in attempts.items():
            if extra <= 0:
                continue
            if queries.get_version(s, vid) is None:
                raise BatchError(f"task version {vid} does not exist")
            first = have[vid].last + 1 if vid in have else 0
            for attempt in range(first, first + extra):
                queries.create_episode(s, vid, batch.agent, attempt=attempt, batch_id=batch_id)
                added += 1
    return added


def get_batch(ws: Workspace, batch_id: str) -> Batch:
    with session(ws.engine) as s:
        batch = queries.get_batch(s, batch_id)
    if batch is None:
        raise BatchError(f"no batch {batch_id!r} in {ws.root}")
    return batch


def latest_unfinished_batch(ws: Workspace) -> str | None:
    """The newest batch with queued or running episodes (what ``--resume`` without an id picks)."""
    with session(ws.engine) as s:
        return queries.latest_unfinished_batch_id(s)


def check_policy_endpoint(
    ws: Workspace, model: str, base_url: str | None, timeout: float = 30.0
) -> list[str]:
    """What ``bandpass policy check`` does (list the served models, ask for one token), run before a
    model batch starts any container; raises ``BatchError`` with the one line to show when the endpoint
    cannot serve, so a dead endpoint costs a second instead of a batch of infra errors. Returns the
    check's warnings (e.g. bandpass.toml's window larger than the served ``max_model_len``)."""
    from .policy.client import PolicyInfraError, check_endpoint, resolve_model

    try:
        cfg = resolve_model(ws.config, model, base_url)
    except ValueError as exc:
        raise BatchError(str(exc)) from None
    try:
        return check_endpoint(cfg, timeout=timeout).warnings
    except PolicyInfraError as exc:
        raise BatchError(f"policy endpoint not ready, nothing was run: {exc.detail}") from None


def parse_retry_codes(text: str) -> list[str]:
    """``--retry CODE[,CODE]`` to infra codes (``oom``, ``infra_error:oom`` or ``infra_error`` for all).

    Only infra errors can be retried: they are not samples, so re-running them adds the sample the batch
    lacks. Re-running a *valid* sample (failed, agent_error) only when it failed would keep the lucky
    reruns and inflate pass@k, so those codes are refused with that reason.
    """
    codes: list[str] = []
    for raw in text.split(","):
        part = raw.strip()
        if not part:
            continue
        explicit_infra = outcomes.is_infra(part)
        code = outcomes.code_of(part) if explicit_infra else part
        if code == "infra_error":
            codes.append("*")
            continue
        # a bare code both sides use (oom) means the infra one; a bare agent-only code is a valid sample
        agent_only = code in outcomes.AGENT_CODES and code not in outcomes.INFRA_CODES
        if (
            part in (outcomes.PASSED, outcomes.FAILED)
            or part.startswith(outcomes.AGENT)
            or (agent_only and not explicit_infra)
        ):
            raise BatchError(
                f"--retry {part}: only infra_error codes can be retried (re-running valid samples only "
                "when they failed would inflate pass@k)"
            )
        if ":" in code or not code.replace("_", "").isalnum():
            raise BatchError(f"--retry {part}: expected an infra code like policy_unavailable or oom")
        codes.append(code)
    if not codes:
        raise BatchError("--retry: expected CODE[,CODE], e.g. --retry policy_unavailable,container_died")
    return codes


def requeue_for_retry(ws: Workspace, batch_id: str, codes: Sequence[str]) -> list[int]:
    """Requeues the batch's finished episodes that ended ``infra_error:<code>`` (``*``: any infra code) as a
    new try of the same row; their recordings move to ``recordings/episode-<id>.prior<N>/``."""
    get_batch(ws, batch_id)
    with session(ws.engine) as s:
        finished = queries.finished_outcomes(s, batch_id)
    wanted = sorted(
        {
            o
            for o in finished.values()
            if outcomes.is_infra(o) and ("*" in codes or outcomes.code_of(o) in codes)
        }
    )
    if not wanted:
        return []
    moved: dict[int, str] = {}
    for eid, o in finished.items():
        if o not in wanted:
            continue
        rec = ws.recordings_dir / f"episode-{eid}"
        if rec.is_dir():
            n = 1
            while (dest := rec.with_name(f"{rec.name}.prior{n}")).exists():
                n += 1
            rec.rename(dest)
            moved[eid] = ws.rel(dest)
    with session(ws.engine) as s:
        return queries.requeue_for_retry(s, batch_id, wanted, moved)


# --- running ------------------------------------------------------------------------------------------


@dataclass
class BatchSummary:
    """Where a batch stands (all runners' work), plus what this call did."""

    batch_id: str
    agent: str
    k: int
    total: int = 0
    queued: int = 0
    running: int = 0
    done: int = 0
    outcomes: dict[str, int] = field(default_factory=dict)
    ran: int = 0  # episodes this call finished
    requeued: int = 0  # stale 'running' rows this call handed back to the queue
    containers_removed: int = 0
    wall_s: float = 0.0
    interrupted: bool = False
    executor: str = "local"  # where this call ran episodes (engine.run.executors)
    halted: str = ""  # why this call stopped claiming on its own (endpoint down); "" when it did not

    @property
    def all_infra(self) -> bool:
        """Every finished episode is an infra error: the batch produced no valid sample at all."""
        return self.done > 0 and self.infra_errors == self.done

    @property
    def passed(self) -> int:
        return self.outcomes.get(outcomes.PASSED, 0)

    @property
    def failed(self) -> int:
        return self.outcomes.get(outcomes.FAILED, 0)

    @property
    def agent_errors(self) -> int:
        return sum(n for o, n in self.outcomes.items() if outcomes.is_agent_error(o))

    @property
    def infra_errors(self) -> int:
        return sum(n for o, n in self.outcomes.items() if outcomes.is_infra(o))

    @property
    def finished(self) -> bool:
        return self.queued == 0 and self.running == 0

    @property
    def episodes_per_min(self) -> float:
        return 60.0 * self.ran / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.update(
            passed=self.passed,
            failed=self.failed,
            agent_errors=self.agent_errors,
            infra_errors=self.infra_errors,
            all_infra=self.all_infra,
            finished=self.finished,
            episodes_per_min=round(self.episodes_per_min, 2),
            wall_s=round(self.wall_s, 2),
        )
        return d


def batch_summary(ws: Workspace, batch_id: str) -> BatchSummary:
    with session(ws.engine) as s:
        batch = queries.get_batch(s, batch_id)
        eps = queries.episodes(s, batch_id=batch_id)
    status = Counter(e.status for e in eps)
    return BatchSummary(
        batch_id=batch_id,
        agent=batch.agent if batch else "",
        k=batch.k if batch else 0,
        total=len(eps),
        queued=status.get("queued", 0),
        running=status.get("running", 0),
        done=status.get("done", 0),
        outcomes=dict(Counter(e.outcome for e in eps if e.status == "done")),
    )


def _lock_path(ws: Workspace, batch_id: str) -> Path:
    return ws.root / ".locks" / f"batch-{batch_id}.lock"


class _Runner:
    """The head side of one ``run_batch`` call: claims rows, hands them to the executor, records what
    fails outside an episode. Claiming stays here, on the head, for every executor (see executors/base)."""

    # --- executors: run_batch goes through engine.run.executors (local = the former thread pool) ---

    def __init__(
        self,
        ws: Workspace,
        batch_id: str,
        executor: Executor,
        stop: threading.Event,
        on_progress: Callable[[BatchSummary], None] | None,
        daemon_wait_s: float,
        started: float,
        max_consecutive_unavailable: int = DEFAULT_MAX_CONSECUTIVE_UNAVAILABLE,
        next_round: Callable[[], int] | None = None,
    ) -> None:
        self.ws, self.batch_id, self.executor, self.stop = ws, batch_id, executor, stop
        self.on_progress = on_progress
        self.daemon_wait_s = daemon_wait_s
        self.started = started
        self.lock = threading.Lock()
        self.in_flight: set[int] = set()
        self.ran = 0
        self.gave_up = False  # the executor could not get ready (engine away too long): stop claiming
        self.max_unavailable = max_consecutive_unavailable
        self.unavailable_run = 0  # consecutive finished episodes that were policy_unavailable
        self.halted = ""
        self.next_round = next_round
        self.settled_since_round = True  # an episode finished since the hook last ran (or it never ran)

    def progress(self) -> None:
        if self.on_progress is None:
            return
        summary = batch_summary(self.ws, self.batch_id)
        summary.ran, summary.wall_s = self.ran, time.monotonic() - self.started
        summary.executor = self.executor.name
        try:
            self.on_progress(summary)
        except Exception:  # a broken progress display must not stop the batch
            log.exception("on_progress failed")

    def _claim(self) -> EpisodeJob | None:
        if self.stop.is_set() or self.gave_up or self.halted:
            return None
        if not self.executor.wait_ready(self.stop, self.daemon_wait_s):
            self.gave_up = not self.stop.is_set()
            return None
        with session(self.ws.engine) as s:
            ep = queries.claim_next_episode(s, self.batch_id)
        if ep is None:
            return None
        return EpisodeJob(pk(ep), ep.task_version_id, ep.attempt, self.batch_id)

    def _settle(self, job: EpisodeJob, fut: Future[JobResult]) -> None:
        """Records a future's end; a failure outside the episode still gives the row one outcome."""
        exc = fut.exception()
        if exc is not None:
            log.error("episode %s failed in the runner: %s: %s", job.episode_id, type(exc).__name__, exc)
            with contextlib.suppress(Exception), session(self.ws.engine) as s:
                queries.finish_episode(
                    s,
                    job.episode_id,
                    outcome=outcomes.infra_error("orchestrator_failure"),
                    reward=None,
                    error=f"runner: {type(exc).__name__}: {exc}",
                )
        outcome = "" if exc is not None else fut.result().outcome
        with self.lock:
            self.in_flight.discard(job.episode_id)
            self.ran += 1
            self.settled_since_round = True
            self.unavailable_run = self.unavailable_run + 1 if outcome == POLICY_UNAVAILABLE else 0
            if self.max_unavailable and self.unavailable_run >= self.max_unavailable and not self.halted:
                self.halted = (
                    f"policy endpoint unavailable: {self.unavailable_run} episodes in a row ended "
                    f"{POLICY_UNAVAILABLE}; stopped claiming (the rest stay queued)"
                )
                log.warning("batch %s: %s", self.batch_id, self.halted)
        self.progress()

    def _more_rounds(self) -> bool:
        """Asks the ``next_round`` hook for more rows once the queue is empty; True when it added some.

        Asked again only after an episode finished since its last answer (new evidence), never while the
        batch is stopping. A hook that fails stops the rounds, not the episodes in flight."""
        if self.next_round is None or self.stop.is_set() or self.gave_up or self.halted:
            return False
        with self.lock:
            if not self.settled_since_round:
                return False
            self.settled_since_round = False
        try:
            added = self.next_round()
        except Exception as exc:  # the batch halts with the reason and a logged traceback
            log.exception("batch %s: planning the next round failed", self.batch_id)
            self.halted = f"planning the next round failed: {type(exc).__name__}: {exc}"
            return False
        if added:
            self.progress()
        return added > 0

    def loop(self) -> None:
        """Keeps the executor's slots full until nothing is left to claim, then drains."""
        pending: dict[Future[JobResult], EpisodeJob] = {}
        exhausted = False
        while True:
            while not exhausted and len(pending) < self.executor.slots:
                job = self._claim()
                if job is None:
                    exhausted = True
                    break
                with self.lock:
                    self.in_flight.add(job.episode_id)
                pending[self.executor.submit(job)] = job
            if exhausted and self._more_rounds():
                exhausted = False
                continue
            if not pending:
                return
            done, _ = wait(list(pending), timeout=0.2, return_when=FIRST_COMPLETED)
            for fut in done:
                self._settle(pending.pop(fut), fut)
            if done and not (self.stop.is_set() or self.gave_up or self.halted):
                exhausted = False  # a slot freed up: there may be more to claim


def run_batch(
    ws: Workspace,
    batch_id: str,
    agent_factory: Callable[[], Agent],
    *,
    concurrency: int | None = None,
    bus: EventBus | None = None,
    on_progress: Callable[[BatchSummary], None] | None = None,
    stop: threading.Event | None = None,
    max_infra_retries: int = 2,
    retry_backoff_s: float = 1.0,
    executor: Executor | None = None,
    daemon_wait_s: float = DEFAULT_DAEMON_WAIT_S,
    max_consecutive_unavailable: int = DEFAULT_MAX_CONSECUTIVE_UNAVAILABLE,
    next_round: Callable[[], int] | None = None,
) -> BatchSummary:
    """Runs the batch's queued episodes until none is left or ``stop`` is set; returns the summary.

    ``next_round``, when given, is asked for more rows whenever the queue is empty (module docstring):
    the batch ends when it adds none and nothing is in flight.

    Setting ``stop`` (the CLI does on the first Ctrl-C) stops claiming: episodes in flight finish and keep
    their outcome. A ``KeyboardInterrupt`` while waiting (the second Ctrl-C) hands the episodes in flight
    back to the queue, removes their containers and re-raises; anything a harder kill leaves behind is
    requeued by the next ``run_batch`` on the batch. ``executor`` says where episodes run (default: a
    ``LocalExecutor`` of ``concurrency`` threads); ``daemon_wait_s`` bounds how long new claims wait for a
    Docker engine that went away before the batch stops unfinished.
    """

    bus = default_bus if bus is None else bus
    stop = stop or threading.Event()
    executor = executor or LocalExecutor(concurrency)
    batch = get_batch(ws, batch_id)  # a clear error for an unknown id
    started = time.monotonic()
    with runner_lock(_lock_path(ws, batch_id)) as alone:
        requeued: list[int] = []
        removed = 0
        if alone:
            with session(ws.engine) as s:
                requeued = queries.requeue_stale(s, batch_id)
                # A killed runner may also leave the container of an episode it had already finished:
                # the warm pool removes containers in the background, after the outcome is recorded.
                done = [pk(e) for e in queries.episodes(s, batch_id=batch_id, status="done")]
            removed = sandbox_pool.remove_episode_containers(ws.root, [*requeued, *done])
            removed += executor.cleanup_stale(ws, batch_id)  # other nodes' engines and scratch dirs
            removed += leftovers.reaped(str(ws.root), batch_id)  # what this process's start reaped of it
        executor.open(RunContext(ws, batch, agent_factory, bus, max_infra_retries, retry_backoff_s))
        # what the application wired to run beside a batch (the search indexer: engine/run/hooks.py)
        watch = hooks.watching_batch(ws, bus)
        watch.__enter__()
        with session(ws.engine) as s:  # other processes (the TUI's Runs screen) show where it runs
            queries.set_batch_executor(s, batch_id, executor.name)
        runner = _Runner(
            ws,
            batch_id,
            executor,
            stop,
            on_progress,
            daemon_wait_s,
            started,
            max_consecutive_unavailable,
            next_round,
        )
        try:
            runner.progress()
            runner.loop()
        except KeyboardInterrupt:
            stop.set()
            with runner.lock:
                flying = sorted(runner.in_flight)
            with contextlib.suppress(Exception), session(ws.engine) as s:
                queries.requeue_episodes(s, flying)
            with contextlib.suppress(Exception):
                executor.abandon(flying)
            sandbox_pool.remove_episode_containers(ws.root, flying)
            raise
        finally:
            executor.close()
            sandbox_pool.drain()  # the batch's spares and queued removals end with it
            watch.__exit__(None, None, None)  # after the last episode: the indexer drains
    summary = batch_summary(ws, batch_id)
    summary.ran = runner.ran
    summary.requeued = len(requeued)
    summary.containers_removed = removed
    summary.wall_s = time.monotonic() - started
    summary.interrupted = stop.is_set() and not summary.finished
    summary.executor = executor.name
    summary.halted = runner.halted
    return summary


def run_planned(
    ws: Workspace,
    batch_id: str,
    *,
    concurrency: int | None = None,
    bus: EventBus | None = None,
    on_progress: Callable[[BatchSummary], None] | None = None,
    stop: threading.Event | None = None,
    max_infra_retries: int = 2,
    retry_backoff_s: float = 1.0,
    executor: Executor | None = None,
    daemon_wait_s: float = DEFAULT_DAEMON_WAIT_S,
    max_consecutive_unavailable: int = DEFAULT_MAX_CONSECUTIVE_UNAVAILABLE,
    next_round: Callable[[], int] | None = None,
) -> BatchSummary:
    """``run_batch`` with the agent the batch row describes (what ``bandpass run`` and ``--resume`` do)."""
    try:
        factory, close = batch_agent_factory(ws, get_batch(ws, batch_id))
    except AgentConfigError as exc:
        raise BatchError(str(exc)) from None
    try:
        return run_batch(
            ws,
            batch_id,
            factory,
            concurrency=concurrency,
            bus=bus,
            on_progress=on_progress,
            stop=stop,
            max_infra_retries=max_infra_retries,
            retry_backoff_s=retry_backoff_s,
            executor=executor,
            daemon_wait_s=daemon_wait_s,
            max_consecutive_unavailable=max_consecutive_unavailable,
            next_round=next_round,
        )
    finally:
        close()


__all__ = [
    "BatchError",
    "BatchSummary",
    "batch_agent_factory",
    "check_policy_endpoint",
    "batch_summary",
    "default_concurrency",
    "extend_batch",
    "get_batch",
    "latest_unfinished_batch",
    "new_batch",
    "new_batch_id",
    "parse_retry_codes",
    "plan_batch",
    "requeue_for_retry",
    "run_batch",
    "run_planned",
]
