"""Image builds, audits and the probe cache: the evidence that a task's verifier is honest.

Separate because only engine/audit writes these rows; the Tasks detail pane reads the audit history
(``audits_for_version``) and calibration reads the latest verdict alone (in store/queries/calibration.py).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from sqlmodel import Session, col, select

from ..models import (
    Audit,
    ImageBuild,
    ProbeCache,
    utcnow,
)


def record_image_build(
    s: Session, version_id: int, *, tag: str, ok: bool, log: str, duration_s: float
) -> ImageBuild:
    b = ImageBuild(task_version_id=version_id, tag=tag, ok=ok, log=log, duration_s=duration_s)
    s.add(b)
    s.flush()
    return b


def image_builds(s: Session, version_id: int) -> list[ImageBuild]:
    q = select(ImageBuild).where(ImageBuild.task_version_id == version_id)
    return list(s.exec(q.order_by(col(ImageBuild.id))))


def record_audit(
    s: Session, version_id: int, *, verdict: str, reasons: Sequence[str], details: dict[str, Any]
) -> Audit:
    a = Audit(
        task_version_id=version_id,
        verdict=verdict,
        reasons_json=json.dumps(list(reasons)),
        details_json=json.dumps(details, sort_keys=True, default=str),
    )
    s.add(a)
    s.flush()
    return a


def probe_cache(s: Session, key: str) -> ProbeCache | None:
    return s.get(ProbeCache, key)


def put_probe_cache(
    s: Session, key: str, *, setting: dict[str, Any], results: dict[str, Any], version_id: int | None
) -> ProbeCache:
    row = s.get(ProbeCache, key) or ProbeCache(key=key)
    row.setting_json = json.dumps(setting, sort_keys=True)
    row.results_json = json.dumps(results, sort_keys=True)
    row.task_version_id = version_id
    row.created_at = utcnow()
    s.add(row)
    s.flush()
    return row


def latest_audit(s: Session, version_id: int) -> Audit | None:
    return s.exec(
        select(Audit).where(Audit.task_version_id == version_id).order_by(col(Audit.id).desc())
    ).first()


def audits_for_version(s: Session, version_id: int) -> list[Audit]:
    """Every audit of a version, newest first: the detail pane shows the history, not just the verdict."""
    return list(
        s.exec(select(Audit).where(Audit.task_version_id == version_id).order_by(col(Audit.id).desc())).all()
    )
