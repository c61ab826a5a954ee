"""Queries for end-state evidence, phase timings and regrade links (a module of its own so the
reward-integrity record reads in one place; used as a module, not re-exported by the package)."""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import Session, col, select

from ..models import Episode, EpisodeEndState, TaskVersion, utcnow


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
    carry: dict[str, Any] | None = None,
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
    row.carry_json = json.dumps(carry or {}, sort_keys=True)
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


def set_verify_mode(s: Session, episode_id: int, mode: str) -> None:
    ep = s.get(Episode, episode_id)
    if ep is not None:
        ep.verify_mode = mode
        s.add(ep)


def oracle_verify_seconds(s: Session, version_id: int, mode: str) -> list[float]:
    """How long the verify phase took for this version's passing oracle episodes verified the same way:
    the yardstick a verifier timeout on a policy's artifacts is measured against."""
    rows = s.exec(
        select(Episode.phases_json).where(
            Episode.task_version_id == version_id,
            Episode.agent == "oracle",
            Episode.outcome == "passed",
            Episode.verify_mode == mode,
        )
    )
    out: list[float] = []
    for phases_json in rows:
        for p in json.loads(phases_json or "[]"):
            if p.get("name") == "verify" and not p.get("error"):
                out.append(float(p.get("duration_s") or 0.0))
    return out


def set_version_verify_mode(s: Session, version_id: int, mode: str) -> None:
    """Records where a task version's verifier runs (the audit's footprint check settles it)."""
    tv = s.get(TaskVersion, version_id)
    if tv is None:
        raise KeyError(f"task version {version_id} does not exist")
    tv.verify_mode = mode
    s.add(tv)
    s.flush()


def set_version_footprint(s: Session, version_id: int, footprint: dict[str, Any], adopted: list[str]) -> None:
    """Records the footprint that settled how a version is verified and the artifacts it adopted from it
    (``footprint`` {} means "not learnt": the next rollout learns it again)."""
    tv = s.get(TaskVersion, version_id)
    if tv is None:
        raise KeyError(f"task version {version_id} does not exist")
    tv.footprint_json = json.dumps(footprint, sort_keys=True) if footprint else ""
    tv.adopted_artifacts_json = json.dumps(adopted)
    s.add(tv)
    s.flush()


def adopted_artifacts(version: TaskVersion) -> list[str]:
    """The paths a version adopted from its oracle's footprint (none for a row from before schema 18)."""
    return list(json.loads(getattr(version, "adopted_artifacts_json", "") or "[]"))


def version_footprint(version: TaskVersion) -> dict[str, Any]:
    """The footprint learnt for a version, {} when none was."""
    return dict(json.loads(getattr(version, "footprint_json", "") or "{}"))


def verified_how(s: Session, version_ids: list[int]) -> dict[int, str]:
    """How each version's finished episodes were verified: ``clean_room``, ``service``, ``in_place`` or
    ``mixed`` (reports and the export manifest say so; an episode from before the clean room counts as in
    place)."""
    if not version_ids:
        return {}
    rows = s.exec(
        select(Episode.task_version_id, Episode.verify_mode).where(
            col(Episode.task_version_id).in_(version_ids), Episode.status == "done"
        )
    )
    modes: dict[int, set[str]] = {}
    for vid, mode in rows:
        modes.setdefault(vid, set()).add(mode or "in_place")
    return {vid: next(iter(m)) if len(m) == 1 else "mixed" for vid, m in modes.items()}
