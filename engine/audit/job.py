"""A claimed audit as the head hands it to an executor (engine/audit/executors.py, engine/audit/remote.py)."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["AuditJobSpec"]


@dataclass(frozen=True)
class AuditJobSpec:
    """Which job and version, under which batch id its episodes run (their containers carry it)."""

    job_id: int
    version_id: int
    batch_id: str
    reruns: int
