"""Generations: the generator's attempts at a new task, with their outcome, cost and prompt version.

Separate because only engine/generator writes these rows; the Generate screen reads the history, the
next attempt reads the last failure, and ``generation_yield`` is the per-prompt-version report.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import Integer, func
from sqlmodel import Session, col, select

from ..models import (
    Generation,
)
from .filters import where_equal


def generation_yield(s: Session) -> list[tuple[str, int, int]]:
    """(prompt_version, finished attempts, accepted) per generator prompt version, sorted by version.

    Generations still ``running`` are not attempts yet, and ``error``/``cancelled`` ones (API outages, a
    curator's stop) say nothing about the prompt: counting them would understate its yield. The same rule
    as ``bandpass report generation``.
    """
    rows = s.exec(
        select(
            Generation.prompt_version,
            func.count(),
            # type_=Integer: a SUM over a comparison otherwise inherits Boolean and 2 reads back as True
            func.sum(col(Generation.outcome) == "accepted", type_=Integer),
        )
        .where(col(Generation.outcome).not_in(("running", "error", "cancelled")))
        .group_by(Generation.prompt_version)
        .order_by(Generation.prompt_version)
    ).all()
    return [(pv, int(n), int(acc or 0)) for pv, n, acc in rows]


def recent_generations(s: Session, limit: int = 200) -> list[Generation]:
    """The newest generation attempts first (the Generate screen's history)."""
    return list(s.exec(select(Generation).order_by(col(Generation.id).desc()).limit(limit)).all())


def create_generation(s: Session, **fields: Any) -> Generation:
    g = Generation(**fields)
    s.add(g)
    s.flush()
    return g


def update_generation(s: Session, generation_id: int, **fields: Any) -> Generation:
    g = s.get(Generation, generation_id)
    if g is None:
        raise KeyError(f"generation {generation_id} does not exist")
    for key, value in fields.items():
        setattr(g, key, value)
    s.add(g)
    return g


def generation_created_at(s: Session, model: str, created_at: object) -> int | None:
    """The id of the model's generation created at exactly that time (a loaded sample is found this way)."""
    return s.exec(
        select(Generation.id).where(Generation.model == model, Generation.created_at == created_at)
    ).first()


def get_generation(s: Session, generation_id: int) -> Generation | None:
    return s.get(Generation, generation_id)


def list_generations(
    s: Session,
    *,
    prompt_version: str | None = None,
    model: str | None = None,
    outcome: str | None = None,
) -> list[Generation]:
    q = where_equal(
        select(Generation), Generation, prompt_version=prompt_version, model=model, outcome=outcome
    )
    return list(s.exec(q.order_by(col(Generation.id))).all())


def last_failed_generation(s: Session) -> Generation | None:
    """The most recent finished generation the meta-agent itself failed (rejected or out of budget).
    Infra errors are not the model's mistake and teach the next attempt nothing."""
    return s.exec(
        select(Generation)
        .where(col(Generation.outcome).in_(["rejected", "budget_exhausted"]))
        .order_by(col(Generation.id).desc())
    ).first()
