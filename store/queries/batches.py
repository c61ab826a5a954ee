"""Rollout batches: their creation, settings (executor, adaptive sampling) and progress as the Runs
screen follows them.

Separate from the claim/requeue protocol (store/queries/batch_queue.py) because these are reads and
settings a front end polls, while that module holds the writes whose atomicity the runners rely on.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import ColumnElement, func, update
from sqlmodel import Session, col, select

from ..models import (
    Batch,
    Episode,
    Task,
    TaskVersion,
)


def create_batch(
    s: Session, batch_id: str, *, agent: str, kind: str, base_url: str, k: int, params: dict[str, Any]
) -> Batch:
    b = Batch(
        id=batch_id,
        agent=agent,
        kind=kind,
        base_url=base_url,
        k=k,
        params_json=json.dumps(params, sort_keys=True, default=str),
    )
    s.add(b)
    s.flush()
    return b


def get_batch(s: Session, batch_id: str) -> Batch | None:
    return s.get(Batch, batch_id)


def batches(s: Session) -> list[Batch]:
    """Newest first."""
    return list(s.exec(select(Batch).order_by(col(Batch.created_at).desc(), col(Batch.id).desc())).all())


def set_batch_executor(s: Session, batch_id: str, executor: str) -> None:
    """Records where the batch's latest runner runs its episodes (``local``, ``ray``)."""
    s.exec(update(Batch).where(col(Batch.id) == batch_id).values(executor=executor))


@dataclass
class BatchProgress:
    """One batch as the Runs screen follows it: counts by status and outcome, from the store alone."""

    batch: Batch
    status: dict[str, int] = field(default_factory=dict)
    outcomes: dict[str, int] = field(default_factory=dict)

    @property
    def total(self) -> int:
        return sum(self.status.values())

    @property
    def done(self) -> int:
        return self.status.get("done", 0)

    @property
    def unfinished(self) -> bool:
        return self.status.get("queued", 0) + self.status.get("running", 0) > 0


def batch_progress(
    s: Session, *, since: Any = None, also: Sequence[str] = (), recent: int = 0
) -> list[BatchProgress]:
    """Batches that are unfinished, created at or after ``since``, named in ``also`` or among the
    ``recent`` newest, newest first, with their episodes counted by status and outcome in one grouped
    query (cheap to poll)."""
    unfinished = select(Episode.batch_id).where(col(Episode.status).in_(["queued", "running"])).distinct()
    cond: ColumnElement[bool] = col(Batch.id).in_(unfinished)
    if recent:
        newest = select(Batch.id).order_by(col(Batch.created_at).desc(), col(Batch.id).desc()).limit(recent)
        cond = cond | col(Batch.id).in_(newest)
    if since is not None:
        cond = cond | (col(Batch.created_at) >= since)
    if also:
        cond = cond | col(Batch.id).in_(list(also))
    rows = list(
        s.exec(select(Batch).where(cond).order_by(col(Batch.created_at).desc(), col(Batch.id).desc())).all()
    )
    out = {b.id: BatchProgress(b) for b in rows}
    if not out:
        return []
    counts = s.exec(
        select(Episode.batch_id, Episode.status, Episode.outcome, func.count())
        .where(col(Episode.batch_id).in_(list(out)))
        .group_by(Episode.batch_id, Episode.status, Episode.outcome)
    ).all()
    for bid, status, outcome, n in counts:
        p = out[bid]
        p.status[status] = p.status.get(status, 0) + int(n)
        if status == "done":
            p.outcomes[outcome] = p.outcomes.get(outcome, 0) + int(n)
    return list(out.values())


@dataclass
class FollowedEpisode:
    """An episode of another process's batch as the Runs screen follows it (``followed_episodes``)."""

    id: int
    batch_id: str
    task_name: str
    agent: str
    attempt: int
    status: str
    outcome: str
    reward: float | None
    agent_cast: str
    verifier_cast: str


def followed_episodes(
    s: Session,
    batch_ids: Sequence[str],
    *,
    also: Sequence[int] = (),
    ended_since: Any = None,
    executors: Sequence[str] = ("local",),
) -> list[FollowedEpisode]:
    """Episodes of ``batch_ids`` (batches whose latest runner is one of ``executors``) that are running,
    named in ``also`` (followed already, whatever their status now) or ended at or after ``ended_since``;
    by id. Indexed columns only: cheap to poll."""
    if not batch_ids and not also:
        return []
    live = (col(Episode.batch_id).in_(list(batch_ids))) & (col(Batch.executor).in_(list(executors)))
    if ended_since is not None:
        live = live & (
            (Episode.status == "running")
            | ((Episode.status == "done") & (col(Episode.ended_at) >= ended_since))
        )
    else:
        live = live & (Episode.status == "running")
    cond = live | col(Episode.id).in_(list(also)) if also else live
    rows = s.exec(
        select(Episode, Task.name)
        .join(Batch, col(Batch.id) == col(Episode.batch_id))
        .join(TaskVersion, col(TaskVersion.id) == col(Episode.task_version_id))
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(cond)
        .order_by(col(Episode.id))
    ).all()
    return [
        FollowedEpisode(
            int(ep.id),  # type: ignore[arg-type]  # a row read back from the table always has its id
            ep.batch_id,
            name,
            ep.agent,
            ep.attempt,
            ep.status,
            ep.outcome,
            ep.reward,
            ep.agent_cast,
            ep.verifier_cast,
        )  # fmt: skip
        for ep, name in rows
    ]


def batch_status_counts(s: Session, batch_id: str) -> dict[str, int]:
    """``{"queued": n, "running": n, "done": n}`` (missing statuses are 0)."""
    rows = s.exec(
        select(Episode.status, func.count()).where(Episode.batch_id == batch_id).group_by(Episode.status)
    ).all()
    out = {"queued": 0, "running": 0, "done": 0}
    out.update({st: int(n) for st, n in rows})
    return out


def adaptive_settings(batch: Batch) -> dict[str, Any]:
    """An adaptive batch's settings and state (``{}`` for a fixed-k batch)."""
    return json.loads(batch.adaptive_json) if batch.adaptive_json else {}


def adaptive_open(batch: Batch) -> bool:
    """True for an adaptive batch whose sampler has not stopped on its own."""
    return bool(batch.adaptive_json) and not adaptive_settings(batch).get("stopped")


def set_batch_adaptive(s: Session, batch_id: str, settings: dict[str, Any]) -> None:
    """Stores an adaptive batch's settings and state (engine/calibration/adaptive.py)."""
    s.exec(
        update(Batch)
        .where(col(Batch.id) == batch_id)
        .values(adaptive_json=json.dumps(settings, sort_keys=True, default=str))
    )


@dataclass
class BatchAttempts:
    """One task version's attempts in one batch: how many, the highest attempt number, how many are not
    finished (queued or running)."""

    attempts: int = 0
    last: int = -1
    unfinished: int = 0


def batch_attempts(s: Session, batch_id: str) -> dict[int, BatchAttempts]:
    """Per task version of the batch, its ``BatchAttempts`` (one grouped query)."""
    out: dict[int, BatchAttempts] = {}
    for vid, status, n, last in s.exec(
        select(Episode.task_version_id, Episode.status, func.count(), func.max(Episode.attempt))
        .where(Episode.batch_id == batch_id)
        .group_by(col(Episode.task_version_id), Episode.status)
    ):
        a = out.setdefault(int(vid), BatchAttempts())
        a.attempts += int(n)
        a.last = max(a.last, int(last))
        if status != "done":
            a.unfinished += int(n)
    return out
