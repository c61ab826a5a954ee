"""Queries for the task steps of multi-step episodes (``episode_task_step``: Harbor's ``[[steps]]``)."""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import Session, col, select

from ..models import EpisodeTaskStep

__all__ = ["record_task_steps", "task_steps"]


def record_task_steps(s: Session, episode_id: int, steps: list[dict[str, Any]]) -> None:
    """Replaces the episode's task steps (a retried try ran them again: the last try is the record)."""
    for old in s.exec(select(EpisodeTaskStep).where(col(EpisodeTaskStep.episode_id) == episode_id)).all():
        s.delete(old)
    for pos, step in enumerate(steps):
        s.add(
            EpisodeTaskStep(
                episode_id=episode_id,
                position=int(step.get("position", pos)),
                name=str(step.get("name", "")),
                outcome=str(step.get("outcome", "")),
                reward=step.get("reward"),
                rewards_json=json.dumps(step.get("rewards") or {}, sort_keys=True),
                detail=str(step.get("detail", ""))[:4000],
                marker_time=float(step.get("marker_time", 0.0)),
                verifier_cast=str(step.get("verifier_cast", "")),
                verifier_output=str(step.get("verifier_output", ""))[-64 * 1024 :],
                verify_mode=str(step.get("verify_mode", "")),
                counted=bool(step.get("counted", False)),
                duration_s=float(step.get("duration_s", 0.0)),
                carry_json=json.dumps(step.get("carry") or {}, sort_keys=True),
                verifier_evidence_json=json.dumps(step.get("verifier_evidence") or {}, sort_keys=True),
            )
        )
    s.flush()


def task_steps(s: Session, episode_id: int) -> list[EpisodeTaskStep]:
    """The episode's task steps in order ([] for a single-step task)."""
    return list(
        s.exec(
            select(EpisodeTaskStep)
            .where(col(EpisodeTaskStep.episode_id) == episode_id)
            .order_by(col(EpisodeTaskStep.position))
        )
    )
