"""Tasks screen: every task's latest version with its audit verdict, pass@k for one model and band status.

Built to stay responsive at 10,000+ tasks: the store is read in a worker thread (never on the UI thread),
the table is a Line-API :class:`~tui.widgets.virtual_table.VirtualTable` that paints only visible rows,
and search/filter/sort are list operations over pre-formatted rows (milliseconds for 10k). The detail
pane (instruction, files, audits, episodes) loads the highlighted task in a worker after a short pause in
cursor movement, so holding the arrow key never queues thousands of reads.

The rows the filter leaves visible are published as ``app.task_scope`` so the Runs screen can start a
batch over exactly what the curator is looking at.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.css.query import NoMatches
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, Input, Select, Static

from ...engine.app import reads
from ...engine.core.config import BandConfig, ConfigError
from ...engine.core.errors import BandpassError
from ...engine.core.outcomes import reward_label
from ...engine.core.workspace import Workspace
from ..errors import Guarded, show_refusal
from ..typed_app import bandpass_app
from ..widgets.backoff import Backoff
from ..widgets.virtual_table import Column, VirtualTable, numeric_key
from ..worker_answer import dropped_once_gone
from .confirm import ConfirmDialog

#: Audits in flight: looked at a second after the store changed, backing off to 4 s while it is quiet.
AUDITS_LOOK_S = 1.0
AUDITS_CEILING_S = 4.0

_VERDICT_STYLE = {
    "accepted": "virtual-table--good",
    "rejected": "virtual-table--bad",
    "warning": "virtual-table--warn",
    "could not": "virtual-table--muted",  # could_not_audit, in the column's 9 characters
}
_AUDIT_LABEL = {"could_not_audit": "could not"}
_BAND_STYLE = {"in": "virtual-table--good", "below": "virtual-table--warn", "above": "virtual-table--warn"}

COLUMNS = [
    # priority: 0 always shown; higher numbers drop out first on a narrow terminal (virtual_table.py)
    Column("task", "task", 28, min_width=15),
    Column("category", "category", 12, priority=3, min_width=8),
    Column("difficulty", "difficulty", 10, priority=4),
    Column("audit", "audit", 9, styler=lambda t: _VERDICT_STYLE.get(t, "virtual-table--muted")),
    Column("pass", "pass@k", 7, align="right", sort_key=numeric_key),
    Column("n", "n", 4, align="right", sort_key=numeric_key, priority=1),
    Column(
        "infra",
        "infra",
        5,
        priority=0,  # infra errors are never out of sight
        align="right",
        sort_key=numeric_key,
        styler=lambda t: "virtual-table--bad" if t not in ("0", "") else "",
    ),
    Column(  # grown first: "undeci…" at 160 columns named no band
        "band",
        "band",
        9,
        min_width=7,
        grow_first=True,
        styler=lambda t: _BAND_STYLE.get(t, "virtual-table--muted"),
    ),
    Column("tags", "tags", 5, align="right", sort_key=numeric_key, priority=2),
    Column(
        "blocking",
        "block",
        5,
        priority=1,
        align="right",
        sort_key=numeric_key,
        styler=lambda t: "virtual-table--bad" if t not in ("0", "") else "",
    ),
]
_IDX = {c.key: i for i, c in enumerate(COLUMNS)}

ALL = "__all__"


@dataclass
class TasksData:
    """What one load produced, handed from the worker to the UI thread in one piece."""

    rows: list[tuple[int, tuple[str, ...]]]
    models: list[str]
    model: str | None
    k: int
    seconds: float


def load_tasks(ws: Workspace, model: str | None) -> TasksData:
    """Reads every task row and, for ``model``, pass@k and band status. Runs in a worker thread."""
    import time

    from ...engine.app import calibration
    from ...engine.app.batches import BUILTIN

    started = time.perf_counter()
    try:
        band = ws.config.band
        lo, hi, k, min_samples = band.lo, band.hi, band.k, band.min_samples
        configured = list(ws.config.models)
    except ConfigError:  # a broken bandpass.toml must not hide the tasks; Settings shows the error
        band, configured = BandConfig(), []
        lo, hi, k, min_samples = band.lo, band.hi, band.k, band.min_samples
    rows, seen = reads.task_rows_and_agents(ws)
    models = sorted(set(seen) | set(configured))
    if model is None or model not in models:
        # A policy model is what pass@k is for; built-in audit agents (oracle, nop, cheats) come last.
        policies = [a for a in seen if a not in BUILTIN]
        model = configured[0] if configured else next(iter(policies or seen), None)
    ests: dict[int, Any] = {}
    if model is not None:
        ests = {e.version_id: e for e in calibration.estimates(ws, model, (1, k))}
    out: list[tuple[int, tuple[str, ...]]] = []
    for r in rows:
        e = ests.get(r.version_id)
        p = e.pass_at.get(k) if e is not None else None
        band_s = (
            calibration.band_status(e, lo, hi, min_samples, k, band.confidence)
            if e is not None
            else "undecided"
        )
        out.append(
            (
                r.version_id,
                (
                    r.name,
                    r.category or "—",
                    r.difficulty or "—",
                    _AUDIT_LABEL.get(r.audit, r.audit) or "—",
                    "—" if p is None else f"{p:.2f}",
                    str(e.n) if e is not None else "0",
                    str(e.infra_errors) if e is not None else "0",
                    band_s,
                    str(r.tags),
                    str(r.blocking_tags),
                ),
            )
        )
    return TasksData(out, models, model, k, time.perf_counter() - started)


def _verification_lines(v: Any, has_solution: bool) -> list[str]:
    """Where the version is verified, why, who learnt it, and the artifacts it adopted from its oracle's
    footprint (engine/audit/adoption.py)."""
    fp = json.loads(getattr(v, "footprint_json", "") or "{}")
    adopted = json.loads(getattr(v, "adopted_artifacts_json", "") or "[]")
    if not fp:
        if not has_solution:
            return [
                "  [yellow]unproven[/yellow] [dim](no solution/solve.sh: no oracle shows where it runs)[/dim]"
            ]
        return ["  not learnt yet [dim](the audit or the first rollout learns it from the oracle)[/dim]"]
    mode = str(v.verify_mode or fp.get("mode") or "").replace("_", " ")
    by = f"learnt by the {fp['source']}" if fp.get("source") else ""
    out = [
        f"  [b]{escape(mode)}[/b]  [dim]{escape(by)}[/dim]",
        f"  [dim]{escape(str(fp.get('why', '')))}[/dim]",
    ]
    if adopted:
        out.append(
            "  adopted artifacts [dim](carried into the clean room, declared in exported task.toml)[/dim]"
        )
        out += [f"    [yellow]{escape(a)}[/yellow]" for a in adopted]
    return out


def _audit_phases(details_json: str) -> str:
    """An audit's phase times and cost, one dim line (engine/audit/phases.py); "" for older audits."""
    try:
        checks = json.loads(details_json or "{}")
    except ValueError:
        return ""
    phases, cost = checks.get("phases") or {}, checks.get("cost") or {}
    if not phases:
        return ""
    times = " · ".join(f"{k} {v:.0f}s" for k, v in phases.items())
    oee = cost.get("oracle_equivalents")
    return f"\n    [dim]{escape(times)}" + (f" · {oee:g} oracle-episode eq.[/dim]" if oee else "[/dim]")


