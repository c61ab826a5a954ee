"""The shapes listing queries share: rows whose columns equal the filters given, and "latest" subqueries."""

from __future__ import annotations

from typing import Any

from sqlmodel import SQLModel, col, func, select

from ..models import Audit, TaskVersion


def where_equal(q: Any, table: type[SQLModel], /, **filters: Any) -> Any:
    """``q`` narrowed to rows whose column ``name`` equals ``value`` for each filter; a None filter is
    "any" (the callers' keyword defaults), never ``IS NULL``."""
    for name, value in filters.items():
        if value is not None:
            q = q.where(col(getattr(table, name)) == value)
    return q


def latest_version_ids() -> Any:
    """The id of each task's latest version, as a subquery for ``col(TaskVersion.id).in_(...)``: every
    listing shows a task by its latest version."""
    return select(func.max(TaskVersion.id)).group_by(col(TaskVersion.task_id)).scalar_subquery()


def latest_audit_ids() -> Any:
    """The id of each version's latest audit, as a subquery: a version's verdict is its latest audit's."""
    return select(func.max(Audit.id)).group_by(col(Audit.task_version_id)).scalar_subquery()
