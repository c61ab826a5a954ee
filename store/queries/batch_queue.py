"""The batch queue: claiming episodes for runners and handing them back.

A batch's episodes are queued rows claimed one at a time by runners. Claiming is a single UPDATE guarded
by ``status = 'queued'``, so two runners (threads or processes) can never take the same row, and a
crash leaves at worst rows marked ``running`` that ``requeue_stale`` hands back on resume. Separate so
the functions that must stay atomic are read together.
"""

from __future__ import annotations

import json
from collections.abc import Sequence

from sqlalchemy import update
from sqlmodel import Session, col, select

from ..models import (
    Batch,
    Episode,
    Step,
    utcnow,
)
from .batches import adaptive_open
from .claims import claim_queued


def claim_next_episode(s: Session, batch_id: str) -> Episode | None:
    """Atomically flips the batch's next queued episode to ``running`` and returns it (None: none left).

    Ordered by attempt first, so every task gets its first attempt before any gets its second: a batch
    stopped early still covers every task, and workers spread over task images instead of queueing on one.
    """
    return claim_queued(
        s,
        Episode,
        where=[Episode.batch_id == batch_id],
        order_by=[col(Episode.attempt), col(Episode.id)],
        values={"started_at": utcnow()},
    )


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
    """The newest batch that still has queued or running episodes, or is adaptive and its sampler has not
    stopped on its own (``adaptive_json`` without a ``stopped`` reason: more rounds may follow)."""
    unfinished = select(Episode.batch_id).where(col(Episode.status).in_(["queued", "running"])).distinct()
    open_adaptive = [b.id for b in s.exec(select(Batch).where(Batch.adaptive_json != "")) if adaptive_open(b)]
    b = s.exec(
        select(Batch)
        .where(col(Batch.id).in_(unfinished) | col(Batch.id).in_(open_adaptive))
        .order_by(col(Batch.created_at).desc(), col(Batch.id).desc())
    ).first()
    return b.id if b else None