def load_detail(ws: Workspace, version_id: int) -> str:
    """Rich markup for the detail pane: instruction, files, audits, episodes. Runs in a worker thread."""
    detail = reads.task_detail(ws, version_id)
    if detail is None:
        return "[b]gone[/b]: this version no longer exists (refresh with r)"
    v, task = detail.version, detail.task
    name, path, instruction, h = (task.name if task else "?"), v.path, v.instruction, v.hash
    aliases = json.loads(v.image_aliases_json or "[]")
    warnings = json.loads(v.warnings_json or "[]")
    unsupported = json.loads(v.unsupported_json or "[]")
    source = task.source_path if task else ""
    audit_lines = [
        f"  {a.created_at:%Y-%m-%d %H:%M}  [b]{escape(a.verdict)}[/b]  "
        + escape(", ".join(json.loads(a.reasons_json)) or "no findings")
        + _audit_phases(a.details_json)
        for a in detail.audits[:10]
    ]
    ep_lines = [
        f"  #{e.id:<5} {escape(e.agent)} · {escape(e.outcome or e.status)}"
        + (f" · reward {escape(reward_label(e.outcome, e.reward))}" if e.outcome else "")
        for e in detail.episodes[-30:]
    ]
    root = ws.abs(path)
    files: list[str] = []
    if root.is_dir():
        for p in sorted(root.rglob("*")):
            if p.is_file() and len(files) < 60:
                files.append(f"  {escape(str(p.relative_to(root)))}  [dim]{p.stat().st_size} B[/dim]")
    else:
        files.append(f"  [red]missing[/red] {escape(path)} [dim](in the workspace)[/dim]")
    parts = [f"[b]{escape(name)}[/b]  [dim]{h[:12]}[/dim]"]
    if source:
        parts.append(f"[dim]from {escape(source)}[/dim]")
    if unsupported:
        parts += ["", "[b u]Unsupported[/b u] [dim](the audit cannot judge what it cannot run)[/dim]"]
        parts += [f"  [red]{escape(u)}[/red]" for u in unsupported]
    if warnings:
        parts += ["", f"[b u]Warnings[/b u] ({len(warnings)})"]
        parts += [f"  [yellow]{escape(w)}[/yellow]" for w in warnings]
    parts += [
        "",
        "[b u]Instruction[/b u]",
        escape(instruction.strip() or "(empty)"),
        "",
        "[b u]Files[/b u]",
        *files,
        "",
        "[b u]Audits[/b u]",
        *(audit_lines or ["  never audited (press a)"]),
    ]
    if aliases:
        parts += ["", "[b u]Image aliases[/b u] [dim](a validity risk)[/dim]"]
        parts += [f"  {escape(a)} → {escape(b)}" for a, b in aliases]
    parts += ["", f"[b u]Episodes[/b u] ({len(detail.episodes)})", *(ep_lines or ["  none yet"])]
    # where it is verified, and what it adopted from its oracle's footprint (engine/audit/adoption.py)
    parts += ["", "[b u]Verified[/b u]", *_verification_lines(v, (root / "solution" / "solve.sh").is_file())]
    return "\n".join(parts)


