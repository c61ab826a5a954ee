"""Tasks and their versions: import, look-up by name or version-hash prefix, and the Tasks table's rows.

Separate because every other aggregate hangs off a task version: the functions here are the ones the
importer, the generator's duplicate check and the Tasks screen share, and ``task_rows`` is the one
whole-store aggregate read that must stay a fixed number of queries whatever the number of tasks.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Integer, func
from sqlmodel import Session, col, select

from ..models import (
    Audit,
    Episode,
    FailureTag,
    Task,
    TaskVersion,
)
from .filters import latest_audit_ids, latest_version_ids


def get_task(s: Session, name: str) -> Task | None:
    return s.exec(select(Task).where(Task.name == name)).first()


def get_or_create_task(s: Session, name: str, source_path: str = "") -> tuple[Task, bool]:
    task = get_task(s, name)
    if task is not None:
        return task, False
    task = Task(name=name, source_path=source_path)
    s.add(task)
    s.flush()
    return task, True


def version_by_hash(s: Session, version_hash: str) -> TaskVersion | None:
    return s.exec(select(TaskVersion).where(TaskVersion.hash == version_hash)).first()


def add_task_version(
    s: Session,
    task: Task,
    *,
    version_hash: str,
    path: str,
    instruction: str,
    category: str = "",
    difficulty: str = "",
    tags: Sequence[str] = (),
    metadata: dict[str, Any] | None = None,
    origin: str = "import",
    warnings: Sequence[str] = (),
    unsupported: Sequence[str] = (),
) -> TaskVersion:
    tv = TaskVersion(
        task_id=task.id,  # type: ignore[arg-type]
        hash=version_hash,
        path=path,
        instruction=instruction,
        category=category,
        difficulty=difficulty,
        tags_json=json.dumps(list(tags)),
        metadata_json=json.dumps(metadata or {}, sort_keys=True, default=str),
        origin=origin,
        warnings_json=json.dumps(list(warnings)),
        unsupported_json=json.dumps(list(unsupported)),
    )
    s.add(tv)
    s.flush()
    return tv


def task_by_id(s: Session, task_id: int) -> Task | None:
    return s.get(Task, task_id)


def get_version(s: Session, version_id: int) -> TaskVersion | None:
    return s.get(TaskVersion, version_id)


def versions_of_task(s: Session, task_id: int) -> list[TaskVersion]:
    """Every version of the task, oldest first (the last is the latest)."""
    return list(
        s.exec(select(TaskVersion).where(TaskVersion.task_id == task_id).order_by(col(TaskVersion.id)))
    )


def latest_version(s: Session, task_id: int) -> TaskVersion | None:
    return s.exec(
        select(TaskVersion).where(TaskVersion.task_id == task_id).order_by(col(TaskVersion.id).desc())
    ).first()


def resolve_version(s: Session, ref: str) -> TaskVersion | None:
    """A task name (its latest version) or a version-hash prefix of at least 8 characters."""
    task = get_task(s, ref)
    if task is not None:
        return latest_version(s, task.id)  # type: ignore[arg-type]
    if len(ref) >= 8:
        return s.exec(select(TaskVersion).where(col(TaskVersion.hash).startswith(ref))).first()
    return None


def set_version_aliases(s: Session, version_id: int, aliases: Sequence[tuple[str, str]]) -> None:
    tv = s.get(TaskVersion, version_id)
    if tv is not None:
        tv.image_aliases_json = json.dumps([list(a) for a in aliases])
        s.add(tv)


@dataclass
class TaskRow:
    """One line of the Tasks table / ``bandpass tasks``: the latest version of a task and its evidence."""

    task_id: int
    name: str
    version_id: int
    version_hash: str
    versions: int
    category: str
    difficulty: str
    origin: str
    path: str
    audit: str = ""  # latest verdict, "" when never audited
    audit_reasons: list[str] = field(default_factory=list)
    episodes: int = 0
    passed: int = 0
    infra_errors: int = 0
    tags: int = 0
    blocking_tags: int = 0
    image_aliases: list[list[str]] = field(default_factory=list)
    source: str = ""  # where the task was imported from: with the name, its identity
    warnings: list[str] = field(default_factory=list)  # what the import noticed (ignored keys, conversion)
    unsupported: list[str] = field(default_factory=list)  # what Bandpass cannot run as the author meant
    #: Where the version is verified and why (the footprint learnt by the audit or before its first
    #: rollout: mode, why, source; {} when not learnt) and the artifacts it adopted from it.
    verify_mode: str = ""
    footprint: dict[str, Any] = field(default_factory=dict)
    adopted_artifacts: list[str] = field(default_factory=list)
    #: the latest audit's seconds per phase and cost in oracle-episode equivalents (engine/audit/phases.py)
    audit_phases: dict[str, float] = field(default_factory=dict)
    audit_cost: dict[str, Any] = field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def task_rows(s: Session) -> list[TaskRow]:
    """The latest version of every task with its audit verdict and episode/tag counts.

    Five aggregate queries over plain columns, whatever the number of tasks: no ORM objects and no
    10,000-id ``IN`` lists (latest versions are a subquery), so the Tasks screen stays fast at scale.
    """
    latest_ids = latest_version_ids()
    versions = s.exec(
        select(  # type: ignore[call-overload]  # sqlmodel types select() for at most 4 columns; more work at runtime
            TaskVersion.id,
            TaskVersion.task_id,
            Task.name,
            TaskVersion.hash,
            TaskVersion.category,
            TaskVersion.difficulty,
            TaskVersion.origin,
            TaskVersion.path,
            TaskVersion.image_aliases_json,
            TaskVersion.warnings_json,
            TaskVersion.unsupported_json,
            Task.source_path,
            TaskVersion.verify_mode,
            TaskVersion.footprint_json,
            TaskVersion.adopted_artifacts_json,
        )
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(col(TaskVersion.id).in_(latest_ids))
    ).all()
    counts = dict(s.exec(select(TaskVersion.task_id, func.count()).group_by(col(TaskVersion.task_id))).all())
    audits = {
        vid: (verdict, reasons, phases, cost)
        for vid, verdict, reasons, phases, cost in s.exec(
            select(  # type: ignore[call-overload]  # more than 4 columns (see above)
                Audit.task_version_id,
                Audit.verdict,
                Audit.reasons_json,
                # read in SQLite: a corpus's audit details are large, the phases a few numbers
                func.json_extract(Audit.details_json, "$.phases"),
                func.json_extract(Audit.details_json, "$.cost"),
            ).where(col(Audit.id).in_(latest_audit_ids()))
        )
    }
    ep_stats: dict[int, tuple[int, int, int]] = {}
    for vid, total, n_passed, n_infra in s.exec(
        select(
            Episode.task_version_id,
            func.count(),
            func.sum(col(Episode.outcome) == "passed", type_=Integer),
            func.sum(col(Episode.outcome).startswith("infra_error"), type_=Integer),
        )
        .where(Episode.status == "done")
        .group_by(col(Episode.task_version_id))
    ):
        ep_stats[vid] = (int(total), int(n_passed or 0), int(n_infra or 0))
    tag_stats: dict[int, tuple[int, int]] = {}
    for vid, total, n_blocking in s.exec(
        select(Episode.task_version_id, func.count(), func.sum(col(FailureTag.blocking), type_=Integer))
        .join(FailureTag, col(FailureTag.episode_id) == col(Episode.id))
        .where(col(FailureTag.cleared).is_(False))
        .group_by(col(Episode.task_version_id))
    ):
        tag_stats[vid] = (int(total), int(n_blocking or 0))

    rows = []
    for row in versions:
        vid, task_id, name, vhash, category, difficulty, origin, path, aliases, warns, unsup, src = row[:12]
        mode, footprint, adopted = row[12:]
        verdict, reasons, phases, cost = audits.get(vid, ("", "[]", None, None))
        total, passed, infra = ep_stats.get(vid, (0, 0, 0))
        tags, blocking = tag_stats.get(vid, (0, 0))
        rows.append(
            TaskRow(
                task_id=task_id,
                name=name,
                version_id=vid,
                version_hash=vhash,
                versions=counts.get(task_id, 1),
                category=category,
                difficulty=difficulty,
                origin=origin,
                path=path,
                audit=verdict,
                audit_reasons=json.loads(reasons),
                audit_phases=json.loads(phases) if phases else {},
                audit_cost=json.loads(cost) if cost else {},
                episodes=total,
                passed=passed,
                infra_errors=infra,
                tags=tags,
                blocking_tags=blocking,
                image_aliases=json.loads(aliases or "[]"),
                source=src or "",
                warnings=json.loads(warns or "[]"),
                unsupported=json.loads(unsup or "[]"),
                verify_mode=mode or "",
                footprint=json.loads(footprint or "{}"),
                adopted_artifacts=json.loads(adopted or "[]"),
            )
        )
    rows.sort(key=lambda r: r.name)
    return rows


def task_name_of_version(s: Session, version_id: int) -> str:
    v = s.get(TaskVersion, version_id)
    t = s.get(Task, v.task_id) if v is not None else None
    return t.name if t is not None else ""


@dataclass
class InstructionRow:
    name: str
    version_id: int
    instruction: str
    path: str
    origin: str


def latest_instructions(s: Session) -> list[InstructionRow]:
    """The latest version of every task with its instruction, in task order (duplicate checks)."""
    latest_ids = latest_version_ids()
    rows = s.exec(
        select(  # type: ignore[call-overload]  # sqlmodel types select() for at most 4 columns; more work at runtime
            Task.name, TaskVersion.id, TaskVersion.instruction, TaskVersion.path, TaskVersion.origin
        )
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(col(TaskVersion.id).in_(latest_ids))
        .order_by(col(Task.id))
    ).all()
    return [InstructionRow(n, int(v), i or "", p, o) for n, v, i, p, o in rows]
