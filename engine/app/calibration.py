"""Calibrate a model: the gates' parameters, the report (pass@k per task, band decisions, yield), models
compared, and the band ledger that remembers every decision: what ``bandpass report``, ``report
compare``, ``report ledger`` and ``export``, the Calibration screen, its heatmap and the Tasks screen
read.

Why here: the decisions a report shows were written to the ledger by the command and again by the
screen; :func:`record_decisions` is the one place. The gates' parameters are :mod:`engine.app.gates`
(re-exported here).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from ..calibration.calibrate import GateParams, band_status, estimates
from ..calibration.compare import (
    SATURATED,
    Comparison,
    compare,
    model_params,
    render_comparison,
)
from ..calibration.ledger import task_history
from ..calibration.report import (
    CalibrationReport,
    breakdown_tables,
    build_report,
    infra_warning_panel,
    render_histogram,
    render_report,
    summary_table,
)
from .gates import GateOptions, gate_params

if TYPE_CHECKING:
    from ..core.workspace import Workspace

__all__ = [
    "SATURATED",
    "CalibrationReport",
    "Comparison",
    "GateOptions",
    "GateParams",
    "band_status",
    "breakdown_tables",
    "build_report",
    "compare",
    "estimates",
    "gate_params",
    "infra_warning_panel",
    "model_params",
    "record_decisions",
    "render_comparison",
    "render_histogram",
    "render_report",
    "summary_table",
    "task_history",
]


def record_decisions(ws: Workspace, reports: Iterable[CalibrationReport], source: str) -> None:
    """Every decision the reports show goes into the band ledger (new evidence only), with ``source``
    (``report``, ``compare``, ``tui``); a broken bandpass.toml records no checkpoint step, nothing else
    changes."""
    from ..calibration import ledger
    from .batches import config_or_none

    config = config_or_none(ws)
    for rep in reports:
        ledger.record(ws, rep.model, rep.estimates, rep.params, source, config)
