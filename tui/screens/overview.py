"""Overview screen: what this workspace holds and where to look first (``0``; the demo opens here).

The same figures as ``bandpass demo --no-tui`` (engine/calibration/overview.py), laid out as a
curator reads them: how episodes ended, where each checkpoint puts the tasks relative to the band, the
tasks that left the band, the clusters, what the guard caught, reviewer agreement, and the keys that open
each of those views. Built in a worker: a large workspace must not freeze the first screen.
"""

from __future__ import annotations

from rich.table import Table
from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static

from ...engine.app.overview import Overview, build_overview
from ...engine.core import outcomes
from ...engine.core.errors import BandpassError
from ...engine.core.workspace import Workspace
from ..errors import Guarded
from ..navigation import go_back
from ..worker_answer import dropped_once_gone

#: Where to go next, in the order the README's "first 10 minutes" walks them.
NEXT_STEPS = (
    ("8", "Episodes", "find a failed episode; enter replays it, c compares two"),
    ("7", "Tag queue", "why each failure ended (diagnosis, evidence); k shows clusters, t tags"),
    ("6", "Replay", "the episode under the cursor; [ ] jump steps, e jumps to evidence"),
    ("5", "Calibration", "the band per checkpoint, tasks that left it, and the export"),
    ("1", "Tasks", "every task with its audit verdict; 8 there lists the task's episodes"),
    ("2", "Runs", "start a batch (local or Ray); recent batches with their outcomes"),
    ("3", "Generate", "Claude writes tasks; each attempt turn by turn"),
    ("?", "Help", "every key of the screen you are on"),
)


def _outcomes_table(ov: Overview) -> Table:
    t = Table(title="How episodes ended", title_justify="left", expand=False, show_edge=False)
    t.add_column("outcome")
    t.add_column("episodes", justify="right")
    for outcome, n in ov.outcomes.items():
        style = (
            "green"
            if outcome == "passed"
            else "yellow"
            if outcomes.is_agent_error(outcome)
            else "magenta"
            if outcomes.is_infra(outcome)
            else ""
        )
        t.add_row(Text(outcome or "(none)", style=style), str(n))
    return t


def _band_table(ov: Overview) -> Table:
    lo, hi = ov.band
    title = f"The band: pass@{ov.k} in [{lo:g}, {hi:g}], decided at {ov.confidence:.0%} confidence"
    t = Table(title=title, title_justify="left", expand=False, show_edge=False)
    t.add_column("checkpoint")
    t.add_column("below", justify="right")
    t.add_column("in", justify="right", style="green")
    t.add_column("above", justify="right")
    t.add_column("undecided", justify="right", style="dim")
    t.add_column("exportable", justify="right", style="bold")
    # the figure the walkthrough quotes ("mean pass@2 moves from 50% to 63%"), as `demo --no-tui` prints it
    t.add_column(f"mean pass@{ov.k}", justify="right")
    t.add_column("pass@k: 0 … 1 (tasks per bin; band in green)")
    top = max((n for m in ov.models for _label, n in m.histogram), default=0)
    for m in ov.models:
        step = f" (step {m.checkpoint_step})" if m.checkpoint_step is not None else ""
        bars = _histogram(m.histogram, lo, hi, top)
        b = m.band
        t.add_row(
            f"{m.model}{step}",
            str(b["below"]),
            str(b["in"]),
            str(b["above"]),
            str(b["undecided"]),
            str(m.exportable),
            "—" if m.mean_pass_at_k is None else f"{100 * m.mean_pass_at_k:.0f}%",
            bars,
        )
    return t


_BLOCKS = " ▁▂▃▄▅▆▇█"


def _histogram(bins: list[tuple[str, int]], lo: float, hi: float, top: int) -> Text:
    """One character per bin (``= 0``, the ten tenths, ``= 1``), its height the task count; bins inside
    the band in green. Twelve columns: the whole distribution on one line of the table."""
    out = Text("0 ", style="dim")
    edges = [0.0, *(i / 10 for i in range(10)), 1.0]  # each bin's lower edge; the last is "= 1"
    for (label, n), edge in zip(bins, edges, strict=False):
        inside = (lo <= edge <= hi) if label.startswith("=") else (lo <= edge and edge + 0.1 <= hi + 1e-9)
        ch = _BLOCKS[max(1, round(8 * n / top))] if n and top else "·"
        out.append(ch, style=("green" if inside else "cyan") if n else "dim")
    out.append(" 1", style="dim")
    return out


