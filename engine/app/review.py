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

from ...store import queries
from ...store.db import session
from ...store.models import pk
from ...store.queries import reviews as rq
from ..llm.templates import PromptError
from ..review.review_scope import ScopeError, cluster_summary, failure_clusters, select_episodes
from ..review.review_validation import review_code
from ..review.reviewer_prompts import DEFAULT_VERSION, available_versions, load_reviewer_prompt
from .errors import NothingToRun

if TYPE_CHECKING:
    from rich.console import Group

    from ...store.models import FailureTag, ReviewSuggestion
    from ..core.workspace import Workspace
    from ..review.review_report import ReviewReport
    from ..review.reviewer import ReviewError as ReviewError
    from ..review.reviewer import ReviewOutcome as ReviewOutcome
    from ..review.reviewer import ReviewRunResult as ReviewRunResult
    from ..review.reviewer import ReviewUnreachable as ReviewUnreachable

__all__ = [
    "DEFAULT_VERSION",
    "LatestReview",
    "PromptError",
    "ReviewError",
    "ReviewOutcome",
    "ReviewRequest",
    "ReviewRunResult",
    "ReviewSelection",
    "ReviewUnreachable",
    "ScopeError",
    "StoredReviews",
    "available_versions",
    "cluster_summary",
    "failure_clusters",
    "latest_valid_review",
    "load_reviewer_prompt",
    "price_known",
    "render_review_report",
    "review",
    "review_code",
    "review_report",
    "select",
    "stored_reviews",
]

#: The reviewer's own names, loaded on first use: the reviewer brings the Claude client (anthropic), which
#: ``bandpass reviews`` and the other commands that only read stored reviews never need.
_FROM_REVIEWER = ("ReviewError", "ReviewOutcome", "ReviewRunResult", "ReviewUnreachable")


def __getattr__(name: str) -> Any:
    if name in _FROM_REVIEWER:
        from ..review import reviewer

        return getattr(reviewer, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
        from ..review.signatures import cluster_id

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
    from ..review.reviewer import review_episodes  # the Claude client: only when a review runs

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


def review_report(ws: Workspace, *, model: str | None = None, independent: bool = False) -> ReviewReport:
    """How Claude's reviews and the deterministic diagnosis agree with curator tags (``bandpass report
    review``): class and subclass agreement, Cohen's kappa, per-class precision and recall, cost."""
    from ..review import review_report as agreement

    return agreement.review_report(ws, model=model, independent=independent)


def render_review_report(rep: ReviewReport) -> Group:
    """The report as Rich renderables for a console."""
    from ..review import review_report as agreement

    return agreement.render_review_report(rep)


def price_known(ws: Workspace, model: str | None = None) -> bool:
    """Whether the reviewer model (None: bandpass.toml's generator model) has a price, so a spend can be
    said in dollars (an unpriced model's cost is "unknown", never "$0")."""
    from . import prices

    return prices.price_known(ws, model or ws.config.generator.model)
