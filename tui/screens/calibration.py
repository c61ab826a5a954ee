"""Calibration screen: one model's report, and every model side by side as a heatmap.

*Report* shows the same data as ``bandpass report --model M`` (one ``engine.calibration.report`` object
feeds both), so the curator never sees two different numbers for the same question: the infra warning and
summary on top, the pass@k histogram with the band overlaid, the breakdowns by outcome, agent-error code,
infra code and failure tag, and a table of tasks with n / c / pass@k / band / gates.

*Across models* is ``bandpass report compare`` for every policy model with episodes (a ``bandpass.toml``
series in checkpoint order): the tasks × models heatmap, each model's mean pass@k, and the tasks that left
the band between consecutive models. Selecting a cell (Enter or a click) opens that model's report.

The model picker lists policy models first and defaults to the one that ran most recently; built-in
agents (oracle, nop, cheat probes) come last and are never the default: a cheat probe's "calibration" is
an audit result, not a solvability measurement.
"""

from __future__ import annotations

from rich.columns import Columns
from rich.console import Group
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Select, Static, TabbedContent, TabPane

from engine.calibration.calibrate import GateParams
from engine.calibration.compare import SATURATED, Comparison, compare, model_params
from engine.calibration.overview import is_builtin_agent
from engine.calibration.report import (
    CalibrationReport,
    breakdown_tables,
    build_report,
    infra_warning_panel,
    render_histogram,
    summary_table,
)
from engine.core.workspace import Workspace
from store import queries
from store.db import session
from tui.widgets.pass_heatmap import PassHeatmap

COLUMNS = ("task", "version", "n", "c", "infra", "pass@1", "pass@k", "reward std", "band", "gates")


def _fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


