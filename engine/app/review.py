"""Review episodes with Claude, accept a review as a tag, list stored reviews: what ``bandpass review``,
``bandpass reviews``, ``bandpass review-accept`` and the review panel of the Replay and Tag-queue screens
do.

Why here: choosing the episodes (ids, a task, the pending queue, a cluster's sample), finding an episode's
latest valid review and reading the stored reviews were written in the CLI and again in the panel. The
front ends keep their wording and rendering; what is reviewed, and which review is "the latest valid one",
is decided here. Refusals are ``BandpassError`` (``ScopeError``, ``ReviewError``, ``NothingToRun``).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from bandpass.engine.app.errors import NothingToRun
from bandpass.engine.review.review_scope import select_episodes
from bandpass.engine.review.reviewer_prompts import DEFAULT_VERSION
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import pk
from bandpass.store.queries import reviews as rq

if TYPE_CHECKING:
    from bandpass.engine.core.workspace import Workspace
    from bandpass.engine.review.reviewer import ReviewOutcome, ReviewRunResult
    from bandpass.store.models import FailureTag, ReviewSuggestion


@dataclass(frozen=True)
class ReviewRequest:
    """Which episodes to review (unioned: ids, every finished episode of ``task``, the tag queue's pending
    ones, ``sample`` members of ``cluster``) and how (model: None is bandpass.toml's generator model)."""

    episodes: Sequence[int] = ()
    task: str | None = None
    pending: bool = False
    cluster: str | None = None
    sample: int = 5
    model: str | None = None
    prompt_version: str = DEFAULT_VERSION
    budget_usd: float | None = None
    concurrency: int = 2
    #: Review again episodes this model and prompt already reviewed.
    again: bool = False


@dataclass(frozen=True)
class ReviewSelection:
    episode_ids: list[int]
    #: The cluster's id (a full signature given is kept by its id), "" when no cluster was named.
    cluster_id: str


def select(ws: Workspace, req: ReviewRequest) -> ReviewSelection:
    """The episodes a request names; raises ``ScopeError`` for one that does not exist or is unfinished,
    ``NothingToRun`` when the request names none."""
    ids = select_episodes(
        ws, list(req.episodes), task=req.task, pending=req.pending, cluster=req.cluster, sample=req.sample
    )
    if not ids:
        raise NothingToRun("no episodes selected: name episode ids, --task, --pending or --cluster")
    cluster = req.cluster or ""
    if cluster and not re.fullmatch(r"[0-9a-f]{10}", cluster):  # a full signature: kept by its id
        from bandpass.engine.review.signatures import cluster_id

        cluster = cluster_id(cluster)
    return ReviewSelection(ids, cluster)


def review(
    ws: Workspace,
    req: ReviewRequest,
    episode_ids: Sequence[int],
    *,
    cluster_id: str = "",
    on_progress: Callable[[ReviewOutcome | None, int], None] | None = None,
    stop: threading.Event | None = None,
) -> ReviewRunResult:
    """Reviews the episodes (blocking; a front end runs it off its UI thread) and stores every review.
    Raises ``ReviewUnreachable`` (nothing listening: nothing started), ``ReviewError``/``PromptError``."""
    from bandpass.engine.review.reviewer import review_episodes  # the Claude client: only when a review runs

    return review_episodes(
        ws,
        list(episode_ids),
        model=req.model,
        prompt_version=req.prompt_version,
        budget_usd=req.budget_usd,
        concurrency=req.concurrency,
        again=req.again,
        cluster=cluster_id,
        on_progress=on_progress,
        stop=stop,
    )


@dataclass(frozen=True)
class LatestReview:
    """An episode's latest valid (status ok) review, if any, and the tag it was already accepted as."""

    review_id: int | None
    accepted_tag: FailureTag | None


def latest_valid_review(ws: Workspace, episode_id: int) -> LatestReview:
    """What accepting an episode's review accepts. Raises ``NothingToRun`` for an episode that does not
    exist."""
    with session(ws.engine) as s:
        if queries.get_episode(s, episode_id) is None:
            raise NothingToRun(f"episode {episode_id} does not exist (see bandpass episodes)")
        ok = [r for r in rq.reviews_for_episode(s, episode_id) if r.status == "ok"]
        live = rq.accepted_tag(s, ok[0]) if ok else None
        s.expunge_all()
    return LatestReview(pk(ok[0]) if ok else None, live)


@dataclass(frozen=True)
class StoredReviews:
    rows: list[ReviewSuggestion]
    #: review id -> the id of the tag it was accepted as.
    accepted: dict[int, int]


def stored_reviews(ws: Workspace, episodes: Sequence[int] = ()) -> StoredReviews:
    """Every review of the episodes named, or the latest review of each reviewed episode. Raises
    ``NothingToRun`` naming the episodes that do not exist."""
    with session(ws.engine) as s:
        missing = [e for e in episodes if queries.get_episode(s, e) is None]
        if missing:
            raise NothingToRun(f"no such episode: {', '.join(map(str, missing))} (see bandpass episodes)")
        if episodes:
            rows = [r for e in episodes for r in rq.reviews_for_episode(s, e)]
        else:
            latest: dict[int, Any] = {}
            for r in rq.all_reviews(s):
                latest[r.episode_id] = r
            rows = list(latest.values())
        accepted = {pk(r): pk(t) for r in rows if (t := rq.accepted_tag(s, r)) is not None}
        s.expunge_all()
    return StoredReviews(rows, accepted)
