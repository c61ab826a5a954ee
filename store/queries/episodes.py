"""Episodes and their steps: one policy's attempt at one task version, written as it runs.

Separate because the rollout worker writes here per episode (commit per episode, so a crash loses at most
the one in flight) while front ends read titles and new steps from it (``task_names_for_episodes``,
``steps_after``); the queue that hands episodes to runners is store/queries/batch_queue.py.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from sqlalchemy import or_
from sqlmodel import Session, col, select

from ..models import (
    Episode,
    Step,
    Task,
    TaskVersion,
    utcnow,
)
from .filters import where_equal


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


def set_episode_rewards(
    s: Session, episode_id: int, rewards: dict[str, float] | None, verifier: dict[str, Any] | None
) -> None:
    """Stores the reward's components (every key of reward.json) and the verifier's evidence."""
    ep = s.get(Episode, episode_id)
    if ep is None:
        raise KeyError(f"episode {episode_id} does not exist")
    ep.rewards_json = json.dumps(rewards) if rewards else ""  # in the order the verifier wrote them
    ep.verifier_json = json.dumps(verifier, sort_keys=True) if verifier else ""
    s.add(ep)
    s.flush()


def episode_rewards(ep: Episode) -> dict[str, float]:
    """The episode's reward components ({} when none were stored)."""
    try:
        data = json.loads(ep.rewards_json or "{}")
    except ValueError:
        return {}
    return {str(k): float(v) for k, v in data.items()} if isinstance(data, dict) else {}


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
    q = where_equal(
        select(Episode), Episode, task_version_id=version_id, agent=agent, batch_id=batch_id, status=status
    )
    return list(s.exec(q.order_by(col(Episode.id))).all())


def episode_created_at(s: Session, batch_id: str, created_at: datetime | None) -> int | None:
    """The id of the batch's episode created at exactly that time (a loaded sample is found this way)."""
    return s.exec(
        select(Episode.id).where(Episode.batch_id == batch_id, Episode.created_at == created_at)
    ).first()


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


def delete_steps(s: Session, episode_id: int) -> None:
    """Drops the steps of an abandoned try so a retried episode keeps only its final try's steps."""
    for step in s.exec(select(Step).where(Step.episode_id == episode_id)).all():
        s.delete(step)


def steps_after(s: Session, after: dict[int, int]) -> list[tuple[int, int, int, dict[str, Any]]]:
    """``(episode_id, step id, index, action)`` of the steps with an id above ``after[episode_id]``, in id
    order: what a follower of running episodes has not seen yet."""
    if not after:
        return []
    cond = or_(*((col(Step.episode_id) == eid) & (col(Step.id) > last) for eid, last in after.items()))
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


def episode_by_source(s: Session, source: str) -> Episode | None:
    """The episode imported from ``source`` (e.g. ``harbor:<job id>/<trial>``), if any."""
    return s.exec(select(Episode).where(Episode.source == source)).first()


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
    return {int(eid): name for eid, name in rows if eid is not None}


def episode_task_name(s: Session, episode_id: int) -> str:
    """The task an episode ran, for titles; "" when the episode does not exist."""
    name = s.exec(
        select(Task.name)
        .join(TaskVersion, col(TaskVersion.task_id) == col(Task.id))
        .join(Episode, col(Episode.task_version_id) == col(TaskVersion.id))
        .where(Episode.id == episode_id)
    ).first()
    return name or ""
