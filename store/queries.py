"""Every read and write of the database, as functions. No SQL lives outside ``store/``.

Functions take an open ``Session`` so callers choose the transaction boundary (an import of 500 tasks is
one transaction; a rollout worker commits per episode so a crash loses at most the episode in flight).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from sqlalchemy import Integer, func, or_, update
from sqlmodel import Session, col, select

from store.models import (
    Audit,
    Batch,
    Episode,
    Export,
    FailureTag,
    Generation,
    ImageBuild,
    ReviewState,
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
    """The latest version of every task with its audit verdict and episode/tag counts.

    Five aggregate queries over plain columns, whatever the number of tasks: no ORM objects and no
    10,000-id ``IN`` lists (latest versions are a subquery), so the Tasks screen stays fast at scale.
    """
    latest_ids = select(func.max(TaskVersion.id)).group_by(TaskVersion.task_id).scalar_subquery()
    versions = s.exec(
        select(
            TaskVersion.id,
            TaskVersion.task_id,
            Task.name,
            TaskVersion.hash,
            TaskVersion.category,
            TaskVersion.difficulty,
            TaskVersion.origin,
            TaskVersion.path,
            TaskVersion.image_aliases_json,
        )
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(col(TaskVersion.id).in_(latest_ids))
    ).all()
    counts = dict(s.exec(select(TaskVersion.task_id, func.count()).group_by(TaskVersion.task_id)).all())
    latest_audit_ids = select(func.max(Audit.id)).group_by(Audit.task_version_id).scalar_subquery()
    audits = {
        vid: (verdict, reasons)
        for vid, verdict, reasons in s.exec(
            select(Audit.task_version_id, Audit.verdict, Audit.reasons_json).where(
                col(Audit.id).in_(latest_audit_ids)
            )
        )
    }
    ep_stats: dict[int, tuple[int, int, int]] = {}
    for vid, total, passed, infra in s.exec(
        select(
            Episode.task_version_id,
            func.count(),
            func.sum(col(Episode.outcome) == "passed", type_=Integer),
            func.sum(col(Episode.outcome).startswith("infra_error"), type_=Integer),
        )
        .where(Episode.status == "done")
        .group_by(Episode.task_version_id)
    ):
        ep_stats[vid] = (int(total), int(passed or 0), int(infra or 0))
    tag_stats: dict[int, tuple[int, int]] = {}
    for vid, total, blocking in s.exec(
        select(Episode.task_version_id, func.count(), func.sum(col(FailureTag.blocking), type_=Integer))
        .join(FailureTag, col(FailureTag.episode_id) == col(Episode.id))
        .where(col(FailureTag.cleared).is_(False))
        .group_by(Episode.task_version_id)
    ):
        tag_stats[vid] = (int(total), int(blocking or 0))

    rows = []
    for vid, task_id, name, vhash, category, difficulty, origin, path, aliases in versions:
        verdict, reasons = audits.get(vid, ("", "[]"))
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
                episodes=total,
                passed=passed,
                infra_errors=infra,
                tags=tags,
                blocking_tags=blocking,
                image_aliases=json.loads(aliases or "[]"),
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


def image_builds(s: Session, version_id: int) -> list[ImageBuild]:
    q = select(ImageBuild).where(ImageBuild.task_version_id == version_id)
    return list(s.exec(q.order_by(col(ImageBuild.id))))


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


def set_episode_evidence(s: Session, episode_id: int, evidence: dict[str, Any] | None) -> None:
    """Stores the attribution evidence of an episode's last try ({} or None: nothing to attribute)."""
    ep = s.get(Episode, episode_id)
    if ep is None:
        raise KeyError(f"episode {episode_id} does not exist")
    ep.evidence_json = json.dumps(evidence, sort_keys=True) if evidence else ""
    s.add(ep)
    s.flush()


