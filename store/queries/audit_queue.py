"""The audit queue: runs of task versions to audit, claimed one at a time like a batch's episodes.

Used as a module (``from bandpass.store.queries import audit_queue as aq``). A job is claimed with one
atomic UPDATE, so two runners of the same run never audit a version twice; a job left ``running`` by a
killed runner is handed back (``requeue_stale``) only by a runner that holds the run alone
(engine/audit/corpus.py), with the batch id its episodes carried so their containers can be removed.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from sqlmodel import Session, col, select, update

from ..models import Audit, AuditJob, AuditRun, pk, utcnow
from .claims import claim_queued

__all__ = [
    "add_jobs",
    "claim_next",
    "create_run",
    "finish_job",
    "get_run",
    "jobs",
    "latest_unfinished_run_id",
    "requeue_jobs",
    "requeue_stale",
    "running_jobs",
    "set_executor",
    "set_phase",
    "status_counts",
    "verdicts_of",
]


def create_run(s: Session, run_id: str, *, params: dict[str, Any]) -> AuditRun:
    run = AuditRun(id=run_id, params_json=json.dumps(params, sort_keys=True))
    s.add(run)
    s.flush()
    return run


def get_run(s: Session, run_id: str) -> AuditRun | None:
    return s.get(AuditRun, run_id)


def add_jobs(s: Session, run_id: str, version_ids: Sequence[int]) -> int:
    """Queues each version not yet in the run (idempotent: a version is audited once per run)."""
    have = set(s.exec(select(AuditJob.task_version_id).where(AuditJob.run_id == run_id)))
    added = 0
    for vid in dict.fromkeys(version_ids):
        if vid in have:
            continue
        s.add(AuditJob(run_id=run_id, task_version_id=vid))
        added += 1
    s.flush()
    return added


def claim_next(s: Session, run_id: str, *, node: str, batch_prefix: str) -> AuditJob | None:
    """Flips the run's oldest queued job to ``running`` (one UPDATE: never claimed twice) and names the
    batch its episodes will carry (``<batch_prefix>-j<job>-t<try>``)."""
    job = claim_queued(
        s,
        AuditJob,
        where=[AuditJob.run_id == run_id],
        order_by=[col(AuditJob.id)],
        values={"started_at": utcnow(), "node": node, "phase": "", "tries": col(AuditJob.tries) + 1},
    )
    if job is None:
        return None
    claimed = pk(job)
    job.batch_id = f"{batch_prefix}-j{claimed}-t{job.tries}"
    s.add(job)
    s.flush()
    return job


def set_phase(s: Session, job_id: int, phase: str, node: str | None = None) -> None:
    values: dict[str, Any] = {"phase": phase}
    if node is not None:
        values["node"] = node
    s.execute(update(AuditJob).where(col(AuditJob.id) == job_id).values(**values))


def finish_job(s: Session, job_id: int, audit_id: int) -> None:
    s.execute(
        update(AuditJob)
        .where(col(AuditJob.id) == job_id)
        .values(status="done", phase="", audit_id=audit_id, ended_at=utcnow())
    )


def requeue_stale(s: Session, run_id: str) -> list[AuditJob]:
    """Hands the run's ``running`` jobs back to the queue; returns them as they were (their batch ids
    name the episodes and containers the dead runner left)."""
    stale = list(s.exec(select(AuditJob).where(AuditJob.run_id == run_id, AuditJob.status == "running")))
    out = [AuditJob.model_validate(j.model_dump()) for j in stale]
    for j in stale:
        j.status, j.phase, j.started_at = "queued", "", None
        s.add(j)
    s.flush()
    return out


def requeue_jobs(s: Session, job_ids: Sequence[int]) -> None:
    """Hands these running jobs back to the queue (a runner interrupted while it held them)."""
    if job_ids:
        s.execute(
            update(AuditJob)
            .where(col(AuditJob.id).in_(list(job_ids)), col(AuditJob.status) == "running")
            .values(status="queued", phase="", started_at=None)
        )


def verdicts_of(s: Session, audit_ids: Sequence[int]) -> dict[int, str]:
    if not audit_ids:
        return {}
    rows = s.exec(select(Audit.id, Audit.verdict).where(col(Audit.id).in_(list(audit_ids))))
    return {int(i): v for i, v in rows if i is not None}


def jobs(s: Session, run_id: str) -> list[AuditJob]:
    return list(s.exec(select(AuditJob).where(AuditJob.run_id == run_id).order_by(col(AuditJob.id))))


def running_jobs(s: Session) -> list[AuditJob]:
    """Every audit in flight, in any run (the Tasks screen shows them)."""
    return list(s.exec(select(AuditJob).where(AuditJob.status == "running").order_by(col(AuditJob.id))))


def status_counts(s: Session, run_id: str) -> dict[str, int]:
    rows = s.exec(select(AuditJob.status).where(AuditJob.run_id == run_id))
    return dict(Counter(rows))


def set_executor(s: Session, run_id: str, executor: str) -> None:
    s.execute(update(AuditRun).where(col(AuditRun.id) == run_id).values(executor=executor))


def latest_unfinished_run_id(s: Session) -> str | None:
    """The newest run with a queued or running job (what ``bandpass audit --resume`` picks)."""
    q = (
        select(AuditJob.run_id)
        .where(col(AuditJob.status).in_(("queued", "running")))
        .order_by(col(AuditJob.id).desc())
        .limit(1)
    )
    return s.exec(q).first()