def _findings(ov: Overview) -> Text:
    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:.0f}%"

    out = Text()
    for lv in ov.left_band:
        out.append("left the band  ", style="bold")
        out.append(f"{lv['task']}: {lv['from']} → {lv['to']} ({lv['kind']})\n")
    out.append("clusters       ", style="bold")
    out.append(
        f"{ov.clusters} with 2+ members, {ov.clustered_failures} failure{'s' * (ov.clustered_failures != 1)}"
        f" (largest {ov.largest_cluster})\n"
    )
    out.append("tamper guard   ", style="bold")
    out.append(f"{ov.guard_caught} episode{'s' * (ov.guard_caught != 1)} caught forging the verifier\n")
    out.append("curation       ", style="bold")
    out.append(
        f"{ov.tags} curator tag{'s' * (ov.tags != 1)}; {ov.reviews} Claude review{'s' * (ov.reviews != 1)}:"
        " class agreement with curators "
        f"{pct(ov.review_agreement)}, deterministic diagnosis {pct(ov.diagnosis_agreement)}\n"
    )
    out.append("diagnoses      ", style="bold")
    out.append(", ".join(f"{c} {n}" for c, n in ov.diagnoses.items()) or "none yet")
    return out


def _next_steps() -> Table:
    t = Table(title="What to press next", title_justify="left", show_header=False, show_edge=False)
    t.add_column("key", style="bold reverse")
    t.add_column("view", style="bold")
    t.add_column("what you see")
    for key, view, what in NEXT_STEPS:
        t.add_row(f" {key} ", view, what)
    return t


class OverviewScreen(Guarded, Screen[None]):
    CSS_PATH = "overview.tcss"
    BINDINGS = [Binding("r", "refresh", "Refresh"), Binding("escape", "back", "Back", show=False)]

    def action_back(self) -> None:
        """Escape: back to the area the Overview was opened from (Tasks when none: navigation.go_back)."""
        go_back(self)

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace
        self.overview: Overview | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with VerticalScroll(id="overview-body"):
            yield Static("Reading the workspace…", id="overview-headline")
            with Horizontal(id="overview-top"):
                yield Static(id="overview-outcomes")
                yield Static(_next_steps(), id="overview-next")
            yield Static(id="overview-band")
            yield Static(id="overview-findings")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.action_refresh()

    def on_screen_resume(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        self._load()

    @work(thread=True, exclusive=True, group="overview")
    def _load(self) -> None:
        try:
            ov = build_overview(self.workspace)
        except BandpassError as exc:  # e.g. a broken bandpass.toml: shown on the screen, never a crash
            self.app.call_from_thread(self._show_error, exc)
            return
        self.app.call_from_thread(self._show, ov)

    def _show_error(self, exc: Exception) -> None:
        self.query_one("#overview-headline", Static).update(Text(f"Cannot read the workspace: {exc}", "red"))

    @dropped_once_gone
    def _show(self, ov: Overview) -> None:
        self.overview = ov
        audits = ", ".join(f"{n} {v}" for v, n in ov.audits.items())
        self.query_one("#overview-headline", Static).update(
            Text.assemble(
                (f"{ov.tasks} task{'s' * (ov.tasks != 1)}", "bold"),
                f" (audits: {audits})   ",
                (f"{ov.episodes} episode{'s' * (ov.episodes != 1)}", "bold"),
                f" of {len(ov.models)} policy checkpoint{'s' * (len(ov.models) != 1)} and the audit's probes",
            )
        )
        self.query_one("#overview-outcomes", Static).update(_outcomes_table(ov))
        self.query_one("#overview-band", Static).update(
            _band_table(ov) if ov.models else Text("No policy episodes yet: run a batch (2, Runs).", "dim")
        )
        self.query_one("#overview-findings", Static).update(_findings(ov))