def episode_evidence(s: Session, episode_id: int) -> dict[str, Any]:
    """The attribution evidence as a JSON-ready dict ({} when none was recorded)."""
    ep = s.get(Episode, episode_id)
    if ep is None:
        raise KeyError(f"episode {episode_id} does not exist")
    try:
        data = json.loads(ep.evidence_json) if ep.evidence_json else {}
    except json.JSONDecodeError:
        return {}
    return data if isinstance(data, dict) else {}


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
    for key in ("action", "cuts", "attempts"):
        if key in fields:
            fields[f"{key}_json"] = json.dumps(fields.pop(key), default=str)
    step = Step(episode_id=episode_id, index=index, **fields)
    s.add(step)
    s.flush()
    return step


def steps(s: Session, episode_id: int) -> list[Step]:
    return list(s.exec(select(Step).where(Step.episode_id == episode_id).order_by(col(Step.index))).all())


# --- failure tags -------------------------------------------------------------------------------------


def add_tag(
    s: Session,
    episode_id: int,
    tag_class: str,
    subclass: str,
    *,
    blocking: bool,
    note: str = "",
    author: str = "",
) -> FailureTag:
    """Stores a tag. ``blocking`` is the taxonomy's rule for the class (``Taxonomy.is_blocking`` in
    engine/review): the store records the decision and never keeps a second copy of the rule."""
    tag = FailureTag(
        episode_id=episode_id,
        tag_class=tag_class,
        subclass=subclass,
        note=note,
        author=author,
        blocking=blocking,
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
# Reads for engine/calibration/calibrate.py, engine/calibration/report.py and engine/calibration/export.py.
# Calibration always works on the
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
    latest_ids = select(func.max(TaskVersion.id)).group_by(TaskVersion.task_id).scalar_subquery()
    versions = s.exec(
        select(
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
    latest_audit_ids = select(func.max(Audit.id)).group_by(Audit.task_version_id).scalar_subquery()
    audits: dict[int, str] = dict(
        s.exec(select(Audit.task_version_id, Audit.verdict).where(col(Audit.id).in_(latest_audit_ids))).all()
    )
    outcomes: dict[int, list[tuple[str, float | None]]] = {}
    for vid, outcome, reward in s.exec(
        select(Episode.task_version_id, Episode.outcome, Episode.reward)
        .where(Episode.status == "done", Episode.agent == model)
        .order_by(col(Episode.id))
    ):
        outcomes.setdefault(vid, []).append((outcome, reward))
    blocking: dict[int, int] = dict(
        s.exec(
            select(Episode.task_version_id, func.count())
            .join(FailureTag, col(FailureTag.episode_id) == col(Episode.id))
            .where(col(FailureTag.cleared).is_(False), col(FailureTag.blocking).is_(True))
            .group_by(Episode.task_version_id)
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
    latest_ids = select(func.max(TaskVersion.id)).group_by(TaskVersion.task_id).scalar_subquery()
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

    Generations still ``running`` are not attempts yet, and ``error``/``cancelled`` ones (API outages, a
    curator's stop) say nothing about the prompt: counting them would understate its yield. The same rule
    as ``bandpass report generation``.
    """
    rows = s.exec(
        select(
            Generation.prompt_version,
            func.count(),
            # type_=Integer: a SUM over a comparison otherwise inherits Boolean and 2 reads back as True
            func.sum(col(Generation.outcome) == "accepted", type_=Integer),
        )
        .where(col(Generation.outcome).not_in(("running", "error", "cancelled")))
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


# --- rollout batches ----------------------------------------------------------------------------------
# A batch's episodes are queued rows claimed one at a time by runners. Claiming is a single UPDATE guarded
# by ``status = 'queued'``, so two runners (threads or processes) can never take the same row, and a
# crash leaves at worst rows marked ``running`` that ``requeue_stale`` hands back on resume.


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
    s.exec(update(Batch).where(col(Batch.id) == batch_id).values(executor=executor))  # type: ignore[call-overload]


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
    cond = col(Batch.id).in_(unfinished)
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
            int(ep.id),
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


def steps_after(s: Session, after: dict[int, int]) -> list[tuple[int, int, int, dict[str, Any]]]:
    """``(episode_id, step id, index, action)`` of the steps with an id above ``after[episode_id]``, in id
    order: what a follower of running episodes has not seen yet."""
    if not after:
        return []
    cond = or_(*((Step.episode_id == eid) & (col(Step.id) > last) for eid, last in after.items()))
    rows = s.exec(
        select(Step.episode_id, Step.id, Step.index, Step.action_json).where(cond).order_by(col(Step.id))
    ).all()
    out = []
    for eid, sid, index, action_json in rows:
        try:
            action = json.loads(action_json or "{}")
        except ValueError:
            action = {"error": "unreadable action"}
        out.append((int(eid), int(sid), int(index), action if isinstance(action, dict) else {}))  # type: ignore[arg-type]
    return out


def batch_status_counts(s: Session, batch_id: str) -> dict[str, int]:
    """``{"queued": n, "running": n, "done": n}`` (missing statuses are 0)."""
    rows = s.exec(
        select(Episode.status, func.count()).where(Episode.batch_id == batch_id).group_by(Episode.status)
    ).all()
    out = {"queued": 0, "running": 0, "done": 0}
    out.update({st: int(n) for st, n in rows})
    return out


def claim_next_episode(s: Session, batch_id: str) -> Episode | None:
    """Atomically flips the batch's next queued episode to ``running`` and returns it (None: none left).

    Ordered by attempt first, so every task gets its first attempt before any gets its second: a batch
    stopped early still covers every task, and workers spread over task images instead of queueing on one.
    """
    nxt = (
        select(Episode.id)
        .where(Episode.batch_id == batch_id, Episode.status == "queued")
        .order_by(col(Episode.attempt), col(Episode.id))
        .limit(1)
        .scalar_subquery()
    )
    stmt = (
        update(Episode)
        .where(col(Episode.id) == nxt, col(Episode.status) == "queued")
        .values(status="running", started_at=utcnow())
        .returning(col(Episode.id))
        .execution_options(synchronize_session=False)
    )
    claimed = s.execute(stmt).scalar_one_or_none()
    if claimed is None:
        return None
    s.flush()
    ep = s.get(Episode, claimed, populate_existing=True)
    return ep


def requeue_episodes(s: Session, episode_ids: Sequence[int]) -> list[int]:
    """Hands ``running`` episodes back to the queue (their steps go: the rerun starts afresh)."""
    if not episode_ids:
        return []
    ids = list(
        s.exec(
            select(Episode.id).where(col(Episode.id).in_(list(episode_ids)), Episode.status == "running")
        ).all()
    )
    if not ids:
        return []
    s.execute(
        update(Episode)
        .where(col(Episode.id).in_(ids), col(Episode.status) == "running")
        .values(status="queued", started_at=None)
        .execution_options(synchronize_session=False)
    )
    for step in s.exec(select(Step).where(col(Step.episode_id).in_(ids))).all():
        s.delete(step)
    s.flush()
    return [int(i) for i in ids if i is not None]


def requeue_for_retry(
    s: Session, batch_id: str, outcomes: Sequence[str], moved: dict[int, str] | None = None
) -> list[int]:
    """Finished episodes of the batch whose outcome is in ``outcomes`` back to ``queued`` as a new try
    of the *same* row (the attempt stays one sample); what they ended with goes to ``prior_tries_json``.

    ``moved`` maps episode id -> where its previous recordings were moved (kept in the history).
    """
    rows = list(
        s.exec(
            select(Episode).where(
                Episode.batch_id == batch_id,
                Episode.status == "done",
                col(Episode.outcome).in_(list(outcomes)),
            )
        ).all()
    )
    ids: list[int] = []
    for ep in rows:
        history = json.loads(ep.prior_tries_json or "[]")
        history.append(
            {
                "outcome": ep.outcome,
                "reward": ep.reward,
                "error": ep.error,
                "retries": ep.retries,
                "ended_at": ep.ended_at.isoformat() if ep.ended_at else None,
                "recordings": (moved or {}).get(int(ep.id), ""),  # type: ignore[arg-type]
            }
        )
        ep.prior_tries_json = json.dumps(history, sort_keys=True)
        ep.status, ep.outcome, ep.reward, ep.error = "queued", "", None, ""
        ep.agent_cast = ep.verifier_cast = ep.verifier_output = ""
        ep.started_at = ep.ended_at = None
        s.add(ep)
        ids.append(int(ep.id))  # type: ignore[arg-type]
    for step in s.exec(select(Step).where(col(Step.episode_id).in_(ids))).all():
        s.delete(step)
    s.flush()
    return ids


def episode_by_source(s: Session, source: str) -> Episode | None:
    """The episode imported from ``source`` (e.g. ``harbor:<job id>/<trial>``), if any."""
    return s.exec(select(Episode).where(Episode.source == source)).first()


def task_name_of_version(s: Session, version_id: int) -> str:
    v = s.get(TaskVersion, version_id)
    t = s.get(Task, v.task_id) if v is not None else None
    return t.name if t is not None else ""


def finished_outcomes(s: Session, batch_id: str) -> dict[int, str]:
    """Episode id -> outcome for the batch's finished episodes."""
    rows = s.exec(
        select(Episode.id, Episode.outcome).where(Episode.batch_id == batch_id, Episode.status == "done")
    )
    return {int(i): o for i, o in rows if i is not None}


def requeue_stale(s: Session, batch_id: str) -> list[int]:
    """Every ``running`` episode of the batch back to ``queued``; returns their ids.

    Only safe when no live runner owns them: ``engine.run.rollouts`` calls it while holding the batch's
    exclusive lock, which a live runner would be holding shared.
    """
    ids = s.exec(select(Episode.id).where(Episode.batch_id == batch_id, Episode.status == "running")).all()
    return requeue_episodes(s, [i for i in ids if i is not None])


def latest_unfinished_batch_id(s: Session) -> str | None:
    """The newest batch that still has queued or running episodes."""
    unfinished = select(Episode.batch_id).where(col(Episode.status).in_(["queued", "running"])).distinct()
    b = s.exec(
        select(Batch)
        .where(col(Batch.id).in_(unfinished))
        .order_by(col(Batch.created_at).desc(), col(Batch.id).desc())
    ).first()
    return b.id if b else None


# --- replay and tagging -------------------------------------------------------------------------------
# Reads and writes for engine/review/tagging.py (the tagging queue, bulk tags, undo) and the Replay screen.


def get_tag(s: Session, tag_id: int) -> FailureTag | None:
    return s.get(FailureTag, tag_id)


def clear_tag(s: Session, tag_id: int, *, cleared: bool = True) -> FailureTag | None:
    """Clears (or, with ``cleared=False``, restores) a tag. Cleared tags are kept, not deleted: they are
    the record that a curator once thought so, and clearing a blocking tag is what readmits a task."""
    tag = s.get(FailureTag, tag_id)
    if tag is not None:
        tag.cleared = cleared
        s.add(tag)
        s.flush()
    return tag


def delete_tag(s: Session, tag_id: int) -> bool:
    """Removes a tag outright: only for undoing a tag just made by mistake."""
    tag = s.get(FailureTag, tag_id)
    if tag is None:
        return False
    s.delete(tag)
    s.flush()
    return True


@dataclass
class TagRow:
    """One line of ``bandpass tags``: a tag with the episode and task it belongs to."""

    tag: FailureTag
    task: str
    outcome: str

    def as_dict(self) -> dict[str, Any]:
        t = self.tag
        return {
            "id": t.id,
            "episode_id": t.episode_id,
            "task": self.task,
            "outcome": self.outcome,
            "tag": f"{t.tag_class}.{t.subclass}",
            "note": t.note,
            "author": t.author,
            "blocking": t.blocking,
            "cleared": t.cleared,
            "created_at": t.created_at.isoformat() if t.created_at else None,
        }


def tag_rows(s: Session, *, include_cleared: bool = False) -> list[TagRow]:
    q = (
        select(FailureTag, Episode.outcome, Task.name)
        .join(Episode, col(Episode.id) == col(FailureTag.episode_id))
        .join(TaskVersion, col(TaskVersion.id) == col(Episode.task_version_id))
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
    )
    if not include_cleared:
        q = q.where(col(FailureTag.cleared).is_(False))
    return [TagRow(t, name, outcome) for t, outcome, name in s.exec(q.order_by(col(FailureTag.id))).all()]


@dataclass
class ReviewRow:
    """One episode in the tagging queue. ``state``: pending | tagged | skipped."""

    episode: Episode
    task: str
    version_hash: str
    tags: list[FailureTag]
    state: str


def review_rows(s: Session) -> list[ReviewRow]:
    """Finished episodes a curator should look at: every one that did not pass, plus passed ones that
    carry a tag (a suspicious pass someone flagged), grouped by task so bulk tagging finds neighbours."""
    eps = s.exec(
        select(Episode, Task.name, TaskVersion.hash)
        .join(TaskVersion, col(TaskVersion.id) == col(Episode.task_version_id))
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(Episode.status == "done")
        .order_by(col(Task.name), col(Episode.id))
    ).all()
    tags: dict[int, list[FailureTag]] = {}
    for t in s.exec(
        select(FailureTag).where(col(FailureTag.cleared).is_(False)).order_by(col(FailureTag.id))
    ).all():
        tags.setdefault(t.episode_id, []).append(t)
    skipped = {r.episode_id for r in s.exec(select(ReviewState).where(ReviewState.state == "skipped")).all()}
    rows = []
    for ep, name, vhash in eps:
        ep_tags = tags.get(ep.id, [])  # type: ignore[arg-type]
        if ep.outcome == "passed" and not ep_tags:
            continue
        state = "tagged" if ep_tags else "skipped" if ep.id in skipped else "pending"
        rows.append(ReviewRow(ep, name, vhash, ep_tags, state))
    return rows


def review_state(s: Session, episode_id: int) -> str | None:
    r = s.get(ReviewState, episode_id)
    return r.state if r is not None else None


def set_review_state(s: Session, episode_id: int, state: str | None, *, author: str = "") -> None:
    """Sets (``"skipped"``) or removes (None) an episode's stored queue state."""
    r = s.get(ReviewState, episode_id)
    if state is None:
        if r is not None:
            s.delete(r)
    elif r is None:
        s.add(ReviewState(episode_id=episode_id, state=state, author=author))
    else:
        r.state, r.author, r.updated_at = state, author, utcnow()
        s.add(r)
    s.flush()


# --- cockpit ---
# Reads for the TUI (tui/screens/*): the Tasks detail pane, the Runs step list, the Generate history.


def audits_for_version(s: Session, version_id: int) -> list[Audit]:
    """Every audit of a version, newest first: the detail pane shows the history, not just the verdict."""
    return list(
        s.exec(select(Audit).where(Audit.task_version_id == version_id).order_by(col(Audit.id).desc())).all()
    )


def recent_generations(s: Session, limit: int = 200) -> list[Generation]:
    """The newest generation attempts first (the Generate screen's history)."""
    return list(s.exec(select(Generation).order_by(col(Generation.id).desc()).limit(limit)).all())


def task_names_for_episodes(s: Session, episode_ids: Sequence[int]) -> dict[int, str]:
    """episode id -> task name, in one query (a Runs pane titles episodes it learns of from events)."""
    if not episode_ids:
        return {}
    rows = s.exec(
        select(Episode.id, Task.name)
        .join(TaskVersion, col(TaskVersion.id) == col(Episode.task_version_id))
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(col(Episode.id).in_(list(episode_ids)))
    ).all()
    return {int(eid): name for eid, name in rows}


def episode_task_name(s: Session, episode_id: int) -> str:
    """The task an episode ran, for titles; "" when the episode does not exist."""
    name = s.exec(
        select(Task.name)
        .join(TaskVersion, col(TaskVersion.task_id) == col(Task.id))
        .join(Episode, col(Episode.task_version_id) == col(TaskVersion.id))
        .where(Episode.id == episode_id)
    ).first()
    return name or ""


# --- generation ---------------------------------------------------------------------------------------


def create_generation(s: Session, **fields: Any) -> Generation:
    g = Generation(**fields)
    s.add(g)
    s.flush()
    return g


def update_generation(s: Session, generation_id: int, **fields: Any) -> Generation:
    g = s.get(Generation, generation_id)
    if g is None:
        raise KeyError(f"generation {generation_id} does not exist")
    for key, value in fields.items():
        setattr(g, key, value)
    s.add(g)
    return g


def get_generation(s: Session, generation_id: int) -> Generation | None:
    return s.get(Generation, generation_id)


def list_generations(
    s: Session,
    *,
    prompt_version: str | None = None,
    model: str | None = None,
    outcome: str | None = None,
) -> list[Generation]:
    q = select(Generation)
    if prompt_version is not None:
        q = q.where(Generation.prompt_version == prompt_version)
    if model is not None:
        q = q.where(Generation.model == model)
    if outcome is not None:
        q = q.where(Generation.outcome == outcome)
    return list(s.exec(q.order_by(col(Generation.id))).all())


@dataclass
class InstructionRow:
    name: str
    version_id: int
    instruction: str
    path: str
    origin: str


def latest_instructions(s: Session) -> list[InstructionRow]:
    """The latest version of every task with its instruction, in task order (duplicate checks)."""
    latest_ids = select(func.max(TaskVersion.id)).group_by(TaskVersion.task_id)
    rows = s.exec(
        select(Task.name, TaskVersion.id, TaskVersion.instruction, TaskVersion.path, TaskVersion.origin)
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(col(TaskVersion.id).in_(latest_ids))
        .order_by(col(Task.id))
    ).all()
    return [InstructionRow(n, int(v), i or "", p, o) for n, v, i, p, o in rows]


def last_failed_generation(s: Session) -> Generation | None:
    """The most recent finished generation the meta-agent itself failed (rejected or out of budget).
    Infra errors are not the model's mistake and teach the next attempt nothing."""
    return s.exec(
        select(Generation)
        .where(col(Generation.outcome).in_(["rejected", "budget_exhausted"]))
        .order_by(col(Generation.id).desc())
    ).first()


# --- bulk (bench, import) -----------------------------------------------------------------------------
# One executemany per table for large synthetic or imported data sets (bench/bench_scale.py writes
# 10,000 tasks and 100,000 episodes): row-by-row ORM adds cost ~50x the insert itself.

from sqlalchemy import insert as _sa_insert  # noqa: E402 - kept with its section so parallel edits don't collide

_BULK_TABLES: dict[str, Any] = {"task": Task, "task_version": TaskVersion, "episode": Episode}


def bulk_insert(s: Session, table: str, rows: Sequence[dict[str, Any]]) -> int:
    """Inserts plain-dict rows into ``task``, ``task_version`` or ``episode`` in one executemany; returns
    how many. Columns left out get the model's SQL defaults; ids may be given (imports keep theirs)."""
    model = _BULK_TABLES.get(table)
    if model is None:
        raise ValueError(f"bulk_insert: unsupported table {table!r} (supported: {', '.join(_BULK_TABLES)})")
    if not rows:
        return 0
    # The models' Python-side defaults (created_at, "[]" json columns...), evaluated once for the batch.
    fill = {
        name: f.get_default(call_default_factory=True)
        for name, f in model.model_fields.items()
        if not f.is_required() and name != "id"
    }
    s.execute(_sa_insert(model), [{**fill, **r} for r in rows])
    return len(rows)
