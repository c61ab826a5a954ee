"""The one shape every listing query shares: keep the rows whose columns equal the filters given."""

from __future__ import annotations

from typing import Any

from sqlmodel import SQLModel, col


def where_equal(q: Any, table: type[SQLModel], /, **filters: Any) -> Any:
    """``q`` narrowed to rows whose column ``name`` equals ``value`` for each filter; a None filter is
    "any" (the callers' keyword defaults), never ``IS NULL``."""
    for name, value in filters.items():
        if value is not None:
            q = q.where(col(getattr(table, name)) == value)
    return q
