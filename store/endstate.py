"""Queries for end-state evidence, phase timings and regrade links (kept apart from ``queries`` so the
reward-integrity record reads in one place)."""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import Session, col, select

from store.models import Episode, EpisodeEndState, utcnow


def record_endstate(
    s: Session,
    episode_id: int,
    *,
    archive: str,
    image: str,
    changes: list[dict[str, Any]],
    findings: list[dict[str, Any]],
    archived_bytes: int,
    cap_bytes: int,
    over_cap: int,
    capture_s: float,
) -> EpisodeEndState:
    """Replaces the episode's end state (a retried try captures again; the last try is the record)."""
    row = s.get(EpisodeEndState, episode_id) or EpisodeEndState(episode_id=episode_id)
    row.archive = archive
    row.image = image
    row.changes_json = json.dumps(changes, sort_keys=True)
    row.findings_json = json.dumps(findings, sort_keys=True)
    row.archived_bytes = archived_bytes
    row.cap_bytes = cap_bytes
    row.over_cap = over_cap
    row.capture_s = capture_s
    row.created_at = utcnow()
    s.add(row)
    s.flush()
    return row


def get_endstate(s: Session, episode_id: int) -> EpisodeEndState | None:
    return s.get(EpisodeEndState, episode_id)


def set_phases(s: Session, episode_id: int, phases: list[dict[str, Any]]) -> None:
    ep = s.get(Episode, episode_id)
    if ep is None:
        raise KeyError(f"episode {episode_id} does not exist")
    ep.phases_json = json.dumps(phases)
    s.add(ep)
    s.flush()


def mark_regrade(s: Session, episode_id: int, source_episode_id: int) -> None:
    ep = s.get(Episode, episode_id)
    if ep is None:
        raise KeyError(f"episode {episode_id} does not exist")
    ep.origin = "regrade"
    ep.source_episode_id = source_episode_id
    s.add(ep)
    s.flush()


def regraded_sources(s: Session, version_id: int) -> dict[int, Episode]:
    """Source episode id -> the finished regrade episode of ``version_id`` made from it."""
    rows = s.exec(
        select(Episode).where(
            Episode.task_version_id == version_id,
            Episode.origin == "regrade",
            col(Episode.source_episode_id).is_not(None),
            Episode.status == "done",
        )
    ).all()
    # an infra error gave no valid result: the next regrade tries that source again
    return {
        int(r.source_episode_id): r
        for r in rows
        if r.source_episode_id is not None and not r.outcome.startswith("infra_error:")
    }


def finished_episodes(s: Session, version_id: int) -> list[Episode]:
    """The version's finished episodes in id order (what regrade re-verifies)."""
    return list(
        s.exec(
            select(Episode)
            .where(Episode.task_version_id == version_id, Episode.status == "done")
            .order_by(col(Episode.id))
        ).all()
    )