class TasksScreen(Guarded, Screen[None]):
    CSS_PATH = "tasks.tcss"
    #: The table, not a text field: digits switch screens (an Input would take them as text).
    AUTO_FOCUS = "#task-table"
    BINDINGS = [
        Binding("r", "refresh", "Refresh"),
        Binding("slash", "focus_search", "Search"),
        Binding("s", "sort_next", "Sort"),
        Binding("S", "sort_reverse", "Reverse sort", show=False),
        Binding("d", "toggle_detail", "Detail"),
        Binding("a", "audit", "Audit task"),
        Binding("escape", "clear_search", "Clear search", show=False),
    ]

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace
        self.model: str | None = None
        self.k = 2
        self._detail_timer: Timer | None = None
        self.last_load_s: float | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="tasks-bar"):
            yield Input(placeholder="search name, category, difficulty…  (/)", id="task-search")
            yield Select(
                [
                    ("any audit", ALL),
                    ("accepted", "accepted"),
                    ("rejected", "rejected"),
                    ("warning", "warning"),
                    ("could not audit", "could not"),
                    ("never audited", "—"),
                ],
                value=ALL,
                allow_blank=False,
                id="task-audit-filter",
            )
            yield Select(
                [
                    ("any band", ALL),
                    ("in band", "in"),
                    ("below", "below"),
                    ("above", "above"),
                    ("undecided", "undecided"),
                ],
                value=ALL,
                allow_blank=False,
                id="task-band-filter",
            )
            yield Select([], prompt="model for pass@k", id="task-model")
        with Horizontal(id="tasks-main"):
            yield VirtualTable(COLUMNS, id="task-table")
            with VerticalScroll(id="task-detail"):
                yield Static(
                    "Highlight a task to see its instruction, files, audits and episodes.",
                    id="task-detail-body",
                )
        yield Static("", id="task-audits")
        yield Static("loading…", id="task-summary")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.query_one(VirtualTable).focus()
        self._seen_changes = getattr(self.app, "tasks_changed", 0)
        self._audits_shown: tuple[tuple[str, str, str], ...] = ()
        self.action_refresh()
        # audits running anywhere (this screen's, a `bandpass audit` in a terminal, a cluster's): live while
        # the screen is shown, read only after a commit to the store (an idle app stays idle: issue #45)
        self._audit_commits = reads.commit_watch(self.workspace)
        self._audit_delay = Backoff(AUDITS_LOOK_S, AUDITS_CEILING_S)
        self._audit_timer: Timer | None = None
        self._poll_audits()
        self._watch_audits(AUDITS_LOOK_S)

    def on_unmount(self) -> None:
        self._audit_commits.close()

    def on_screen_suspend(self) -> None:
        """Left (another area, a dialog on top): the audits in flight are not watched meanwhile."""
        if self._audit_timer is not None:
            self._audit_timer.stop()
            self._audit_timer = None

    # --- audits in flight --- #

    def _look_audits(self) -> None:
        """Reads the audits in flight if anything was committed since the last look (microseconds when
        not), then waits: a second after a change, up to ``AUDITS_CEILING_S`` while the store is quiet."""
        changed = self._audit_commits.changed()
        if changed:
            self._poll_audits()
        self._watch_audits(self._audit_delay.after(changed))

    def _watch_audits(self, delay: float) -> None:
        if self._audit_timer is not None:
            self._audit_timer.stop()
        self._audit_timer = self.set_timer(delay, self._look_audits)

    @work(thread=True, exclusive=True, group="tasks-audits-poll")
    def _poll_audits(self) -> None:
        from ...engine.app.audit import audits_in_flight

        expected: tuple[type[Exception], ...] = (BandpassError, *reads.UNREADABLE)
        try:
            flying = audits_in_flight(self.workspace)
        except expected:  # a database being migrated or locked: the next poll tries again
            return
        shown = tuple((a.task, a.phase, a.node) for a in flying)
        self.app.call_from_thread(self._show_audits, shown)

    @dropped_once_gone
    def _show_audits(self, shown: tuple[tuple[str, str, str], ...]) -> None:
        finished = bool(self._audits_shown) and len(shown) < len(self._audits_shown)
        self._audits_shown = shown
        line = self.query_one("#task-audits", Static)
        line.display = bool(shown)
        if shown:
            parts = [
                f"[b]{escape(t)}[/b] {escape(p)}" + (f" [dim]({escape(n)})[/dim]" if n else "")
                for t, p, n in shown
            ]
            line.update(f"auditing {len(shown)}: " + " · ".join(parts))
        if finished:
            self.action_refresh()  # a verdict landed: the audit column changes

    def on_screen_resume(self) -> None:
        changes = getattr(self.app, "tasks_changed", 0)
        if changes != getattr(self, "_seen_changes", changes):
            self._seen_changes = changes
            self.action_refresh()
        if getattr(self, "_audit_timer", False) is None:  # shown again: look at once, then keep watching
            self._audit_delay.reset()
            self._look_audits()

    # --- loading --- #

    def action_refresh(self) -> None:
        self.query_one("#task-summary", Static).update("loading tasks…")
        self._load(self.model)

    @work(thread=True, exclusive=True, group="tasks-load")
    def _load(self, model: str | None) -> None:
        expected: tuple[type[Exception], ...] = (BandpassError, *reads.UNREADABLE)
        try:
            data = load_tasks(self.workspace, model)
        except expected as exc:  # a refusal, a database that cannot be read
            show_refusal(self, exc, title="Could not load tasks", named=True)
            return
        self.app.call_from_thread(self._loaded, data)

    @dropped_once_gone
    def _loaded(self, data: TasksData) -> None:
        self.model, self.k, self.last_load_s = data.model, data.k, data.seconds
        table = self.query_one(VirtualTable)
        table.columns[_IDX["pass"]].label = f"pass@{data.k}"
        table.set_rows(data.rows)
        select = self.query_one("#task-model", Select)
        with select.prevent(Select.Changed):
            select.set_options([(m, m) for m in data.models])
            if data.model is not None:
                select.value = data.model
        self._apply_filter()

    # --- filtering --- #

    @on(Input.Changed, "#task-search")
    @on(Select.Changed, "#task-audit-filter")
    @on(Select.Changed, "#task-band-filter")
    def _filter_changed(self) -> None:
        self._apply_filter()

    @on(Select.Changed, "#task-model")
    def _model_changed(self, event: Select.Changed) -> None:
        if isinstance(event.value, str) and event.value != self.model:
            self.model = event.value
            self.action_refresh()

    def _apply_filter(self) -> None:
        needle = self.query_one("#task-search", Input).value.strip().lower()
        audit = self.query_one("#task-audit-filter", Select).value
        band = self.query_one("#task-band-filter", Select).value
        ia, ib = _IDX["audit"], _IDX["band"]
        terms = needle.split()

        def keep(row: tuple[str, ...]) -> bool:
            if audit != ALL and row[ia] != audit:
                return False
            if band != ALL and row[ib] != band:
                return False
            if terms:
                hay = f"{row[0]} {row[1]} {row[2]} {row[ia]}".lower()
                return all(t in hay for t in terms)
            return True

        table = self.query_one(VirtualTable)
        table.set_filter(keep if (terms or audit != ALL or band != ALL) else None)
        bandpass_app(self).task_scope = [k for k, _ in table._shown]
        load = f" · loaded in {self.last_load_s:.2f} s" if self.last_load_s is not None else ""
        model = f" · pass@{self.k} for {self.model}" if self.model else " · no policy model yet"
        self.query_one("#task-summary", Static).update(
            f"{table.row_count} of {table.total_count} task{'s' * (table.total_count != 1)}{model}{load}"
        )

    @on(Input.Submitted, "#task-search")
    def _search_submitted(self) -> None:
        self.query_one(VirtualTable).focus()

    def action_focus_search(self) -> None:
        self.query_one("#task-search", Input).focus()

    def action_clear_search(self) -> None:
        self.query_one("#task-search", Input).value = ""
        self.query_one(VirtualTable).focus()

    # --- sorting --- #

    def action_sort_next(self) -> None:
        table = self.query_one(VirtualTable)
        nxt = 0 if table.sort_column is None else (table.sort_column + 1) % len(COLUMNS)
        table.sort_by(nxt, reverse=False)

    def action_sort_reverse(self) -> None:
        table = self.query_one(VirtualTable)
        table.sort_by(table.sort_column or 0, reverse=not table.sort_reverse)

    # --- detail pane --- #

    def action_toggle_detail(self) -> None:
        pane = self.query_one("#task-detail")
        pane.display = not pane.display

    @on(VirtualTable.RowHighlighted)
    def _highlighted(self, event: VirtualTable.RowHighlighted) -> None:
        if self._detail_timer is not None:
            self._detail_timer.stop()
        if event.key is not None:
            self._detail_timer = self.set_timer(0.12, lambda: self._load_detail(event.key))

    @work(thread=True, exclusive=True, group="tasks-detail")
    def _load_detail(self, version_id: int) -> None:
        try:
            text = load_detail(self.workspace, version_id)
        except (BandpassError, OSError) as exc:  # an invalid task, its folder gone
            text = f"[red]could not read this task:[/red] {escape(str(exc))}"
        self.app.call_from_thread(self._show_detail, version_id, text)

    def _show_detail(self, version_id: int, text: str) -> None:
        """Drops a stale result: a slower read for a row the cursor has already left must not win, nor
        one that arrives after the screen closed (quitting while a read is under way)."""
        try:
            table, body = self.query_one(VirtualTable), self.query_one("#task-detail-body", Static)
        except NoMatches:
            return
        if table.cursor_key == version_id:
            body.update(text)

    @on(VirtualTable.RowSelected)
    def _selected(self, event: VirtualTable.RowSelected) -> None:
        pane = self.query_one("#task-detail")
        pane.display = True
        pane.focus()

    # --- actions on the highlighted task --- #

    def action_open_replay(self) -> None:
        """Replays the highlighted task's latest finished episode."""
        vid = self.query_one(VirtualTable).cursor_key
        if vid is None:
            self.notify("No task highlighted.", severity="warning")
            return
        done = reads.finished_episode_ids(self.workspace, vid)
        if not done:
            self.notify("This task has no finished episode yet.", severity="warning")
            return
        bandpass_app(self).open_replay(done[-1])

    def action_audit(self) -> None:
        vid = self.query_one(VirtualTable).cursor_key
        if vid is None:
            self.notify("No task highlighted.", severity="warning")
            return
        name = next((row[0] for k, row in self.query_one(VirtualTable)._shown if k == vid), "this task")

        def answer(yes: bool | None) -> None:
            if yes:
                self.notify("Audit started: build, oracle, nop, cheat probes, reruns…", title="Audit")
                self._audit(vid)

        # an audit builds the task's image and runs its probes in Docker containers: minutes, asked first
        self.app.push_screen(
            ConfirmDialog(
                f"Audit {name}? It builds the task's image and runs the oracle, nop and cheat probes and "
                "their reruns in Docker containers on this machine (minutes).",
                yes="audit",
                no="start nothing",
            ),
            answer,
        )

    @work(thread=True, group="tasks-audit")
    def _audit(self, version_id: int) -> None:
        from docker.errors import DockerException

        from ...engine.app.audit import plan_audits, run_audits, run_reports

        try:  # a run of one, so its phase shows live above the summary like any other audit's
            run_id = plan_audits(self.workspace, [version_id])
            run_audits(self.workspace, run_id, concurrency=1, bus=getattr(self.app, "bus", None))
            (report,) = run_reports(self.workspace, run_id)
        except (BandpassError, DockerException) as exc:  # no engine, an image that does not build
            show_refusal(self, exc, title="Audit failed", timeout=15, named=True)
            return
        verdict = report["verdict"]
        reasons = ", ".join(report["reasons"]) or "no findings"
        self.app.call_from_thread(
            self.notify, f"{report['task']}: {verdict} ({reasons})", title="Audit finished", timeout=10
        )
        self.app.call_from_thread(self.action_refresh)
