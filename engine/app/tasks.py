"""Bring tasks and results in: Harbor (and Terminal-Bench 1) task folders (``bandpass import``, the demo)
and Harbor job results as finished episodes (``bandpass import-jobs``).

Both are idempotent (a task by its content hash, a trial by its id) and report per item what happened,
so the front ends only render the report.
"""

from __future__ import annotations

from ..tasks.harbor_jobs import import_jobs
from ..tasks.importer import import_paths

__all__ = ["import_jobs", "import_paths"]
