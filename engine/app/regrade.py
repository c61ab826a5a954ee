"""Regrade: re-run a fixed verifier on the stored end states of an earlier version's episodes
(``bandpass regrade``); only the task's ``tests/`` may differ between the two versions."""

from __future__ import annotations

from ..run.regrade import RegradeItem, RegradeRefused, regrade

__all__ = ["RegradeItem", "RegradeRefused", "regrade"]
