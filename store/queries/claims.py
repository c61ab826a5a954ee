"""Claiming a queued row with one atomic UPDATE: the one piece of SQL both work queues share.

A batch's episodes (batch_queue) and an audit run's jobs (audit_queue) are claimed the same way: the
next queued row is chosen by a subquery and flipped to ``running`` by an UPDATE guarded by
``status = 'queued'``, so two runners (threads or processes) can never take the same row. Kept in one
place so the guard that makes a claim atomic is written, and read, once.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, TypeVar

from sqlalchemy import ColumnElement
from sqlmodel import Session, col, select, update

from ..models import AuditJob, Episode

__all__ = ["claim_queued"]

#: The queued-row tables: each has an integer ``id`` and a ``status`` of queued / running / done.
Row = TypeVar("Row", Episode, AuditJob)


def claim_queued(
    s: Session,
    model: type[Row],
    *,
    where: Sequence[ColumnElement[bool] | bool],
    order_by: Sequence[Any],
    values: dict[str, Any],
) -> Row | None:
    """Flips the first queued row (``where``, in ``order_by`` order) to ``running`` with ``values`` set
    too, in one UPDATE, and returns it as the store now holds it (None: nothing queued)."""
    nxt = (
        select(model.id)
        .where(*where, model.status == "queued")
        .order_by(*order_by)
        .limit(1)
        .scalar_subquery()
    )
    stmt = (
        update(model)
        .where(col(model.id) == nxt, col(model.status) == "queued")
        .values(status="running", **values)
        .returning(col(model.id))
        .execution_options(synchronize_session=False)
    )
    claimed = s.execute(stmt).scalar_one_or_none()
    if claimed is None:
        return None
    s.flush()
    return s.get(model, claimed, populate_existing=True)
