"""Reads and writes of Claude's review suggestions (issue #16), and the read of a stored deterministic
diagnosis for the agreement report.

Used as a module (``from bandpass.store.queries import reviews as rq``), not re-exported by the package:
its names (``finished_episodes``...) are its own.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from sqlalchemy import func, text
from sqlmodel import Session, col, select

from ..models import Episode, FailureTag, ReviewSuggestion, Task, TaskVersion, pk


def add_review(s: Session, **fields: Any) -> ReviewSuggestion:
    row = ReviewSuggestion(**fields)
    s.add(row)
    s.flush()
    return row


def get_review(s: Session, review_id: int) -> ReviewSuggestion | None:
    return s.get(ReviewSuggestion, review_id)


def reviews_for_episode(s: Session, episode_id: int) -> list[ReviewSuggestion]:
    """Every review of the episode, newest first."""
    return list(
        s.exec(
            select(ReviewSuggestion)
            .where(ReviewSuggestion.episode_id == episode_id)
            .order_by(col(ReviewSuggestion.id).desc())
        )
    )


def review_count(s: Session) -> int:
    """How many reviews Claude wrote, over every episode."""
    return s.exec(select(func.count()).select_from(ReviewSuggestion)).one()


def latest_review(s: Session, episode_id: int) -> ReviewSuggestion | None:
    rows = reviews_for_episode(s, episode_id)
    return rows[0] if rows else None


def all_reviews(s: Session, *, model: str | None = None) -> list[ReviewSuggestion]:
    stmt = select(ReviewSuggestion).order_by(col(ReviewSuggestion.id))
    if model is not None:
        stmt = stmt.where(ReviewSuggestion.model == model)
    return list(s.exec(stmt))


def set_review_accepted(s: Session, review_id: int, tag_id: int | None) -> None:
    row = s.get(ReviewSuggestion, review_id)
    if row is not None:
        row.accepted_tag_id = tag_id
        s.add(row)
        s.flush()


def curator_labels(s: Session) -> dict[int, tuple[str, int]]:
    """episode id -> (``class.subclass``, tag id) of its latest active (uncleared) tag: the curator's
    label the agreement report compares suggestions with."""
    out: dict[int, tuple[str, int]] = {}
    rows = s.exec(
        select(FailureTag).where(FailureTag.cleared == False).order_by(col(FailureTag.id))  # noqa: E712 - a SQL expression, not a Python comparison
    )
    for t in rows:
        out[t.episode_id] = (f"{t.tag_class}.{t.subclass}", pk(t))
    return out


@dataclass
class EpisodeRef:
    episode: Episode
    task: str
    version_hash: str


def finished_episodes(s: Session, *, task: str | None = None) -> list[EpisodeRef]:
    """Finished episodes with their task name and version hash, oldest first."""
    stmt = (
        select(Episode, Task.name, TaskVersion.hash)
        .join(TaskVersion, col(TaskVersion.id) == col(Episode.task_version_id))
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
        .where(Episode.status == "done")
        .order_by(col(Episode.id))
    )
    if task is not None:
        stmt = stmt.where(Task.name == task)
    return [EpisodeRef(ep, name, h) for ep, name, h in s.exec(stmt)]


# --- a stored deterministic diagnosis (issue #15's table, when present) ------------------------------------

_CODE_COLUMNS = ("tag", "suggested_tag", "suggestion", "suggested", "code")  # the suggested tag first


def diagnosis_table(s: Session) -> tuple[str, str | tuple[str, str]] | None:
    """(table, code column — or (class column, subclass column)) of a stored per-episode diagnosis, found
    by shape rather than by name so the report works with whatever the diagnosis feature stores; None
    when the workspace has no such table."""
    names = [
        r[0]
        for r in s.connection().execute(
            text("SELECT name FROM sqlite_master WHERE type='table' AND name LIKE '%diagnos%' ORDER BY name")
        )
    ]
    for name in names:
        cols = {r[1] for r in s.connection().execute(text(f'PRAGMA table_info("{name}")'))}
        if "episode_id" not in cols:
            continue
        for c in _CODE_COLUMNS:
            if c in cols:
                return name, c
        if {"tag_class", "subclass"} <= cols:
            return name, ("tag_class", "subclass")
    return None


def stored_diagnoses(s: Session) -> dict[int, tuple[str, str]] | None:
    """episode id -> (suggested ``class.subclass``, diagnosis code) of the latest stored diagnosis; the
    suggestion is ``""`` when the diagnosis suggests no tag (``unknown.no_evidence``, a probe...):
    such an episode *was* diagnosed and must count, never vanish from the figures. None when no
    diagnosis table exists."""
    found = diagnosis_table(s)
    if found is None:
        return None
    table, code = found
    expr = f'"{code[0]}" || \'.\' || "{code[1]}"' if isinstance(code, tuple) else f'"{code}"'
    cols = {r[1] for r in s.connection().execute(text(f'PRAGMA table_info("{table}")'))}
    # the diagnosis's own code beside its suggested tag, when the table keeps both
    code_expr = '"code"' if "code" in cols and code != "code" else expr
    out: dict[int, tuple[str, str]] = {}
    for eid, value, dcode in s.connection().execute(
        text(f'SELECT episode_id, {expr}, {code_expr} FROM "{table}" ORDER BY rowid')
    ):
        if eid is None:
            continue
        label = str(value or "")
        out[int(eid)] = ("" if label in ("none", ".") else label, str(dcode or ""))
    return out


def stored_diagnosis(s: Session, episode_id: int) -> dict[str, Any] | None:
    """The latest stored diagnosis row of one episode as a dict (every column), or None."""
    found = diagnosis_table(s)
    if found is None:
        return None
    table = found[0]
    res = s.connection().execute(
        text(f'SELECT * FROM "{table}" WHERE episode_id = :e ORDER BY rowid DESC LIMIT 1'), {"e": episode_id}
    )
    row = res.mappings().first()
    return dict(row) if row is not None else None


def diagnosis_table_code(row: dict[str, Any]) -> str:
    """The ``class.subclass`` (plus confidence when stored) of a row :func:`stored_diagnosis` returned."""
    code = next((str(row[c]) for c in _CODE_COLUMNS if row.get(c)), "")
    if not code and row.get("tag_class"):
        code = f"{row['tag_class']}.{row.get('subclass', '')}"
    conf = row.get("confidence")
    return f"{code} (confidence {conf})" if code and conf is not None else code


def accepted_tag(s: Session, review: ReviewSuggestion) -> FailureTag | None:
    """The live tag a curator wrote by accepting ``review``: it must still exist, be uncleared and carry
    the review's episode and code. An undone tag is deleted and SQLite may reuse its id, so the id
    alone proves nothing."""
    if review.accepted_tag_id is None:
        return None
    tag = s.get(FailureTag, review.accepted_tag_id)
    if (
        tag is None
        or tag.cleared
        or tag.episode_id != review.episode_id
        # a review stored with no code (a true_fail before the valid-failure class) maps to one on accept
        or (review.tag_class and (tag.tag_class, tag.subclass) != (review.tag_class, review.subclass))
    ):
        return None
    return tag
