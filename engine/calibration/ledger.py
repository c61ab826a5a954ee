"""The band ledger: where each task stood for each model (checkpoint), how sure that was, and why.

Training frameworks filter on the fly and forget; the ledger keeps, per (task version, model), every band
decision that was made — the band, k and confidence, the decision and its interval, and the episodes behind
it — with the checkpoint the model stands for (``[models.X] series`` / ``checkpoint_step``). Decisions are
recorded where they are made: each round of an adaptive batch, ``bandpass report`` and ``report compare``,
the Calibration screen and every export. A row is appended only when the evidence or the parameters differ
from that (version, model)'s latest row, so looking again at unchanged data writes nothing and the table
reads as a history. Exports carry each task's history (the latest row of every model) in ``extra_info``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ...store.db import session
from ...store.models import BandLedgerEntry
from ...store.queries import ledger as store_ledger
from ..core.config import Config
from ..core.workspace import Workspace
from .calibrate import GateParams, TaskEstimate
from .confidence import BandDecision


def _checkpoint(model: str, config: Config | None) -> tuple[str, int | None]:
    cfg = config.models.get(model) if config is not None else None
    return (cfg.series, cfg.checkpoint_step) if cfg is not None else ("", None)


def ledger_row(
    e: TaskEstimate, d: BandDecision, params: GateParams, series: str, step: int | None
) -> dict[str, Any]:
    """The ledger columns for one estimate and its decision."""
    return {
        "task_version_id": e.version_id,
        "series": series,
        "checkpoint_step": step,
        "lo": params.lo,
        "hi": params.hi,
        "k": params.k,
        "confidence": params.confidence,
        "min_samples": params.min_samples,
        "decision": d.status,
        "n": e.n,
        "c": e.c,
        "infra_errors": e.infra_errors,
        "rate_lo": d.rate[0],
        "rate_hi": d.rate[1],
        "pass_lo": d.pass_at_k[0],
        "pass_hi": d.pass_at_k[1],
        "episodes_json": json.dumps(e.sample_ids),
    }


def record(
    ws: Workspace,
    model: str,
    ests: Sequence[TaskEstimate],
    params: GateParams,
    source: str,
    config: Config | None = None,
) -> int:
    """Appends the decisions of ``ests`` that are new evidence (module docstring); returns rows written.

    Tasks without a single episode of the model are skipped: nothing was decided about them.
    """
    series, step = _checkpoint(model, config)
    rows = [
        ledger_row(e, e.decision(params), params, series, step)
        for e in ests
        if e.n or e.infra_errors or e.unclassified
    ]
    if not rows:
        return 0
    with session(ws.engine) as s:
        return store_ledger.record_entries(s, model, rows, source)


@dataclass(frozen=True)
class HistoryItem:
    """One model's latest decision on a task version, as exports and the Calibration screen show it."""

    model: str
    series: str
    checkpoint_step: int | None
    decision: str
    lo: float
    hi: float
    k: int
    confidence: float
    n: int
    c: int
    pass_lo: float
    pass_hi: float

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def _item(e: BandLedgerEntry) -> HistoryItem:
    return HistoryItem(
        e.model,
        e.series,
        e.checkpoint_step,
        e.decision,
        e.lo,
        e.hi,
        e.k,
        e.confidence,
        e.n,
        e.c,
        e.pass_lo,
        e.pass_hi,
    )


def band_history(ws: Workspace, version_ids: Sequence[int]) -> dict[int, list[HistoryItem]]:
    """Per task version, the latest decision of every model that has one, in checkpoint order (a series by
    ``checkpoint_step``, then models by name). No timestamps: an export that carries it stays
    byte-identical for the same database."""
    with session(ws.engine) as s:
        rows = store_ledger.history(s, version_ids)
    out: dict[int, list[HistoryItem]] = {}
    for vid, entries in rows.items():
        latest: dict[str, BandLedgerEntry] = {}
        for e in entries:  # oldest first: the last one of each model wins
            latest[e.model] = e
        items = [_item(e) for e in latest.values()]
        items.sort(
            key=lambda h: (h.series, h.checkpoint_step if h.checkpoint_step is not None else -1, h.model)
        )
        out[vid] = items
    return out


def task_history(ws: Workspace, task: str, model: str | None = None) -> list[BandLedgerEntry]:
    """Every ledger row of one task (any version), oldest first; of one model when given."""
    with session(ws.engine) as s:
        return [e for _name, e in store_ledger.entries(s, model=model, task=task)]


__all__ = ["HistoryItem", "band_history", "ledger_row", "record", "task_history"]
