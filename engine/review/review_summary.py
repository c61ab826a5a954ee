"""An episode's latest Claude review as plain data, for ``bandpass show`` and any view listing an episode's
evidence.

Apart from :mod:`engine.review.reviewer` because that module loads the Anthropic client (over a second
at start-up), and showing a stored review needs none of it."""

from __future__ import annotations

import json
from typing import Any

from ...store.db import session
from ...store.queries import reviews as rq
from ..core.workspace import Workspace
from .review_validation import review_code


def latest_review_summary(ws: Workspace, episode_id: int) -> dict[str, Any] | None:
    """The episode's latest review as plain data, for ``bandpass show`` (text and ``--json``) and any
    other view that lists an episode's evidence; None when the episode was never reviewed."""
    with session(ws.engine) as s:
        r = rq.latest_review(s, episode_id)
        if r is None:
            return None
        tag = rq.accepted_tag(s, r)
        return {
            "review_id": r.id,
            "status": r.status,
            "model": r.model,
            "prompt_version": r.prompt_version,
            "verdict": r.verdict or None,
            "code": review_code(r) or None,
            "explanation": r.explanation,
            "citations": json.loads(r.citations_json or "[]"),
            "dropped": json.loads(r.dropped_json or "[]"),
            "error": r.error or None,
            "tokens_in": r.tokens_in,
            "tokens_out": r.tokens_out,
            "cost_usd": r.cost_usd,
            "latency_s": r.latency_s,
            "accepted_tag_id": tag.id if tag is not None else None,
        }