class CalibrationScreen(Screen[None]):
    CSS_PATH = "calibration.tcss"
    BINDINGS = [
        Binding("r", "refresh", "Refresh"),
        Binding("g", "show_tab('calib-tab-report')", "Report"),
        Binding("h", "show_tab('calib-tab-heatmap')", "Across models"),
        Binding("escape", "app.pop_screen", "Back", show=False),
    ]

    def __init__(self, workspace: Workspace, model: str | None = None) -> None:
        super().__init__()
        self.workspace = workspace
        self.initial_model = model
        self.report: CalibrationReport | None = None
        self.comparison: Comparison | None = None

    def _models(self) -> tuple[list[str], list[str]]:
        """(policy models, most recent first then configured; built-in agents, sorted)."""
        with session(self.workspace.engine) as s:
            recent = queries.agents_by_recency(s)
        try:
            configured = list(self.workspace.config.models)
        except Exception:  # a broken bandpass.toml must not hide the models that have data
            configured = []
        policy = [m for m in dict.fromkeys([*recent, *configured]) if not is_builtin_agent(m)]
        builtin = sorted(m for m in recent if is_builtin_agent(m))
        return policy, builtin

    def _params(self) -> GateParams:
        try:
            band = self.workspace.config.band
            return GateParams(lo=band.lo, hi=band.hi, k=band.k, min_samples=band.min_samples)
        except Exception as exc:  # a broken bandpass.toml: say so, and show the defaults meanwhile
            self.notify(f"{exc}; using the default band", severity="warning")
            return GateParams()

    def compose(self) -> ComposeResult:
        policy, builtin = self._models()
        with session(self.workspace.engine) as s:
            with_episodes = set(queries.episode_agents(s))
        options = [(m, m) for m in policy] + [(f"{m} (built-in agent)", m) for m in builtin]
        known = policy + builtin
        default = next((m for m in policy if m in with_episodes), None)
        initial = self.initial_model if self.initial_model in known else default
        yield Header()
        with Horizontal(id="calib-bar"):
            yield Static("Model", id="calib-model-label")
            yield Select(
                options,
                prompt="choose a policy model",
                value=initial if initial is not None else Select.NULL,
                id="calib-model",
            )
        with TabbedContent(id="calib-tabs", initial="calib-tab-report"):
            with TabPane("Report", id="calib-tab-report"), VerticalScroll(id="calib-body"):
                yield Static("", id="calib-warning")
                yield Static("", id="calib-summary")
                yield Static("", id="calib-histogram")
                yield Static("", id="calib-breakdowns")
                yield DataTable(id="calib-table", cursor_type="row", zebra_stripes=True)
            with TabPane("Across models", id="calib-tab-heatmap"), VerticalScroll(id="calib-cmp-body"):
                yield Static("", id="calib-cmp-head")
                yield PassHeatmap(id="calib-heatmap")
                yield Static("", id="calib-cell")
                yield Static("", id="calib-leavers")
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
            self._refresh_report()

    def action_show_tab(self, tab: str) -> None:
        self.query_one("#calib-tabs", TabbedContent).active = tab
        target = "#calib-heatmap" if tab == "calib-tab-heatmap" else "#calib-table"
        self.query_one(target).focus()

    def action_refresh(self) -> None:
        self._refresh_report()
        self._refresh_comparison()

    def _refresh_report(self) -> None:
        model = self.model
        table = self.query_one("#calib-table", DataTable)
        table.clear()
        warning = self.query_one("#calib-warning", Static)
        if model is None:
            self.report = None
            warning.display = False
            self.query_one("#calib-summary", Static).update(
                "No policy model selected: run one (bandpass run --model M) or import Harbor jobs "
                "(bandpass import-jobs DIR); built-in agents are in the list too."
            )
            self.query_one("#calib-histogram", Static).update("")
            self.query_one("#calib-breakdowns", Static).update("")
            return
        try:
            config = self.workspace.config
        except Exception:
            config = None
        rep = build_report(self.workspace, model, model_params(model, self._params(), config))
        self.report = rep
        panel = infra_warning_panel(rep)
        warning.display = panel is not None
        warning.update(panel if panel is not None else "")
        self.query_one("#calib-summary", Static).update(Group(summary_table(rep)))
        self.query_one("#calib-histogram", Static).update(render_histogram(rep))
        self.query_one("#calib-breakdowns", Static).update(Columns(breakdown_tables(rep), padding=(0, 2)))
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

    def _refresh_comparison(self) -> None:
        policy, _ = self._models()
        with session(self.workspace.engine) as s:
            with_episodes = set(queries.episode_agents(s))
        models = [m for m in policy if m in with_episodes]
        head = self.query_one("#calib-cmp-head", Static)
        heatmap = self.query_one("#calib-heatmap", PassHeatmap)
        if not models:
            self.comparison = None
            heatmap.clear(columns=True)
            head.update("No policy model has episodes yet.")
            self.query_one("#calib-leavers", Static).update("")
            return
        try:
            config = self.workspace.config
        except Exception:
            config = None
        cmp = compare(self.workspace, models, self._params(), config=config)  # per-model bands
        self.comparison = cmp
        p = cmp.params
        head.update(
            Text(
                f"pass@{cmp.k} across {len(models)} model(s), each on its own band (default "
                f"[{p.lo:g}, {p.hi:g}]), min samples "
                f"{p.min_samples}   ● in band  ▲ above (saturated)  ▼ below (too hard)  ? unknown   "
                "Enter/click: open that model's report",
                style="bold",
            )
        )
        heatmap.show(cmp)
        self._show_cell()
        leavers = Text()
        if cmp.leavers:
            leavers.append("Left the band\n", style="bold")
            for lv in cmp.leavers:
                kind = "saturated" if lv.kind == SATURATED else "too hard"
                leavers.append(f"  {lv.task}: {lv.before} → {lv.after}  {kind}  ", style="")
                leavers.append(f"{_fmt(lv.pass_before)} → {_fmt(lv.pass_after)}\n", style="dim")
        else:
            leavers.append("No task left the band between consecutive models.")
        self.query_one("#calib-leavers", Static).update(leavers)

    def _show_cell(self) -> None:
        cmp = self.comparison
        hit = self.query_one("#calib-heatmap", PassHeatmap).cell_at_cursor()
        out = self.query_one("#calib-cell", Static)
        if cmp is None or hit is None:
            out.update("")
            return
        task, model = hit
        c = cmp.cells[(task, model)]
        out.update(
            f"{task} × {model}: n={c.n} c={c.c} infra errors={c.infra_errors} "
            f"pass@{cmp.k}={_fmt(c.pass_at_k)} band={c.band}"
        )

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        if event.data_table.id == "calib-heatmap":
            self._show_cell()

    def on_pass_heatmap_cell_chosen(self, event: PassHeatmap.CellChosen) -> None:
        self.query_one("#calib-model", Select).value = event.model
        self.action_show_tab("calib-tab-report")
