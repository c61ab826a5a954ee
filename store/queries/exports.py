"""Exports: the record of each training set written (model, parameters, where, the manifest's hash).

Separate because an export is its own aggregate: written once by engine/calibration/export.py and listed
by ``bandpass exports``; the reads that choose what goes into one are in store/queries/calibration.py.
"""

from __future__ import annotations

import json
from typing import Any

from sqlmodel import Session, col, select

from ..models import (
    Export,
)


def record_export(
    s: Session,
    *,
    model: str,
    params: dict[str, Any],
    out_dir: str,
    task_count: int,
    manifest_sha256: str,
) -> Export:
    e = Export(
        model=model,
        params_json=json.dumps(params, sort_keys=True, default=str),
        out_dir=out_dir,
        task_count=task_count,
        manifest_sha256=manifest_sha256,
    )
    s.add(e)
    s.flush()
    return e


def list_exports(s: Session, model: str | None = None) -> list[Export]:
    q = select(Export)
    if model is not None:
        q = q.where(Export.model == model)
    return list(s.exec(q.order_by(col(Export.id))).all())
