"""One episode's evidence, as the front ends read it: why it ended, what its policy changed, who ended its
sandbox, what Claude's review said.

Why here: ``bandpass show``, ``bandpass changes``, the Replay header, the Episodes screen, the Tag queue's
detail and the Changes screen each read that evidence from the stages (``review.evidence``,
``run.endstate``, ``review.review_summary``) and ``reads.episode_evidence``; what ``show`` composes is now
:func:`full_record`, and each part is read here (the end state in :mod:`engine.app.changes`). What only
some reads need is imported when read (``bandpass diagnose --json`` needs no review summary).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ..review.evidence import EpisodeNotFound, episode_record, verifier_line, why_lines
from ..review.text import strip_controls

if TYPE_CHECKING:
    from ..core.workspace import Workspace

__all__ = [
    "EpisodeNotFound",
    "attribution",
    "episode_record",
    "full_record",
    "latest_review",
    "strip_controls",
    "verifier_line",
    "why_lines",
]


def attribution(ws: Workspace, episode_id: int) -> dict[str, Any]:
    """Who ended the sandbox: ``{"outcome", "summary", "facts", "evidence"}`` (``evidence`` {} when
    nothing did). Raises ``KeyError`` for an episode that does not exist."""
    from .reads import episode_evidence

    return episode_evidence(ws, episode_id)


def latest_review(ws: Workspace, episode_id: int) -> dict[str, Any] | None:
    """The episode's latest Claude review as plain data; None when it was never reviewed."""
    from ..review.review_summary import latest_review_summary

    return latest_review_summary(ws, episode_id)


def full_record(ws: Workspace, episode_id: int) -> dict[str, Any]:
    """Everything ``bandpass show`` prints: :func:`episode_record` (version, agent, outcome, tries,
    timings, steps, failing checks, diagnosis, tags, casts) with the evidence other stages keep — the end
    state and tamper guard (``end_state``), who ended the sandbox (``attribution``) and Claude's latest
    review (``review``). Raises ``EpisodeNotFound``."""
    from .changes import episode_changes

    rec = episode_record(ws, episode_id)
    rec["end_state"] = episode_changes(ws, episode_id)
    rec["attribution"] = attribution(ws, episode_id)
    rec["review"] = latest_review(ws, episode_id)
    return rec
