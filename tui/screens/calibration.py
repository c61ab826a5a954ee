"""Calibration screen: one model's report, and every model side by side as a heatmap.

*Report* shows the same data as ``bandpass report --model M`` (one ``engine.app.calibration`` report
feeds both), so the curator never sees two different numbers for the same question: the infra warning and
summary on top, the pass@k histogram with the band overlaid, the breakdowns by outcome, agent-error code,
infra code and failure tag, and a table of tasks with n / c / pass@k / band / gates.

*Across models* is ``bandpass report compare`` for every policy model with episodes (a ``bandpass.toml``
series in checkpoint order): the tasks × models heatmap, each model's mean pass@k, and the tasks that left
the band between consecutive models. Selecting a cell (Enter or a click) opens that model's report.

*Ledger* is where the model's band decisions stand and what it would cost to move them: the decided and
undecided counts at the stated confidence, the undecided tasks with their pass@k intervals and the edges
still open (most informative first, as the adaptive sampler ranks them), the highlighted task's band
history from the ledger (every decision recorded for it, all models), and what another adaptive round
would cost: the episodes ``engine.app.adaptive.plan_round`` would queue now. ``a`` asks, naming the
model, its endpoint, the episodes and the tasks, then runs exactly that round (an adaptive batch whose
budget is the round) in a worker on this machine's Docker engine; the
header follows it live (decided/undecided, episodes) and the Runs screen shows its episodes.

The model picker lists policy models first and defaults to the one that ran most recently; built-in
agents (oracle, nop, cheat probes) come last and are never the default: a cheat probe's "calibration" is
an audit result, not a solvability measurement.
"""

from __future__ import annotations

import threading
from functools import partial

from rich.columns import Columns
from rich.console import Group
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Select, Static, TabbedContent, TabPane
from textual.widgets.data_table import CellDoesNotExist

from ...engine.app import batches, reads
from ...engine.app.adaptive import (
    DEFAULT_FIRST,
    DEFAULT_MAX_K,
    DEFAULT_STEP,
    AdaptiveSettings,
    AdaptiveStatus,
    Plan,
    plan_round,
    task_score,
    task_states,
)
from ...engine.app.calibration import (
    SATURATED,
    CalibrationReport,
    Comparison,
    GateParams,
    breakdown_tables,
    build_report,
    compare,
    infra_warning_panel,
    model_params,
    record_decisions,
    render_histogram,
    summary_table,
    task_history,
)
from ...engine.core.config import ConfigError
from ...engine.core.errors import BandpassError
from ...engine.core.plural import counted
from ...engine.core.probes import is_builtin_agent
from ...engine.core.workspace import Workspace
from ..errors import Guarded, show_refusal
from ..navigation import go_back
from ..typed_app import bandpass_app
from ..widgets.pass_heatmap import PassHeatmap
from ..widgets.threadsafe import UiCaller
from .confirm import ConfirmDialog

COLUMNS = ("task", "version", "n", "c", "infra", "pass@1", "pass@k", "interval", "band", "gates")
#: Under ``WIDE_AT`` terminal columns the table keeps what decides a task's fate — its name, counts, pass@k,
#: band and gates (without the ``band:`` gate its band column already says) — and leaves version, infra,
#: pass@1 and the interval to the wide layout and ``bandpass report``: all ten at 100 columns pushed
#: ``gates``, the reason a task is not exported, off the screen.
NARROW_COLUMNS = ("task", "n", "c", "pass@k", "band", "gates")
WIDE_AT = 140
LEDGER_COLUMNS = ("task", "n", "c", "pass@k", "interval", "open edges", "edges/episode", "next round")


def _fmt(x: float | None, digits: int = 2) -> str:
    return "—" if x is None else f"{x:.{digits}f}"


def _interval(iv: tuple[float, float]) -> str:
    return f"[{iv[0]:.2f}, {iv[1]:.2f}]"


