"""Where a claimed audit runs: this machine's Docker engine in ``concurrency`` threads, or a Ray cluster.

The same split as rollouts (engine/run/executors): the head owns the queue (engine/audit/corpus.py claims
jobs, resumes, cleans up), an executor only runs a claimed audit and gets its verdict into the head's store.
The unit is one task version's whole audit, not one probe episode: the audit's phases depend on each other
(the footprint decides where the probes verify, the hostile twins are made from a passing oracle's end
state, the harness probes are skipped when the probe cache answers), so running ``audit_version`` itself
where the audit is placed keeps the verdict logic one piece of code and the verdicts the same wherever it
ran. Within an audit the probes still run ``workers`` at a time.

``local`` shares the rollout executor's daemon pool. ``ray`` runs each audit as a Ray task on a node, on
that node's Docker engine, in a private scratch workspace (as a remote rollout episode does: task files
shipped as tar bytes once per version, images built on the node on first use and reused by its later
audits); the node sends back the report and every episode it ran, and the head writes them under its own
episode ids (engine/audit/remote.py).
"""

from __future__ import annotations

import contextlib
import logging
import threading
from abc import ABC, abstractmethod
from collections.abc import Callable
from concurrent.futures import Future
from typing import Any, ClassVar

from ..core.events import EventBus
from ..core.workspace import Workspace
from ..run.executors.base import DaemonPool, ExecutorError, default_concurrency
from ..run.executors.ray_head import RayTaskHead, lost_errors
from .job import AuditJobSpec

log = logging.getLogger(__name__)

__all__ = ["AuditExecutor", "AuditJobSpec", "LocalAuditExecutor", "RayAuditExecutor", "default_audits"]

#: Probe episodes one audit runs at once (its own thread pool, as ``bandpass audit`` always did).
PROBE_WORKERS = 2


def default_audits() -> int:
    """Audits in flight by default: one per core up to 4 (each runs ``PROBE_WORKERS`` probes at once,
    and an audit spends much of its time in serial phases: the build, the footprint, the verdict)."""
    return default_concurrency()


#: Fresh tries a Ray audit gets when a try is lost with its node (as a rollout episode's infra retries).
NODE_RETRIES = 2

#: Called as an audit moves through its phases: (job id, phase, node).
PhaseHook = Callable[[int, str, str], None]


class AuditExecutor(ABC):
    """Runs claimed audits; ``submit`` returns a future resolving to the recorded audit's id once the
    head's store holds it. ``slots`` bounds how many may be in flight."""

    name: ClassVar[str] = ""

    @property
    @abstractmethod
    def slots(self) -> int: ...

    def connect(self) -> None:  # noqa: B027 - optional hook
        """Reaches where audits run, before anything is claimed. Default: nothing to reach."""

    @abstractmethod
    def open(self, ws: Workspace, bus: EventBus, on_phase: PhaseHook) -> None: ...

    @abstractmethod
    def submit(self, job: AuditJobSpec) -> Future[int]: ...

    def cleanup_stale(self, ws: Workspace, batch_id: str) -> int:
        """Removes what a dead runner's audit of ``batch_id`` left beyond this engine. Default: nothing."""
        return 0

    def abandon(self, job_ids: list[int]) -> None:  # noqa: B027 - optional hook
        """Best effort after an abort: stop the remote work of these jobs."""

    @abstractmethod
    def close(self) -> None: ...


class LocalAuditExecutor(AuditExecutor):
    """Audits in ``concurrency`` threads on this machine's Docker engine (a client per thread)."""

    name = "local"

    def __init__(self, concurrency: int | None = None, *, workers: int = PROBE_WORKERS) -> None:
        self._slots = max(1, concurrency or default_audits())
        self.workers = workers
        self._pool: DaemonPool | None = None
        self._tls = threading.local()
        self._ws: Workspace | None = None
        self._bus: EventBus | None = None
        self._on_phase: PhaseHook | None = None

    @property
    def slots(self) -> int:
        return self._slots

    def open(self, ws: Workspace, bus: EventBus, on_phase: PhaseHook) -> None:
        self._ws, self._bus, self._on_phase = ws, bus, on_phase
        self._pool = DaemonPool(self._slots, "audit")

    def submit(self, job: AuditJobSpec) -> Future[int]:
        if self._pool is None:
            raise ExecutorError("audit executor used before open()")
        return self._pool.submit(self._run, job)

    def _run(self, job: AuditJobSpec) -> int:
        import os

        from ..sandbox.docker_engine import get_client
        from .task_audit import audit_version

        assert self._ws is not None and self._on_phase is not None
        if getattr(self._tls, "client", None) is None:
            self._tls.client = get_client()
        node = os.uname().nodename
        hook = self._on_phase
        report = audit_version(
            self._ws,
            job.version_id,
            reruns=job.reruns,
            client=self._tls.client,
            bus=self._bus,
            workers=self.workers,
            batch=job.batch_id,
            on_phase=lambda phase: hook(job.job_id, phase, node),
        )
        assert report.audit_id is not None
        return report.audit_id

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None


