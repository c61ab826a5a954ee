"""Failure tags and the tagging queue: reads and writes for engine/review/tagging.py (the tagging queue,
bulk tags, undo) and the Replay screen.

Separate because tags are the curator's judgement, kept (cleared, not deleted) as a record; the
taxonomy's rules live in engine/core, the store only records the decisions.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from ..models import (
    Episode,
    FailureTag,
    ReviewState,
    Task,
    TaskVersion,
    utcnow,
)


def add_tag(
    s: Session,
    episode_id: int,
    tag_class: str,
    subclass: str,
    *,
    blocking: bool,
    note: str = "",
    author: str = "",
) -> FailureTag:
    """Stores a tag. ``blocking`` is the taxonomy's rule for the class (``Taxonomy.is_blocking`` in
    engine/review): the store records the decision and never keeps a second copy of the rule."""
    tag = FailureTag(
        episode_id=episode_id,
        tag_class=tag_class,
        subclass=subclass,
        note=note,
        author=author,
        blocking=blocking,
    )
    s.add(tag)
    s.flush()
    return tag


def tags_for_episode(s: Session, episode_id: int, *, include_cleared: bool = False) -> list[FailureTag]:
    q = select(FailureTag).where(FailureTag.episode_id == episode_id)
    if not include_cleared:
        q = q.where(col(FailureTag.cleared).is_(False))
    return list(s.exec(q.order_by(col(FailureTag.id))).all())


def active_tag_count(s: Session) -> int:
    """How many tags are in force (not cleared)."""
    return s.exec(
        select(func.count()).select_from(FailureTag).where(col(FailureTag.cleared).is_(False))
    ).one()


def get_tag(s: Session, tag_id: int) -> FailureTag | None:
    return s.get(FailureTag, tag_id)


def clear_tag(s: Session, tag_id: int, *, cleared: bool = True) -> FailureTag | None:
    """Clears (or, with ``cleared=False``, restores) a tag. Cleared tags are kept, not deleted: they are
    the record that a curator once thought so, and clearing a blocking tag is what readmits a task."""
    tag = s.get(FailureTag, tag_id)
    if tag is not None:
        tag.cleared = cleared
        s.add(tag)
        s.flush()
    return tag


def delete_tag(s: Session, tag_id: int) -> bool:
    """Removes a tag outright: only for undoing a tag just made by mistake."""
    tag = s.get(FailureTag, tag_id)
    if tag is None:
        return False
    s.delete(tag)
    s.flush()
    return True


@dataclass
class TagRow:
    """One line of ``bandpass tags``: a tag with the episode and task it belongs to."""

    tag: FailureTag
    task: str
    outcome: str

    def as_dict(self) -> dict[str, Any]:
        t = self.tag
        return {
            "id": t.id,
            "episode_id": t.episode_id,
            "task": self.task,
            "outcome": self.outcome,
            "tag": f"{t.tag_class}.{t.subclass}",
            "note": t.note,
            "author": t.author,
            "blocking": t.blocking,
            "cleared": t.cleared,
            "created_at": t.created_at.isoformat() if t.created_at else None,
        }


def tag_rows(s: Session, *, include_cleared: bool = False) -> list[TagRow]:
    q = (
        select(FailureTag, Episode.outcome, Task.name)
        .join(Episode, col(Episode.id) == col(FailureTag.episode_id))
        .join(TaskVersion, col(TaskVersion.id) == col(Episode.task_version_id))
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
    )
    if not include_cleared:
        q = q.where(col(FailureTag.cleared).is_(False))
    return [TagRow(t, name, outcome) for t, outcome, name in s.exec(q.order_by(col(FailureTag.id))).all()]


@dataclass
class ReviewRow:
    """One episode in the tagging queue. ``state``: pending | tagged | skipped."""

    episode: Episode
    task: str
    version_hash: str
    tags: list[FailureTag]
    state: str


def review_rows(s: Session) -> list[ReviewRow]:
    """Finished episodes a curator should look at: every one that did not pass, plus passed ones that
    carry a tag (a suspicious pass someone flagged), grouped by task so bulk tagging finds neighbours."""
    eps = s.exec(
        select(Episode, Task.name, TaskVersion.hash)
        .join(TaskVersion, col(TaskVersion.id) == col(Episode.task_version_id))
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(Episode.status == "done")
        .order_by(col(Task.name), col(Episode.id))
    ).all()
    tags: dict[int, list[FailureTag]] = {}
    for t in s.exec(
        select(FailureTag).where(col(FailureTag.cleared).is_(False)).order_by(col(FailureTag.id))
    ).all():
        tags.setdefault(t.episode_id, []).append(t)
    skipped = {r.episode_id for r in s.exec(select(ReviewState).where(ReviewState.state == "skipped")).all()}
    rows = []
    for ep, name, vhash in eps:
        ep_tags = tags.get(ep.id, [])  # type: ignore[arg-type]
        if ep.outcome == "passed" and not ep_tags:
            continue
        state = "tagged" if ep_tags else "skipped" if ep.id in skipped else "pending"
        rows.append(ReviewRow(ep, name, vhash, ep_tags, state))
    return rows


def review_state(s: Session, episode_id: int) -> str | None:
    r = s.get(ReviewState, episode_id)
    return r.state if r is not None else None


def set_review_state(s: Session, episode_id: int, state: str | None, *, author: str = "") -> None:
    """Sets (``"skipped"``) or removes (None) an episode's stored queue state."""
    r = s.get(ReviewState, episode_id)
    if state is None:
        if r is not None:
            s.delete(r)
    elif r is None:
        s.add(ReviewState(episode_id=episode_id, state=state, author=author))
    else:
        r.state, r.author, r.updated_at = state, author, utcnow()
        s.add(r)
    s.flush()
