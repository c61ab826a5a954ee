"""Tag, clear, skip and undo; the tagging queue; a review accepted as a tag: what ``bandpass tag``,
``untag``, ``queue`` and ``review-accept``, the Tag queue, Replay and Search screens and the review panel
all do.

Why here: the CLI, three screens and the review panel each drove ``engine.review.tagging.Tagger`` and the
reviewer's ``accept_review`` themselves, and the panel kept its own rules for which review may be
accepted. They now go through this module: a screen keeps one :class:`Tagger` (the curator's session,
whose undo takes back what it did, a bulk tag of forty episodes as one step); a command makes one call
(:func:`tag`, :func:`clear`, :func:`accept_review`) and renders what comes back. What a tag may be (the
taxonomy), that author and time are recorded and what blocks an export stay the tagger's rules.
Refusals are ``BandpassError``: ``TagError``, ``TaxonomyError``, ``ReviewError``, ``NothingToRun``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..review.tag_choice import (
    Candidate,
    ClusterVerdict,
    TagEffect,
    TagPlan,
    cluster_verdict,
    plan,
)
from ..review.tagging import (
    QueueFilter,
    QueueItem,
    TagError,
    Tagger,
    load_candidates,
    load_queue,
    plan_for,
    similar,
)

if TYPE_CHECKING:
    from ...store.models import FailureTag
    from ..core.workspace import Workspace

__all__ = [
    "Accepted",
    "Candidate",
    "ClusterVerdict",
    "TagEffect",
    "TagPlan",
    "cluster_verdict",
    "load_candidates",
    "plan",
    "plan_for",
    "QueueFilter",
    "QueueItem",
    "TagError",
    "Tagged",
    "Tagger",
    "accept_latest_review",
    "accept_review",
    "clear",
    "load_queue",
    "similar",
    "tag",
]


@dataclass(frozen=True)
class Tagged:
    """Each episode's tag with the code (new or one it already carried) and how many are new (0: the
    episodes already carried the code and nothing changed)."""

    tags: list[FailureTag]
    added: int


def tag(
    ws: Workspace,
    episode_ids: int | Iterable[int],
    code: str,
    *,
    note: str = "",
    tagger: Tagger | None = None,
) -> Tagged:
    """Tags the episodes with ``class.subclass`` (one undoable step of ``tagger``, when given). Raises
    ``TagError`` (an unknown code, an episode that does not exist)."""
    tagger = tagger or Tagger(ws)
    tags = tagger.tag(episode_ids, code, note=note)
    return Tagged(tags, tagger.last_added)


def clear(ws: Workspace, tag_id: int, *, tagger: Tagger | None = None) -> FailureTag:
    """Clears a tag (kept as history; a cleared blocking tag readmits its task). Raises ``TagError``."""
    return (tagger or Tagger(ws)).clear(tag_id)


@dataclass(frozen=True)
class Accepted:
    """The tag a review was accepted as, and whether it is new (False: the review was accepted before,
    or the episode already carried its code)."""

    tag: FailureTag
    added: bool


def accept_review(ws: Workspace, review_id: int, *, note: str = "", tagger: Tagger | None = None) -> Accepted:
    """The review's code becomes the curator's tag (through ``tagger``, so its undo takes it back).
    Raises ``ReviewError`` for a review that does not exist or suggests no taxonomy code."""
    from ..review.reviewer import accept_review as accept  # loads the Claude client

    tagger = tagger or Tagger(ws)
    made = accept(ws, review_id, note=note, tagger=tagger)
    return Accepted(made, bool(tagger.last_added))


def accept_latest_review(ws: Workspace | None, episode_id: int | None, tagger: Tagger) -> Accepted:
    """What the review panel's accept key does: the episode's latest *valid* review becomes the curator's
    tag. Raises ``ReviewError`` with a one-line reason when there is nothing to accept (no episode, no
    valid review, one already accepted)."""
    from ..review.reviewer import ReviewError
    from . import review as reviewing

    if ws is None or episode_id is None:
        raise ReviewError("no episode here")
    latest = reviewing.latest_valid_review(ws, episode_id)
    if latest.review_id is None:
        raise ReviewError(f"episode {episode_id} has no valid review (bandpass review {episode_id})")
    if latest.accepted_tag is not None:
        raise ReviewError(f"review #{latest.review_id} is already accepted (tag #{latest.accepted_tag.id})")
    return accept_review(ws, latest.review_id, tagger=tagger)
