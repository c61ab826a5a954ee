"""The workspace at a glance (the Overview screen, ``0``, and ``bandpass demo --no-tui``): tasks by
audit verdict, episodes by outcome, each model's band figures, what needs a curator next."""

from __future__ import annotations

from ..calibration.overview import Overview, build_overview, overview_lines

__all__ = ["Overview", "build_overview", "overview_lines"]
