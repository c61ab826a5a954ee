"""Every read and write of the database, as functions. No SQL lives outside ``store/``.

Functions take an open ``Session`` so callers choose the transaction boundary (an import of 500 tasks is
one transaction; a rollout worker commits per episode so a crash loses at most the episode in flight).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Integer, func
from sqlmodel import Session, col, select

from store.models import (
    Audit,
    Episode,
    Export,
    FailureTag,
    Generation,
    ImageBuild,
    Step,
    Task,
    TaskVersion,
    utcnow,
)

# --- tasks and versions -------------------------------------------------------------------------------


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
    )
    s.add(tv)
    s.flush()
    return tv


def get_version(s: Session, version_id: int) -> TaskVersion | None:
    return s.get(TaskVersion, version_id)


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

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def task_rows(s: Session) -> list[TaskRow]:
    """The latest version of every task with its audit verdict and episode/tag counts, in few queries."""
    latest_ids = select(func.max(TaskVersion.id)).group_by(TaskVersion.task_id)
    versions = s.exec(select(TaskVersion).where(col(TaskVersion.id).in_(latest_ids))).all()
    counts = dict(s.exec(select(TaskVersion.task_id, func.count()).group_by(TaskVersion.task_id)).all())
    tasks = {t.id: t for t in s.exec(select(Task)).all()}
    vids = [v.id for v in versions]

    audits: dict[int, Audit] = {}
    for a in s.exec(select(Audit).where(col(Audit.task_version_id).in_(vids)).order_by(col(Audit.id))):
        audits[a.task_version_id] = a
    ep_stats: dict[int, tuple[int, int, int]] = {}
    for vid, total, passed, infra in s.exec(
        select(
            Episode.task_version_id,
            func.count(),
            func.sum(col(Episode.outcome) == "passed", type_=Integer),
            func.sum(col(Episode.outcome).startswith("infra_error"), type_=Integer),
        )
        .where(col(Episode.task_version_id).in_(vids), Episode.status == "done")
        .group_by(Episode.task_version_id)
    ):
        ep_stats[vid] = (int(total), int(passed or 0), int(infra or 0))
    tag_stats: dict[int, tuple[int, int]] = {}
    for vid, total, blocking in s.exec(
        select(Episode.task_version_id, func.count(), func.sum(col(FailureTag.blocking), type_=Integer))
        .join(FailureTag, col(FailureTag.episode_id) == col(Episode.id))
        .where(col(Episode.task_version_id).in_(vids), col(FailureTag.cleared).is_(False))
        .group_by(Episode.task_version_id)
    ):
        tag_stats[vid] = (int(total), int(blocking or 0))

    rows = []
    for v in versions:
        t = tasks[v.task_id]
        a = audits.get(v.id)  # type: ignore[arg-type]
        total, passed, infra = ep_stats.get(v.id, (0, 0, 0))  # type: ignore[arg-type]
        tags, blocking = tag_stats.get(v.id, (0, 0))  # type: ignore[arg-type]
        rows.append(
            TaskRow(
                task_id=t.id,  # type: ignore[arg-type]
                name=t.name,
                version_id=v.id,  # type: ignore[arg-type]
                version_hash=v.hash,
                versions=counts.get(t.id, 1),
                category=v.category,
                difficulty=v.difficulty,
                origin=v.origin,
                path=v.path,
                audit=a.verdict if a else "",
                audit_reasons=json.loads(a.reasons_json) if a else [],
                episodes=total,
                passed=passed,
                infra_errors=infra,
                tags=tags,
                blocking_tags=blocking,
                image_aliases=json.loads(v.image_aliases_json or "[]"),
            )
        )
    rows.sort(key=lambda r: r.name)
    return rows


# --- images and audits --------------------------------------------------------------------------------


def record_image_build(
    s: Session, version_id: int, *, tag: str, ok: bool, log: str, duration_s: float
) -> ImageBuild:
    b = ImageBuild(task_version_id=version_id, tag=tag, ok=ok, log=log, duration_s=duration_s)
    s.add(b)
    s.flush()
    return b


def record_audit(
    s: Session, version_id: int, *, verdict: str, reasons: Sequence[str], details: dict[str, Any]
) -> Audit:
    a = Audit(
        task_version_id=version_id,
        verdict=verdict,
        reasons_json=json.dumps(list(reasons)),
        details_json=json.dumps(details, sort_keys=True, default=str),
    )
    s.add(a)
    s.flush()
    return a


def latest_audit(s: Session, version_id: int) -> Audit | None:
    return s.exec(
        select(Audit).where(Audit.task_version_id == version_id).order_by(col(Audit.id).desc())
    ).first()


# --- episodes and steps -------------------------------------------------------------------------------


def create_episode(
    s: Session, version_id: int, agent: str, *, attempt: int = 0, batch_id: str = ""
) -> Episode:
    ep = Episode(task_version_id=version_id, agent=agent, attempt=attempt, batch_id=batch_id)
    s.add(ep)
    s.flush()
    return ep


def mark_episode_running(s: Session, episode_id: int) -> None:
    ep = s.get(Episode, episode_id)
    if ep is not None:
        ep.status = "running"
        ep.started_at = utcnow()
        s.add(ep)


def finish_episode(
    s: Session,
    episode_id: int,
    *,
    outcome: str,
    reward: float | None,
    error: str = "",
    agent_cast: str = "",
    verifier_cast: str = "",
    verifier_output: str = "",
    retries: int | None = None,
) -> Episode:
    ep = s.get(Episode, episode_id)
    if ep is None:
        raise KeyError(f"episode {episode_id} does not exist")
    ep.status = "done"
    ep.outcome = outcome
    ep.reward = reward
    ep.error = error
    ep.agent_cast = agent_cast
    ep.verifier_cast = verifier_cast
    ep.verifier_output = verifier_output
    if retries is not None:
        ep.retries = retries
    ep.ended_at = utcnow()
    s.add(ep)
    s.flush()
    return ep


def get_episode(s: Session, episode_id: int) -> Episode | None:
    return s.get(Episode, episode_id)


def episodes(
    s: Session,
    *,
    version_id: int | None = None,
    agent: str | None = None,
    batch_id: str | None = None,
    status: str | None = None,
) -> list[Episode]:
    q = select(Episode)
    if version_id is not None:
        q = q.where(Episode.task_version_id == version_id)
    if agent is not None:
        q = q.where(Episode.agent == agent)
    if batch_id is not None:
        q = q.where(Episode.batch_id == batch_id)
    if status is not None:
        q = q.where(Episode.status == status)
    return list(s.exec(q.order_by(col(Episode.id))).all())


def add_step(s: Session, episode_id: int, index: int, **fields: Any) -> Step:
    for key in ("action", "cuts"):
        if key in fields:
            fields[f"{key}_json"] = json.dumps(fields.pop(key), default=str)
    step = Step(episode_id=episode_id, index=index, **fields)
    s.add(step)
    s.flush()
    return step


def steps(s: Session, episode_id: int) -> list[Step]:
    return list(s.exec(select(Step).where(Step.episode_id == episode_id).order_by(col(Step.index))).all())


# --- failure tags -------------------------------------------------------------------------------------

BLOCKING_CLASSES = frozenset({"invalidity", "misalignment"})


def add_tag(
    s: Session, episode_id: int, tag_class: str, subclass: str, *, note: str = "", author: str = ""
) -> FailureTag:
    tag = FailureTag(
        episode_id=episode_id,
        tag_class=tag_class,
        subclass=subclass,
        note=note,
        author=author,
        blocking=tag_class in BLOCKING_CLASSES,
    )
    s.add(tag)
    s.flush()
    return tag


def tags_for_episode(s: Session, episode_id: int, *, include_cleared: bool = False) -> list[FailureTag]:
    q = select(FailureTag).where(FailureTag.episode_id == episode_id)
    if not include_cleared:
        q = q.where(col(FailureTag.cleared).is_(False))
    return list(s.exec(q.order_by(col(FailureTag.id))).all())


# --- calibration and export ---------------------------------------------------------------------------
# Reads for engine/calibrate.py, engine/report.py and engine/export.py. Calibration always works on the
# *latest* version of each task: an edited task starts its accounting afresh (DESIGN: results never mix
# versions), and exporting a superseded version would ship files the curator has already replaced.


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


def calibration_sources(s: Session, model: str) -> list[CalibrationSource]:
    """Latest version of every task with ``model``'s finished episodes, audit verdict and blocking tags.

    Ordered by task id, i.e. first-import order, which the near-duplicate gate relies on.
    """
    latest_ids = select(func.max(TaskVersion.id)).group_by(TaskVersion.task_id)
    versions = s.exec(select(TaskVersion).where(col(TaskVersion.id).in_(latest_ids))).all()
    tasks = {t.id: t for t in s.exec(select(Task)).all()}
    vids = [v.id for v in versions]
    audits: dict[int, str] = {}
    for a in s.exec(select(Audit).where(col(Audit.task_version_id).in_(vids)).order_by(col(Audit.id))):
        audits[a.task_version_id] = a.verdict
    outcomes: dict[int, list[tuple[str, float | None]]] = {}
    for vid, outcome, reward in s.exec(
        select(Episode.task_version_id, Episode.outcome, Episode.reward)
        .where(col(Episode.task_version_id).in_(vids), Episode.status == "done", Episode.agent == model)
        .order_by(col(Episode.id))
    ):
        outcomes.setdefault(vid, []).append((outcome, reward))
    blocking: dict[int, int] = dict(
        s.exec(
            select(Episode.task_version_id, func.count())
            .join(FailureTag, col(FailureTag.episode_id) == col(Episode.id))
            .where(
                col(Episode.task_version_id).in_(vids),
                col(FailureTag.cleared).is_(False),
                col(FailureTag.blocking).is_(True),
            )
            .group_by(Episode.task_version_id)
        ).all()
    )
    out = [
        CalibrationSource(
            task_id=v.task_id,
            name=tasks[v.task_id].name,
            version_id=v.id,  # type: ignore[arg-type]
            version_hash=v.hash,
            path=v.path,
            instruction=v.instruction,
            category=v.category,
            difficulty=v.difficulty,
            outcomes=outcomes.get(v.id, []),  # type: ignore[arg-type]
            audit=audits.get(v.id, ""),  # type: ignore[arg-type]
            blocking_tags=int(blocking.get(v.id, 0)),  # type: ignore[arg-type]
        )
        for v in versions
    ]
    out.sort(key=lambda c: c.task_id)
    return out


def episode_agents(s: Session) -> list[str]:
    """Every agent/model name with at least one finished episode, sorted (the report's model picker)."""
    rows = s.exec(select(Episode.agent).where(Episode.status == "done").distinct()).all()
    return sorted(a for a in rows if a)


def tag_counts(s: Session, model: str) -> dict[str, int]:
    """Uncleared ``class.subclass`` tag counts on ``model``'s episodes of latest task versions."""
    latest_ids = select(func.max(TaskVersion.id)).group_by(TaskVersion.task_id)
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


def generation_yield(s: Session) -> list[tuple[str, int, int]]:
    """(prompt_version, finished attempts, accepted) per generator prompt version, sorted by version.

    Generations still ``running`` are not attempts yet: counting them would understate the yield of a
    batch in progress.
    """
    rows = s.exec(
        select(
            Generation.prompt_version,
            func.count(),
            # type_=Integer: a SUM over a comparison otherwise inherits Boolean and 2 reads back as True
            func.sum(col(Generation.outcome) == "accepted", type_=Integer),
        )
        .where(Generation.outcome != "running")
        .group_by(Generation.prompt_version)
        .order_by(Generation.prompt_version)
    ).all()
    return [(pv, int(n), int(acc or 0)) for pv, n, acc in rows]


def record_export(
    s: Session,
    *,
    model: str,
    params: dict[str, Any],
    out_dir: str,
    task_count: int,
    manifest_sha256: str,
) -> Export:
    e = Export(
        model=model,
        params_json=json.dumps(params, sort_keys=True, default=str),
        out_dir=out_dir,
        task_count=task_count,
        manifest_sha256=manifest_sha256,
    )
    s.add(e)
    s.flush()
    return e


def list_exports(s: Session, model: str | None = None) -> list[Export]:
    q = select(Export)
    if model is not None:
        q = q.where(Export.model == model)
    return list(s.exec(q.order_by(col(Export.id))).all())


def delete_steps(s: Session, episode_id: int) -> None:
    """Drops the steps of an abandoned try so a retried episode keeps only its final try's steps."""
    for step in s.exec(select(Step).where(Step.episode_id == episode_id)).all():
        s.delete(step)
