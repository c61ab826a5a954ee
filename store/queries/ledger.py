"""Reads and writes of the band ledger (``band_decision``): the history of every task's band decision per
model (engine/calibration/ledger.py decides what goes in; this module only stores and fetches rows)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlalchemy import func
from sqlmodel import Session, col, select

from ..models import BandLedgerEntry, Task, TaskVersion

#: The columns that identify what a decision was made from: a new row is written only when one differs
#: from the latest row of the same (task version, model).
EVIDENCE_FIELDS = (
    "series",
    "checkpoint_step",
    "lo",
    "hi",
    "k",
    "confidence",
    "min_samples",
    "decision",
    "n",
    "c",
    "infra_errors",
    "episodes_json",
)


def latest_entries(
    s: Session, model: str, version_ids: Sequence[int] | None = None
) -> dict[int, BandLedgerEntry]:
    """The newest row per task version for ``model`` (all versions, or ``version_ids``)."""
    newest = (
        select(func.max(BandLedgerEntry.id))
        .where(BandLedgerEntry.model == model)
        .group_by(col(BandLedgerEntry.task_version_id))
    )
    q = select(BandLedgerEntry).where(col(BandLedgerEntry.id).in_(newest.scalar_subquery()))
    if version_ids is not None:
        q = q.where(col(BandLedgerEntry.task_version_id).in_(list(version_ids)))
    return {e.task_version_id: e for e in s.exec(q)}


def record_entries(s: Session, model: str, rows: Sequence[dict[str, Any]], source: str) -> int:
    """Appends each row (the columns of ``BandLedgerEntry`` but id/model/source/created_at) whose evidence
    differs from the latest row of its (version, model); returns how many were written."""
    latest = latest_entries(s, model, [int(r["task_version_id"]) for r in rows])
    written = 0
    for row in rows:
        row = {**row, "episodes_json": row.get("episodes_json") or "[]"}
        prev = latest.get(int(row["task_version_id"]))
        if prev is not None and all(getattr(prev, f) == row.get(f) for f in EVIDENCE_FIELDS):
            continue
        s.add(BandLedgerEntry(model=model, source=source, **row))
        written += 1
    return written


def history(s: Session, version_ids: Sequence[int]) -> dict[int, list[BandLedgerEntry]]:
    """Every row of each version, oldest first (all models)."""
    out: dict[int, list[BandLedgerEntry]] = {v: [] for v in version_ids}
    if not version_ids:
        return out
    for e in s.exec(
        select(BandLedgerEntry)
        .where(col(BandLedgerEntry.task_version_id).in_(list(version_ids)))
        .order_by(col(BandLedgerEntry.id))
    ):
        out.setdefault(e.task_version_id, []).append(e)
    return out


def entries(
    s: Session, *, model: str | None = None, task: str | None = None
) -> list[tuple[str, BandLedgerEntry]]:
    """Rows as (task name, row), oldest first, optionally of one model and/or one task (any version)."""
    q = (
        select(Task.name, BandLedgerEntry)
        .join(TaskVersion, col(TaskVersion.id) == col(BandLedgerEntry.task_version_id))
        .join(Task, col(Task.id) == col(TaskVersion.task_id))
    )
    if model is not None:
        q = q.where(BandLedgerEntry.model == model)
    if task is not None:
        q = q.where(Task.name == task)
    return [(name, e) for name, e in s.exec(q.order_by(col(BandLedgerEntry.id)))]


def episode_ids(entry: BandLedgerEntry) -> list[int]:
    return [int(x) for x in json.loads(entry.episodes_json or "[]")]
