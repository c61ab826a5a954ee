"""Auditing a corpus: a queue of task versions audited concurrently, on this machine or a Ray cluster.

Shaped like a rollout batch (engine/run/rollouts.py) so it inherits its guarantees: the plan is rows in the
store (an ``audit_run`` and one ``audit_job`` per version), runners claim jobs with one atomic UPDATE and
hand each to an executor (engine/audit/executors.py), and a runner that is SIGKILLed loses only the audits
in flight. ``--resume`` (any later ``run_audits`` on the run that holds it alone) hands those back to the
queue, closes the episodes they had started as ``infra_error:orchestrator_failure`` (an interrupted audit's
evidence is never half-used) and removes their containers by the batch id each try's episodes carry, here
and, with Ray, on every node. Every version then ends with exactly one audit in the run; a finished one is
never audited again.

A run can be fed while it runs (``feed``: called whenever the queue is empty, it queues more versions and
says how many), which is how generation and audit overlap (engine/app/audit.py): the generator accepts a
task, the feed queues it, a free slot audits it while the generator works on the next.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, wait
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.models import Audit, pk
from ...store.queries import audit_queue as aq
from ..core import outcomes
from ..core.errors import BandpassError
from ..core.events import EventBus
from ..core.events import bus as default_bus
from ..core.runner_lock import runner_lock
from ..core.workspace import Workspace
from .executors import AuditExecutor, AuditJobSpec, LocalAuditExecutor

log = logging.getLogger(__name__)

__all__ = [
    "AuditRunError",
    "AuditRunSummary",
    "latest_unfinished_run",
    "new_run_id",
    "plan_audits",
    "queue_versions",
    "run_audits",
    "run_reports",
    "run_summary",
]

INTERRUPTED = outcomes.infra_error("orchestrator_failure")


class AuditRunError(BandpassError, RuntimeError):
    """An audit run cannot be planned or resumed; the message is the one line the CLI prints."""


def new_run_id() -> str:
    return f"a{datetime.now(UTC).strftime('%Y%m%d-%H%M%S')}-{secrets.token_hex(2)}"


def plan_audits(
    ws: Workspace, version_ids: Sequence[int], *, reruns: int = 3, run_id: str | None = None
) -> str:
    """Creates a run with one queued job per version; returns its id."""
    if reruns < 1:
        raise AuditRunError(f"reruns must be at least 1, got {reruns}")
    run_id = run_id or new_run_id()
    with session(ws.engine) as s:
        if aq.get_run(s, run_id) is None:
            aq.create_run(s, run_id, params={"reruns": reruns})
        for vid in version_ids:
            if queries.get_version(s, vid) is None:
                raise AuditRunError(f"task version {vid} does not exist")
        aq.add_jobs(s, run_id, version_ids)
    return run_id


def queue_versions(ws: Workspace, run_id: str, version_ids: Sequence[int]) -> int:
    """Adds versions to a run (a run being fed while it runs); returns how many were new to it."""
    with session(ws.engine) as s:
        return aq.add_jobs(s, run_id, version_ids)


def latest_unfinished_run(ws: Workspace) -> str | None:
    with session(ws.engine) as s:
        return aq.latest_unfinished_run_id(s)


@dataclass
class AuditRunSummary:
    """Where a run stands, plus what this call did (``event``: the latest phase change, for progress)."""

    run_id: str
    total: int = 0
    queued: int = 0
    running: int = 0
    done: int = 0
    verdicts: dict[str, int] = field(default_factory=dict)
    ran: int = 0  # audits this call finished
    requeued: int = 0  # audits a dead runner left, handed back to the queue
    containers_removed: int = 0
    wall_s: float = 0.0
    executor: str = "local"
    interrupted: bool = False
    event: str = ""
    #: job id -> (task, phase, node) of the audits in flight
    in_flight: dict[int, tuple[str, str, str]] = field(default_factory=dict)

    @property
    def finished(self) -> bool:
        return self.queued == 0 and self.running == 0

    @property
    def tasks_per_hour(self) -> float:
        return 3600.0 * self.ran / self.wall_s if self.wall_s > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d.pop("in_flight")
        d.update(
            finished=self.finished, tasks_per_hour=round(self.tasks_per_hour, 1), wall_s=round(self.wall_s, 2)
        )
        return d


def run_summary(ws: Workspace, run_id: str) -> AuditRunSummary:
    with session(ws.engine) as s:
        if aq.get_run(s, run_id) is None:
            raise AuditRunError(f"no audit run {run_id!r} in {ws.root}")
        jobs = aq.jobs(s, run_id)
        audits = aq.verdicts_of(s, [j.audit_id for j in jobs if j.audit_id])
    status = Counter(j.status for j in jobs)
    verdicts = Counter(audits.get(j.audit_id, "?") for j in jobs if j.status == "done" and j.audit_id)
    return AuditRunSummary(
        run_id=run_id,
        total=len(jobs),
        queued=status.get("queued", 0),
        running=status.get("running", 0),
        done=status.get("done", 0),
        verdicts=dict(verdicts),
    )


def _close_interrupted(ws: Workspace, executor: AuditExecutor, batch_ids: list[str]) -> int:
    """Ends what killed audits left: their unfinished episodes (an interrupted audit's evidence is not
    used: the audit runs again whole) and every container their batches labelled, here and beyond."""
    from ..run.executors.node_cleanup import remove_labelled
    from ..sandbox import labels
    from ..sandbox import pool as sandbox_pool

    removed = 0
    for batch in batch_ids:
        if not batch:
            continue
        with session(ws.engine) as s:
            eps = queries.episodes(s, batch_id=batch)
            for e in eps:
                if e.status != "done":
                    queries.finish_episode(
                        s, pk(e), outcome=INTERRUPTED, reward=None, error="its audit was interrupted"
                    )
        removed += sandbox_pool.remove_episode_containers(ws.root, [pk(e) for e in eps])
        removed += remove_labelled({labels.WORKSPACE: str(ws.root), labels.BATCH: batch})
        removed += executor.cleanup_stale(ws, batch)
    return removed


class _Runner:
    def __init__(
        self,
        ws: Workspace,
        run_id: str,
        reruns: int,
        executor: AuditExecutor,
        stop: threading.Event,
        on_progress: Callable[[AuditRunSummary], None] | None,
        feed: Callable[[], int] | None,
        started: float,
    ) -> None:
        self.ws, self.run_id, self.reruns, self.executor = ws, run_id, reruns, executor
        self.stop, self.on_progress, self.feed, self.started = stop, on_progress, feed, started
        self.lock = threading.Lock()
        self.in_flight: dict[int, tuple[str, str, str]] = {}
        self.batches: dict[int, str] = {}
        self.ran = 0
        self.node = os.uname().nodename

    def progress(self, event: str = "") -> None:
        if self.on_progress is None:
            return
        summary = run_summary(self.ws, self.run_id)
        with self.lock:
            summary.ran, summary.in_flight = self.ran, dict(self.in_flight)
        summary.wall_s, summary.executor, summary.event = (
            time.monotonic() - self.started,
            self.executor.name,
            event,
        )
        try:
            self.on_progress(summary)
        except Exception:  # a broken display must not stop the run
            log.exception("on_progress failed")

    def on_phase(self, job_id: int, phase: str, node: str) -> None:
        with session(self.ws.engine) as s:
            aq.set_phase(s, job_id, phase, node or None)
        with self.lock:
            task = self.in_flight.get(job_id, ("?", "", ""))[0]
            self.in_flight[job_id] = (task, phase, node)
        self.progress(f"{task}: {phase}" + (f" on {node}" if node and self.executor.name != "local" else ""))

    def claim(self) -> AuditJobSpec | None:
        if self.stop.is_set():
            return None
        with session(self.ws.engine) as s:
            job = aq.claim_next(s, self.run_id, node=self.node, batch_prefix=f"audit-{self.run_id}")
            if job is None:
                return None
            name = queries.task_name_of_version(s, job.task_version_id) or f"version {job.task_version_id}"
            spec = AuditJobSpec(pk(job), job.task_version_id, job.batch_id, self.reruns)
        with self.lock:
            self.in_flight[spec.job_id] = (name, "queued", "")
            self.batches[spec.job_id] = spec.batch_id
        return spec

    def settle(self, job: AuditJobSpec, fut: Future[int]) -> None:
        exc = fut.exception()
        if exc is None:
            audit_id = fut.result()
        else:  # outside the audit's own checks (a lost node, a bug): no answer, never the task's fault
            log.error("audit job %s failed in the runner: %s: %s", job.job_id, type(exc).__name__, exc)
            _close_interrupted(self.ws, self.executor, [job.batch_id])
            with session(self.ws.engine) as s:
                audit_id = pk(
                    queries.record_audit(
                        s,
                        job.version_id,
                        verdict="could_not_audit",
                        reasons=["infra.orchestrator_failure"],
                        details={
                            "findings": [
                                {
                                    "code": "infra.orchestrator_failure",
                                    "detail": f"{type(exc).__name__}: {exc}",
                                }
                            ],
                            "batch": job.batch_id,
                        },
                    )
                )
        with session(self.ws.engine) as s:
            aq.finish_job(s, job.job_id, audit_id)
        with self.lock:
            task = self.in_flight.pop(job.job_id, ("?", "", ""))[0]
            self.batches.pop(job.job_id, None)
            self.ran += 1
        self.progress(f"{task}: done")

    def loop(self) -> None:
        pending: dict[Future[int], AuditJobSpec] = {}
        exhausted = False
        while True:
            while not exhausted and len(pending) < self.executor.slots:
                job = self.claim()
                if job is None:
                    exhausted = True
                    break
                pending[self.executor.submit(job)] = job
            if exhausted and self.feed is not None and not self.stop.is_set() and self.feed() > 0:
                exhausted = False
                continue
            if not pending:
                if self.feed is not None and not self.stop.is_set() and getattr(self.feed, "open", False):
                    time.sleep(0.2)  # the feed is still producing: wait for its next version
                    exhausted = False
                    continue
                return
            done, _ = wait(list(pending), timeout=0.2, return_when=FIRST_COMPLETED)
            for fut in done:
                self.settle(pending.pop(fut), fut)
            if done and not self.stop.is_set():
                exhausted = False


def run_audits(
    ws: Workspace,
    run_id: str,
    *,
    executor: AuditExecutor | None = None,
    concurrency: int | None = None,
    bus: EventBus | None = None,
    on_progress: Callable[[AuditRunSummary], None] | None = None,
    stop: threading.Event | None = None,
    feed: Callable[[], int] | None = None,
) -> AuditRunSummary:
    """Audits the run's queued versions until none is left (or ``stop`` is set); returns the summary.

    ``feed``, when given, is asked for more versions whenever the queue is empty; while it has an attribute
    ``open`` that is true the run waits for it instead of ending. A ``KeyboardInterrupt`` hands the audits
    in flight back to the queue and removes their containers; a harder kill is cleaned up by the next call.
    """
    bus = default_bus if bus is None else bus
    stop = stop or threading.Event()
    executor = executor or LocalAuditExecutor(concurrency)
    with session(ws.engine) as s:
        run = aq.get_run(s, run_id)
        if run is None:
            raise AuditRunError(f"no audit run {run_id!r} in {ws.root}")
        reruns = int(json.loads(run.params_json or "{}").get("reruns", 3))
    executor.connect()
    started = time.monotonic()
    # shared while running; alone: no other runner was alive (stale jobs are then ours)
    with runner_lock(ws.root / ".locks" / f"audit-{run_id}.lock") as alone:
        requeued: list[str] = []
        removed = 0
        if alone:
            with session(ws.engine) as s:
                requeued = [j.batch_id for j in aq.requeue_stale(s, run_id)]
            removed = _close_interrupted(ws, executor, requeued)
        runner = _Runner(ws, run_id, reruns, executor, stop, on_progress, feed, started)
        executor.open(ws, bus, runner.on_phase)
        with session(ws.engine) as s:
            aq.set_executor(s, run_id, executor.name)
        try:
            runner.progress()
            runner.loop()
        except KeyboardInterrupt:
            stop.set()
            with runner.lock:
                flying = dict(runner.batches)
            with contextlib.suppress(Exception), session(ws.engine) as s:
                aq.requeue_jobs(s, list(flying))
            with contextlib.suppress(Exception):
                executor.abandon(list(flying))
            with contextlib.suppress(Exception):
                _close_interrupted(ws, executor, list(flying.values()))
            raise
        finally:
            executor.close()
            from ..sandbox import pool as sandbox_pool

            sandbox_pool.drain()  # the run's warm spares and queued removals end with it
    summary = run_summary(ws, run_id)
    summary.ran, summary.requeued, summary.containers_removed = runner.ran, len(requeued), removed
    summary.wall_s = time.monotonic() - started
    summary.executor = executor.name
    summary.interrupted = stop.is_set() and not summary.finished
    return summary


def run_reports(ws: Workspace, run_id: str) -> list[dict[str, Any]]:
    """Each finished job's audit in queue order, shaped as ``AuditReport.as_dict()`` (``--json``)."""
    out: list[dict[str, Any]] = []
    with session(ws.engine) as s:
        for j in aq.jobs(s, run_id):
            if j.status != "done" or j.audit_id is None:
                continue
            audit = s.get(Audit, j.audit_id)
            version = queries.get_version(s, j.task_version_id)
            if audit is None or version is None:
                continue
            checks = json.loads(audit.details_json or "{}")
            out.append(
                {
                    "version_id": j.task_version_id,
                    "task": queries.task_name_of_version(s, j.task_version_id),
                    "version_hash": version.hash,
                    "verdict": audit.verdict,
                    "reasons": json.loads(audit.reasons_json or "[]"),
                    "checks": checks,
                    "duration_s": round(sum((checks.get("phases") or {}).values()), 2),
                    "warnings": checks.get("task_warnings") or [],
                    "audit_id": j.audit_id,
                    "node": checks.get("node") or j.node,
                }
            )
    return out
