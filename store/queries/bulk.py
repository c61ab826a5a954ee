"""Bulk inserts (bench, import).

One executemany per table for large synthetic or imported data sets (bench/bench_scale.py writes
10,000 tasks and 100,000 episodes): row-by-row ORM adds cost ~50x the insert itself. Separate because it
bypasses the ORM on purpose and is used by the bench and imports, never by a stage's ordinary path.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from sqlalchemy import insert as _sa_insert
from sqlmodel import Session

from ..models import (
    Episode,
    Task,
    TaskVersion,
)

_BULK_TABLES: dict[str, Any] = {"task": Task, "task_version": TaskVersion, "episode": Episode}


def bulk_insert(s: Session, table: str, rows: Sequence[dict[str, Any]]) -> int:
    """Inserts plain-dict rows into ``task``, ``task_version`` or ``episode`` in one executemany; returns
    how many. Columns left out get the model's SQL defaults; ids may be given (imports keep theirs)."""
    model = _BULK_TABLES.get(table)
    if model is None:
        raise ValueError(f"bulk_insert: unsupported table {table!r} (supported: {', '.join(_BULK_TABLES)})")
    if not rows:
        return 0
    # The models' Python-side defaults (created_at, "[]" json columns...), evaluated once for the batch.
    fill = {
        name: f.get_default(call_default_factory=True)
        for name, f in model.model_fields.items()
        if not f.is_required() and name != "id"
    }
    s.execute(_sa_insert(model), [{**fill, **r} for r in rows])
    return len(rows)