class RayAuditExecutor(RayTaskHead, AuditExecutor):
    """Audits as Ray tasks on an existing cluster (``address``: ``auto``, ``HOST:6379``); each node audits
    on its own Docker engine and the head writes what comes back. Reaching the cluster, shipping task
    files, driving and cancelling tasks and node clean-up are the rollout executor's (``RayTaskHead``)."""

    name = "ray"

    def __init__(
        self,
        concurrency: int | None = None,
        *,
        address: str | None = None,
        cpus_per_audit: float = 1.0,
        init_kwargs: dict[str, Any] | None = None,
        workers: int = PROBE_WORKERS,
        node_retries: int = NODE_RETRIES,
    ) -> None:
        super().__init__(concurrency, address=address, init_kwargs=init_kwargs)
        self.cpus_per_audit = cpus_per_audit
        self.workers = workers
        self.node_retries = node_retries
        self._ws: Workspace | None = None
        self._on_phase: PhaseHook | None = None
        #: job id -> the node that ran it (host:node id), for reports and tests
        self.nodes: dict[int, str] = {}

    def open(self, ws: Workspace, bus: EventBus, on_phase: PhaseHook) -> None:
        from .remote import run_remote_audit

        self._ws, self._on_phase = ws, on_phase
        self._open_tasks(run_remote_audit, cpus=self.cpus_per_audit, name="bandpass-audit", pool="ray-audit")

    def submit(self, job: AuditJobSpec) -> Future[int]:
        if self._pool is None:
            raise ExecutorError("ray audit executor used before open()")
        return self._pool.submit(self._drive, job)

    def _drive(self, job: AuditJobSpec) -> int:
        """Runs on a head thread: one Ray task per try of the audit, its verdict written on the head.

        A try lost with its node or worker (a raylet killed, a machine gone: nothing came back, so nothing
        of it is on the head) is not the task's fault and not an answer: the audit runs again whole on a
        live node, up to ``node_retries`` more times (the dead node's reaper removes what it left there).
        The audit records the tries that were lost (``checks.lost_tries``); with every try lost the error
        reaches the runner, which records ``could_not_audit``."""
        from . import remote

        ws = self._ws
        assert ws is not None
        spec, path = remote.job_spec(ws, job, workers=self.workers)
        ref = self._shipped(job.version_id, ws.abs(path))
        lost: list[str] = []
        while True:
            node: dict[str, str] = {}
            try:
                result = self._one_try(job, spec, ref, node)
                break
            except lost_errors(self._ray) as exc:
                where = f"node {node.get('id', '?')} at {node.get('address', '?')}" if node else "its node"
                lost.append(f"try {len(lost) + 1} lost with {where}: {type(exc).__name__}")
                log.warning("audit job %s: %s", job.job_id, lost[-1])
                if len(lost) > self.node_retries:
                    raise RuntimeError(f"audit job {job.job_id}: " + "; ".join(lost)) from exc
        return remote.commit_remote_audit(ws, job, result, node, lost=lost)

    def _one_try(self, job: AuditJobSpec, spec: dict[str, Any], ref: Any, node: dict[str, str]) -> Any:
        """One Ray task for the audit; fills ``node`` as soon as the worker says where it runs."""
        from . import remote

        hook = self._on_phase
        assert hook is not None
        result: dict[str, Any] | None = None
        with contextlib.closing(self._items(job.job_id, spec, ref)) as items:
            for item in items:
                if "node" in item:
                    node.update(item["node"])
                    self.nodes[job.job_id] = remote.node_label(node)
                if "phase" in item:
                    hook(job.job_id, item["phase"], remote.node_label(node))
                if "result" in item:
                    result = item["result"]
        if result is None:
            raise RuntimeError(f"audit job {job.job_id}: the Ray task ended without a result")
        return result

    def abandon(self, job_ids: list[int]) -> None:
        self._cancel(job_ids)