class CalibrationScreen(Guarded, Screen[None]):
    CSS_PATH = "calibration.tcss"
    #: The table, not a text field: digits switch screens (an Input would take them as text).
    AUTO_FOCUS = "#calib-table"
    BINDINGS = [
        Binding("r", "refresh", "Refresh"),
        Binding("g", "show_tab('calib-tab-report')", "Report"),
        Binding("h", "show_tab('calib-tab-heatmap')", "Models"),
        Binding("l", "show_tab('calib-tab-ledger')", "Ledger"),
        Binding("a", "run_round", "Run a round"),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, workspace: Workspace, model: str | None = None) -> None:
        super().__init__()
        self.workspace = workspace
        self.initial_model = model
        self.report: CalibrationReport | None = None
        self.comparison: Comparison | None = None
        self.next_round: Plan | None = None  # what ``a`` would run now
        self.round_settings: AdaptiveSettings | None = None
        self.round_versions: list[int] = []
        self.round_rejected: list[str] = []  # audit-rejected tasks a round leaves out
        self.round_status: AdaptiveStatus | None = None  # the round running now (or last run)
        self.round_batch: str | None = None
        self._round_stop: threading.Event | None = None

    def _models(self) -> tuple[list[str], list[str]]:
        """(policy models, most recent first then configured; built-in agents, sorted)."""
        recent = reads.agents_by_recency(self.workspace)
        try:
            configured = list(self.workspace.config.models)
        except ConfigError:  # a broken bandpass.toml must not hide the models that have data
            configured = []
        policy = [m for m in dict.fromkeys([*recent, *configured]) if not is_builtin_agent(m)]
        builtin = sorted(m for m in recent if is_builtin_agent(m))
        return policy, builtin

    def _params(self) -> GateParams:
        try:
            band = self.workspace.config.band
            return GateParams(
                lo=band.lo, hi=band.hi, k=band.k, min_samples=band.min_samples, confidence=band.confidence
            )
        except ConfigError as exc:  # a broken bandpass.toml: say so, and show the defaults meanwhile
            self.notify(f"{exc}; using the default band", severity="warning")
            return GateParams()

    def compose(self) -> ComposeResult:
        policy, builtin = self._models()
        with_episodes = set(reads.episode_agents(self.workspace))
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
            with TabPane("Ledger", id="calib-tab-ledger"), VerticalScroll(id="calib-ledger-body"):
                yield Static("", id="calib-ledger-head")
                yield Static("", id="calib-ledger-round")
                yield DataTable(id="calib-ledger-table", cursor_type="row", zebra_stripes=True)
                yield Static("", id="calib-ledger-history")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._ui = UiCaller()
        self.query_one("#calib-ledger-table", DataTable).add_columns(*LEDGER_COLUMNS)
        self.action_refresh()

    def _layout(self) -> tuple[str, ...]:
        return COLUMNS if self.size.width >= WIDE_AT else NARROW_COLUMNS

    def on_resize(self) -> None:
        """Crossing ``WIDE_AT`` switches the table's columns (the report is read again: cheap)."""
        tables = self.query("#calib-table").results(DataTable)
        table = next(tables, None)
        if table is not None and tuple(str(c.label) for c in table.columns.values()) != self._layout():
            self._refresh_report()

    @property
    def model(self) -> str | None:
        value = self.query_one("#calib-model", Select).value
        return value if isinstance(value, str) else None

    def on_select_changed(self, event: Select.Changed) -> None:
        if event.select.id == "calib-model":
            self._refresh_report()

    def action_show_tab(self, tab: str) -> None:
        self.query_one("#calib-tabs", TabbedContent).active = tab
        target = {"calib-tab-heatmap": "#calib-heatmap", "calib-tab-ledger": "#calib-ledger-table"}.get(
            tab, "#calib-table"
        )
        self.query_one(target).focus()

    def action_refresh(self) -> None:
        self._refresh_report()
        self._refresh_comparison()

    def _refresh_report(self) -> None:
        model = self.model
        table = self.query_one("#calib-table", DataTable)
        layout = self._layout()
        if tuple(str(c.label) for c in table.columns.values()) != layout:
            table.clear(columns=True)
            table.add_columns(*layout)
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
            self._refresh_ledger()
            return
        config = batches.config_or_none(self.workspace)
        rep = build_report(self.workspace, model, model_params(model, self._params(), config))
        self.report = rep
        record_decisions(self.workspace, [rep], "tui")
        panel = infra_warning_panel(rep)
        warning.display = panel is not None
        warning.update(panel if panel is not None else "")
        self.query_one("#calib-summary", Static).update(Group(summary_table(rep)))
        self.query_one("#calib-histogram", Static).update(render_histogram(rep))
        self.query_one("#calib-breakdowns", Static).update(Columns(breakdown_tables(rep), padding=(0, 2)))
        narrow = layout != COLUMNS
        for e in rep.estimates:
            why = rep.gates[e.task]
            d = rep.decisions[e.task]
            # narrow: the band column says the band; a band that is the only gate stays named
            shown = [g for g in why if not (narrow and g.startswith("band:"))] or why
            cells = dict(
                zip(
                    COLUMNS,
                    (
                        e.task,
                        e.version_hash[:12],
                        str(e.n),
                        str(e.c),
                        f"{e.infra_errors}" + (" ⚠" if e.infra_heavy else ""),
                        _fmt(e.pass_at.get(1)),
                        _fmt(e.pass_at.get(rep.k)),
                        _interval(d.pass_at_k),
                        d.status,
                        "export" if not why else ", ".join(shown),
                    ),
                    strict=True,
                )
            )
            table.add_row(*(cells[c] for c in layout), key=str(e.version_id))
        self._refresh_ledger()

    # --- the ledger: undecided tasks, the next round, the band history --- #

    def _settings(self, rep: CalibrationReport, budget: int | None = None) -> AdaptiveSettings:
        """The round ``a`` runs: the report's band and confidence, the CLI's defaults, this machine's
        default concurrency for the round size."""
        from ...engine.app.executors import default_concurrency

        p = rep.params
        return AdaptiveSettings(
            lo=p.lo,
            hi=p.hi,
            k=p.k,
            confidence=p.confidence,
            min_samples=p.min_samples,
            first=DEFAULT_FIRST,
            step=DEFAULT_STEP,
            max_k=DEFAULT_MAX_K,
            budget=budget,
            round_tasks=max(4, 2 * default_concurrency()),
        )

    def _refresh_ledger(self) -> None:
        head = self.query_one("#calib-ledger-head", Static)
        table = self.query_one("#calib-ledger-table", DataTable)
        table.clear()
        self.query_one("#calib-ledger-history", Static).update("")
        rep = self.report
        if rep is None:
            self.next_round = self.round_settings = None
            head.update("No model selected.")
            self._show_round()
            return
        band = rep.band_counts()
        decided = len(rep.estimates) - band["undecided"]
        head.update(
            Text.assemble(
                (f"{rep.model}: ", "bold"),
                (f"{decided} decided", "bold green"),
                f" (in {band['in']} · below {band['below']} · above {band['above']}) · ",
                (f"{band['undecided']} undecided", "bold yellow"),
                f"   band pass@{rep.k} in [{rep.params.lo:g}, {rep.params.hi:g}] at "
                f"{rep.confidence:.0%} confidence",
            )
        )
        settings = self._settings(rep)
        self.round_settings = settings
        # a round runs what Runs' `n` would: audit-rejected tasks stay out (named in the question)
        scope = batches.batch_scope(self.workspace, [e.version_id for e in rep.estimates])
        self.round_versions = [v for v, _ in scope.run]
        self.round_rejected = [name for _, name in scope.rejected]
        states = {t.key: t for t in task_states(self.workspace, rep.model, self.round_versions, None)}
        plan = plan_round(list(states.values()), settings)
        self.next_round = plan
        rows = []
        for e in rep.undecided:
            t = states.get(e.version_id)
            value = task_score(t, settings) if t is not None else 0.0
            d = rep.decisions[e.task]
            rows.append((-value, e.task, e, d, plan.attempts.get(e.version_id, 0), value))
        rows.sort(key=lambda r: (r[0], r[1]))
        for _neg, _name, e, d, planned, value in rows:
            open_edges = [edge for edge, side in (("lo", d.lo_side), ("hi", d.hi_side)) if side is None]
            table.add_row(
                e.task,
                str(e.n),
                str(e.c),
                _fmt(e.pass_at.get(rep.k)),
                _interval(d.pass_at_k),
                " ".join(open_edges) or "—",
                "first round" if e.n < settings.first else ("—" if value <= 0 else f"{value:.3f}"),
                str(planned) if planned else "",
                key=str(e.version_id),
            )
        self._show_round()
        self._show_history()

    def _show_round(self) -> None:
        out = self.query_one("#calib-ledger-round", Static)
        plan, st = self.next_round, self.round_status
        text = Text()
        if st is not None and self._round_stop is not None:
            text.append(f"Running {self.round_batch}: {st.line()}\n", style="bold cyan")
        elif st is not None and self.round_batch:
            text.append(f"Last round {self.round_batch}: {st.line()}\n", style="dim")
        if plan is None:
            pass
        elif plan.stopped:
            text.append(f"No round to run: {plan.stopped}.", style="bold")
        elif not plan.attempts:
            text.append("No round to run now: the undecided tasks have episodes in flight.")
        else:
            kind = "first round (topping up thin tasks)" if plan.first_round else "next round"
            text.append(
                f"Another round would cost {counted(plan.episodes, 'episode')} on "
                f"{counted(len(plan.attempts), 'task')} "
                f"({kind}, up to {self.round_settings.max_k if self.round_settings else DEFAULT_MAX_K} "
                "per task); ",
                style="bold",
            )
            text.append("press a to run it (bandpass run --model M --adaptive runs rounds to the end).")
        out.update(text)

    def _show_history(self) -> None:
        out = self.query_one("#calib-ledger-history", Static)
        table = self.query_one("#calib-ledger-table", DataTable)
        if self.report is None or table.row_count == 0:
            out.update("")
            return
        try:
            key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        except CellDoesNotExist:
            out.update("")
            return
        name = next((e.task for e in self.report.estimates if str(e.version_id) == key), None)
        if name is None:
            out.update("")
            return
        rows = task_history(self.workspace, name)
        text = Text(f"Band history of {name} (the ledger, oldest first)\n", style="bold")
        for r in rows[-12:]:
            step = f" @{r.checkpoint_step}" if r.checkpoint_step is not None else ""
            text.append(
                f"  {r.created_at:%Y-%m-%d %H:%M}  {r.model}{step}  {r.decision:<9} "
                f"pass@{r.k} in [{r.pass_lo:.2f}, {r.pass_hi:.2f}] at {r.confidence:.0%}  "
                f"n={r.n} c={r.c}  ({r.source})\n"
            )
        if not rows:
            text.append("  (nothing recorded yet)")
        out.update(text)

    def action_run_round(self) -> None:
        rep, plan, settings = self.report, self.next_round, self.round_settings
        if self._round_stop is not None:
            self.notify("A round is already running.", severity="warning")
            return
        if rep is None or plan is None or settings is None:
            self.notify("Choose a model first.", severity="warning")
            return
        if not plan.attempts:
            self.notify(plan.stopped or "Nothing to run now.", severity="warning")
            return
        self.app.push_screen(
            ConfirmDialog(self._round_question(rep, plan), yes="run the round", no="start nothing"),
            partial(self._round_confirmed, rep.model, plan),
        )

    def _round_question(self, rep: CalibrationReport, plan: Plan) -> str:
        """What ``a`` is about to spend, said before it is spent: episodes cost containers and GPU time."""
        from ...engine.app.executors import default_concurrency

        model = rep.model
        try:
            cfg = self.workspace.config.models[model]
            where = f" at {cfg.base_url}"
        except (ConfigError, KeyError):  # a broken bandpass.toml, an unknown model: the start says why
            where = ""
        names = [e.task for e in rep.estimates if e.version_id in plan.attempts]
        listed = ", ".join(names[:8]) + (f" … and {len(names) - 8} more" if len(names) > 8 else "")
        kind = "a first round" if plan.first_round else "an adaptive round"
        out = ", ".join(self.round_rejected)
        left = f" Left out, rejected by their audit: {out}." if out else ""
        eps, tasks = plan.episodes, len(plan.attempts)
        return (
            f"Run {kind} of model {model}{where}: {eps} episode{'s' * (eps != 1)} on "
            f"{tasks} task{'s' * (tasks != 1)} ({listed}), {default_concurrency()} at a time on this "
            f"machine's Docker engine?{left}"
        )

    def _round_confirmed(self, model: str, plan: Plan, yes: bool | None) -> None:
        rep = self.report
        if not yes or rep is None or rep.model != model or self._round_stop is not None:
            return  # declined, or the model changed / a round started while the question was open
        self._round_stop = threading.Event()
        self.round_status = None
        self._run_round(model, list(self.round_versions), self._settings(rep, budget=plan.episodes))

    @work(thread=True, group="calib-round")
    def _run_round(self, model: str, version_ids: list[int], settings: AdaptiveSettings) -> None:
        from ...engine.app.adaptive import run_adaptive
        from ...engine.app.executors import ExecutorChoice, default_concurrency, make_executor

        ws = self.workspace
        stop = self._round_stop
        try:
            sampler = batches.start_round(ws, model, version_ids, settings)  # a dead endpoint: refused
            self.round_batch = sampler.batch_id
            sampler.on_round = lambda st: self._ui.call(self._round_progress, st)
            self._ui.call(self._round_progress, sampler.status)
            _summary, status = run_adaptive(
                ws,
                sampler,
                executor=make_executor(ExecutorChoice("local", default_concurrency())),
                bus=bandpass_app(self).bus,
                stop=stop,
                on_progress=lambda _sm: self._ui.call(self._round_progress, sampler.refresh()),
            )
            self._ui.call(self._round_progress, status)
            self._ui.call(
                partial(self.notify, f"{sampler.batch_id}: {status.line()}", title="Round finished")
            )
        except BandpassError as exc:  # a dead endpoint, no Docker engine: the curator's notification
            show_refusal(self, exc, title="Round failed", timeout=20, named=True, escape=True)
        finally:
            self._ui.call(self._round_done)

    def _round_progress(self, status: AdaptiveStatus) -> None:
        self.round_status = status
        self._show_round()

    def _round_done(self) -> None:
        self._round_stop = None
        self._refresh_report()

    def _refresh_comparison(self) -> None:
        policy, _ = self._models()
        with_episodes = set(reads.episode_agents(self.workspace))
        models = [m for m in policy if m in with_episodes]
        head = self.query_one("#calib-cmp-head", Static)
        heatmap = self.query_one("#calib-heatmap", PassHeatmap)
        if not models:
            self.comparison = None
            heatmap.clear(columns=True)
            head.update("No policy model has episodes yet.")
            self.query_one("#calib-leavers", Static).update("")
            return
        config = batches.config_or_none(self.workspace)
        cmp = compare(self.workspace, models, self._params(), config=config)  # per-model bands
        self.comparison = cmp
        p = cmp.params
        head.update(
            Text(
                f"pass@{cmp.k} across {counted(len(models), 'model')}, each on its own band (default "
                f"[{p.lo:g}, {p.hi:g}]), min samples "
                f"{p.min_samples}, decided at {p.confidence:.0%}   ● in band  ▲ above (saturated)  "
                "▼ below (too hard)  ? undecided   "
                "Enter/click: open that model's report",
                style="bold",
            )
        )
        heatmap.show(cmp)
        self._show_cell()
        leavers = Text()
        if cmp.leavers:
            leavers.append("Left the band (beyond noise)\n", style="bold")
            for lv in cmp.leavers:
                kind = "saturated" if lv.kind == SATURATED else "too hard"
                leavers.append(f"  {lv.task}: {lv.before} → {lv.after}  {kind}  ", style="")
                leavers.append(f"{_fmt(lv.pass_before)} → {_fmt(lv.pass_after)}\n", style="dim")
        else:
            leavers.append("No task left the band beyond noise between consecutive models.")
        for pt in cmp.paired:
            leavers.append(
                f"\n{pt.before} → {pt.after}: {pt.improved} fail→pass, {pt.regressed} pass→fail over "
                f"{pt.pairs} paired episodes of {pt.tasks} tasks, McNemar p = {pt.p_value:.3g}: {pt.verdict}",
                style={"better": "green", "worse": "red"}.get(pt.verdict, "dim"),
            )
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
            f"pass@{cmp.k}={_fmt(c.pass_at_k)} in {_interval(c.interval)} band={c.band}"
        )

    def on_data_table_cell_highlighted(self, event: DataTable.CellHighlighted) -> None:
        if event.data_table.id == "calib-heatmap":
            self._show_cell()

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id == "calib-ledger-table":
            self._show_history()

    def on_pass_heatmap_cell_chosen(self, event: PassHeatmap.CellChosen) -> None:
        self.query_one("#calib-model", Select).value = event.model
        self.action_show_tab("calib-tab-report")

    def action_back(self) -> None:
        go_back(self)
