"""Calibration reads: for engine/calibration/calibrate.py, engine/calibration/report.py and
engine/calibration/export.py.

Calibration always works on the *latest* version of each task: an edited task starts its accounting afresh
(DESIGN: results never mix versions), and exporting a superseded version would ship files the curator has
already replaced. Separate because these are the whole-store reads that grow with the number of episodes
(100,000 and more): each is a fixed number of queries, and the largest is read as plain driver tuples.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from ..models import (
    Audit,
    Episode,
    FailureTag,
    Step,
    Task,
    TaskVersion,
)
from .filters import latest_audit_ids, latest_version_ids


@dataclass
class CalibrationSource:
    """Everything calibration needs about one task's latest version, for one policy model."""

    task_id: int
    name: str
    version_id: int
    version_hash: str
    path: str
    instruction: str
    category: str
    difficulty: str
    outcomes: list[tuple[str, float | None]] = field(default_factory=list)  # finished episodes of the model
    audit: str = ""  # latest verdict, "" when never audited
    blocking_tags: int = 0  # uncleared blocking tags on ANY episode of the version (any agent)
    episode_ids: list[int] = field(default_factory=list)  # the episodes behind ``outcomes``, same order


def calibration_sources(
    s: Session, model: str, version_ids: Sequence[int] | None = None
) -> list[CalibrationSource]:
    """Latest version of every task with ``model``'s finished episodes, audit verdict and blocking tags;
    with ``version_ids``, exactly those versions instead (an adaptive batch's scope).

    Ordered by task id, i.e. first-import order, which the near-duplicate gate relies on.
    """
    latest_ids: Any = latest_version_ids() if version_ids is None else list(version_ids)
    versions = s.exec(
        select(  # type: ignore[call-overload]  # sqlmodel types select() for at most 4 columns; more work at runtime
            TaskVersion.task_id,
            Task.name,
            TaskVersion.id,
            TaskVersion.hash,
            TaskVersion.path,
            TaskVersion.instruction,
            TaskVersion.category,
            TaskVersion.difficulty,
        )
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(col(TaskVersion.id).in_(latest_ids))
    ).all()
    latest_audits = select(Audit.task_version_id, Audit.verdict).where(col(Audit.id).in_(latest_audit_ids()))
    audits: dict[int, str] = dict(s.exec(latest_audits).all())
    # Every finished episode of the model: the one query that grows with the store, read as plain tuples
    # over the driver (the ORM's per-row cost was most of a band over 100,000 episodes).
    outcomes: dict[int, list[tuple[str, float | None]]] = {}
    ids: dict[int, list[int]] = {}
    rows = (
        s.connection()
        .exec_driver_sql(
            "SELECT id, task_version_id, outcome, reward FROM episode"
            " WHERE status = 'done' AND agent = ? ORDER BY id",
            (model,),
        )
        .fetchall()
    )
    for eid, vid, outcome, reward in rows:
        outcomes.setdefault(vid, []).append((outcome, reward))
        ids.setdefault(vid, []).append(int(eid))
    blocking: dict[int, int] = dict(
        s.exec(
            select(Episode.task_version_id, func.count())
            .join(FailureTag, col(FailureTag.episode_id) == col(Episode.id))
            .where(col(FailureTag.cleared).is_(False), col(FailureTag.blocking).is_(True))
            .group_by(col(Episode.task_version_id))
        ).all()
    )
    out = [
        CalibrationSource(
            task_id=task_id,
            name=name,
            version_id=vid,
            version_hash=vhash,
            path=path,
            instruction=instruction,
            category=category,
            difficulty=difficulty,
            outcomes=outcomes.get(vid, []),
            audit=audits.get(vid, ""),
            blocking_tags=int(blocking.get(vid, 0)),
            episode_ids=ids.get(vid, []),
        )
        for task_id, name, vid, vhash, path, instruction, category, difficulty in versions
    ]
    out.sort(key=lambda c: c.task_id)
    return out


