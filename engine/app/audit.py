"""Prove a task's verifier honest (``bandpass audit``, ``a`` on the Tasks screen): static checks, the
build, the oracle passing, nop and the cheats failing; each task version ends with a verdict. Many tasks
are audited as a run (engine/audit/corpus.py): concurrently on this machine or across a Ray cluster,
resumable after a kill, with each audit's phase live (``audits_in_flight``). And one episode of such a
built-in agent by hand (``bandpass episode``), to see for oneself what the audit saw."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..audit.corpus import (
    AuditRunError,
    AuditRunSummary,
    latest_unfinished_run,
    plan_audits,
    queue_versions,
    run_audits,
    run_reports,
    run_summary,
)
from ..audit.executors import AuditExecutor, default_audits
from ..audit.phases import PHASES
from ..audit.task_audit import audit_version
from ..audit.verdict import COULD_NOT_AUDIT, REJECTED
from ..run.executors.base import ExecutorError

if TYPE_CHECKING:
    from ..core.workspace import Workspace
    from ..run.episode import EpisodeResult

__all__ = [
    "COULD_NOT_AUDIT",
    "PHASES",
    "REJECTED",
    "AuditInFlight",
    "AuditRunError",
    "AuditRunSummary",
    "audit_executor",
    "audit_version",
    "audits_in_flight",
    "default_audits",
    "latest_unfinished_run",
    "plan_audits",
    "queue_versions",
    "run_audits",
    "run_builtin_episode",
    "run_reports",
    "run_summary",
]


def audit_executor(
    name: str = "local", *, concurrency: int | None = None, address: str | None = None, quiet: bool = False
) -> AuditExecutor:
    """The audit executor a front end asks for: ``local`` (``concurrency`` audits on this engine) or
    ``ray`` (a cluster at ``address``); not yet connected. Raises ``ExecutorError`` for anything else."""
    from ..audit.executors import LocalAuditExecutor, RayAuditExecutor

    if name == "local":
        if address:
            raise ExecutorError("--ray-address goes with --executor ray")
        return LocalAuditExecutor(concurrency)
    if name == "ray":
        from .executors import QUIET_RAY

        return RayAuditExecutor(concurrency, address=address, init_kwargs=dict(QUIET_RAY) if quiet else None)
    raise ExecutorError(f"unknown executor {name!r} (local or ray)")


@dataclass(frozen=True)
class AuditInFlight:
    """An audit running now (in any process): what the Tasks screen shows live."""

    version_id: int
    task: str
    phase: str
    node: str
    run_id: str


def audits_in_flight(ws: Workspace) -> list[AuditInFlight]:
    from ...store import queries
    from ...store.db import session
    from ...store.queries import audit_queue as aq

    with session(ws.engine) as s:
        return [
            AuditInFlight(
                j.task_version_id,
                queries.task_name_of_version(s, j.task_version_id) or f"version {j.task_version_id}",
                j.phase or "starting",
                j.node,
                j.run_id,
            )
            for j in aq.running_jobs(s)
        ]


def run_builtin_episode(ws: Workspace, version_id: int, agent: str) -> EpisodeResult:
    """One episode of a built-in agent (oracle, nop, cheat:*) on this machine, outside any batch
    (``bandpass episode``); its recordings land in the workspace. Raises ``InvalidInput`` for an unknown
    agent, before anything starts."""
    from ..run.agents.builtin import builtin_agent
    from ..run.episode import run_episode

    made = builtin_agent(agent)
    return run_episode(ws, version_id, made)
