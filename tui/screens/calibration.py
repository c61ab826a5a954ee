"""Calibration screen: the calibration report for one policy model, chosen from a Select.

Shows the same data as ``bandpass report --model M`` (one ``engine.calibration.report`` object feeds both),
so the
curator never sees two different numbers for the same question: the infra warning and summary on top,
the pass@k histogram with the band overlaid, and a table of tasks with n / c / pass@k / band / gates.
"""

from __future__ import annotations

from rich.console import Group
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Select, Static

from engine.calibration.calibrate import GateParams
from engine.calibration.report import (
    CalibrationReport,
    build_report,
    infra_warning_panel,
    render_histogram,
    summary_table,
)
from engine.core.workspace import Workspace
from store import queries
from store.db import session

COLUMNS = ("task", "version", "n", "c", "infra", "pass@1", "pass@k", "reward std", "band", "gates")


def _fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


class CalibrationScreen(Screen[None]):
    CSS_PATH = "calibration.tcss"
    BINDINGS = [
        Binding("r", "refresh", "Refresh"),
        Binding("escape", "app.pop_screen", "Back", show=False),
    ]

    def __init__(self, workspace: Workspace, model: str | None = None) -> None:
        super().__init__()
        self.workspace = workspace
        self.initial_model = model
        self.report: CalibrationReport | None = None

    def _models(self) -> list[str]:
        with session(self.workspace.engine) as s:
            seen = queries.episode_agents(s)
        try:
            configured = list(self.workspace.config.models)
        except Exception:  # a broken bandpass.toml must not hide the models that have data
            configured = []
        return sorted(set(seen) | set(configured))

    def compose(self) -> ComposeResult:
        models = self._models()
        initial = self.initial_model if self.initial_model in models else (models[0] if models else None)
        yield Header()
        with Horizontal(id="calib-bar"):
            yield Static("Model", id="calib-model-label")
            yield Select(
                [(m, m) for m in models],
                prompt="choose a policy model",
                value=initial if initial is not None else Select.NULL,
                id="calib-model",
            )
        with VerticalScroll(id="calib-body"):
            yield Static("", id="calib-warning")
            yield Static("", id="calib-summary")
            yield Static("", id="calib-histogram")
            yield DataTable(id="calib-table", cursor_type="row", zebra_stripes=True)
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#calib-table", DataTable).add_columns(*COLUMNS)
        self.action_refresh()

    @property
    def model(self) -> str | None:
        value = self.query_one("#calib-model", Select).value
        return value if isinstance(value, str) else None

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "calib-model":
            self.action_refresh()

    def action_refresh(self) -> None:
        model = self.model
        table = self.query_one("#calib-table", DataTable)
        table.clear()
        warning = self.query_one("#calib-warning", Static)
        if model is None:
            self.report = None
            warning.display = False
            self.query_one("#calib-summary", Static).update("No model selected (no episodes yet?).")
            self.query_one("#calib-histogram", Static).update("")
            return
        try:
            band = self.workspace.config.band
            params = GateParams(lo=band.lo, hi=band.hi, k=band.k, min_samples=band.min_samples)
        except Exception as exc:  # a broken bandpass.toml: say so, and show the defaults meanwhile
            self.notify(f"{exc}; using the default band", severity="warning")
            params = GateParams()
        rep = build_report(self.workspace, model, params)
        self.report = rep
        panel = infra_warning_panel(rep)
        warning.display = panel is not None
        warning.update(panel if panel is not None else "")
        self.query_one("#calib-summary", Static).update(Group(summary_table(rep)))
        self.query_one("#calib-histogram", Static).update(render_histogram(rep))
        for e in rep.estimates:
            why = rep.gates[e.task]
            table.add_row(
                e.task,
                e.version_hash[:12],
                str(e.n),
                str(e.c),
                f"{e.infra_errors}" + (" ⚠" if e.infra_heavy else ""),
                _fmt(e.pass_at.get(1)),
                _fmt(e.pass_at.get(rep.k)),
                _fmt(e.reward_std, 3),
                rep.status[e.task],
                "export" if not why else ", ".join(why),
                key=str(e.version_id),
            )