@dataclass
class TraceSource:
    """One finished episode of a model on its task's latest version, with what a trace row needs."""

    episode: Episode
    task: str
    version_hash: str
    instruction: str
    steps: list[Step] = field(default_factory=list)
    blocking_tags: list[str] = field(default_factory=list)  # uncleared blocking codes on the version
    episode_tags: list[str] = field(default_factory=list)  # uncleared codes on this episode


def trace_sources(s: Session, model: str) -> list[TraceSource]:
    """Finished episodes of ``model`` on the latest version of each task, by task name then episode id."""
    latest_ids = latest_version_ids()
    rows = s.exec(
        select(Episode, Task.name, TaskVersion.hash, TaskVersion.instruction)
        .join(TaskVersion, col(TaskVersion.id) == col(Episode.task_version_id))
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(Episode.agent == model, Episode.status == "done", col(TaskVersion.id).in_(latest_ids))
        .order_by(col(Task.name), col(Episode.id))
    ).all()
    out = [TraceSource(ep, name, vhash, instr) for ep, name, vhash, instr in rows]
    # Joins, not IN lists: a model may have 100,000 episodes, past SQLite's bound-parameter limit.
    steps: dict[int, list[Step]] = {}
    for st in s.exec(
        select(Step)
        .join(Episode, col(Episode.id) == col(Step.episode_id))
        .where(Episode.agent == model, Episode.status == "done", col(Episode.task_version_id).in_(latest_ids))
        .order_by(col(Step.episode_id), col(Step.index))
    ):
        steps.setdefault(st.episode_id, []).append(st)
    by_version: dict[int, set[str]] = {}
    by_episode: dict[int, set[str]] = {}
    for tag, vid in s.exec(
        select(FailureTag, Episode.task_version_id)
        .join(Episode, col(Episode.id) == col(FailureTag.episode_id))
        .where(col(Episode.task_version_id).in_(latest_ids), col(FailureTag.cleared).is_(False))
    ):
        code = f"{tag.tag_class}.{tag.subclass}"
        if tag.blocking:
            by_version.setdefault(vid, set()).add(code)
        by_episode.setdefault(tag.episode_id, set()).add(code)
    for t in out:
        eid = int(t.episode.id)  # type: ignore[arg-type]
        t.steps = steps.get(eid, [])
        t.blocking_tags = sorted(by_version.get(t.episode.task_version_id, ()))
        t.episode_tags = sorted(by_episode.get(eid, ()))
    return out


def episode_agents(s: Session) -> list[str]:
    """Every agent/model name with at least one finished episode, sorted (the report's model picker)."""
    rows = s.exec(select(Episode.agent).where(Episode.status == "done").distinct()).all()
    return sorted(a for a in rows if a)


def agents_by_recency(s: Session) -> list[str]:
    """Agents/models with finished episodes, the one that finished an episode last first."""
    rows = s.exec(
        select(Episode.agent, func.max(Episode.id))
        .where(Episode.status == "done", Episode.agent != "")
        .group_by(Episode.agent)
        .order_by(func.max(Episode.id).desc())
    ).all()
    return [a for a, _ in rows]


def tag_counts(s: Session, model: str) -> dict[str, int]:
    """Uncleared ``class.subclass`` tag counts on ``model``'s episodes of latest task versions."""
    latest_ids = latest_version_ids()
    rows = s.exec(
        select(FailureTag.tag_class, FailureTag.subclass, func.count())
        .join(Episode, col(FailureTag.episode_id) == col(Episode.id))
        .where(
            Episode.agent == model,
            col(Episode.task_version_id).in_(latest_ids),
            col(FailureTag.cleared).is_(False),
        )
        .group_by(FailureTag.tag_class, FailureTag.subclass)
    ).all()
    return {f"{c}.{sub}": int(n) for c, sub, n in sorted(rows)}
