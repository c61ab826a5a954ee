"""Compare screen: two episodes side by side — steps aligned by content, first divergence highlighted,
both verifier outputs.

Steps are aligned by what they did (engine/review/compare.py), so a step one episode inserted shows as a
one-sided row and the steps after it line up again. The step table's cursor opens on the first divergent
row (highlighted; the "differs" column says why a row diverges: ``keystrokes``, ``screen shown`` — the
same keystrokes typed at a different screen — or a step ``only left`` / ``only right`` has; the step
column reads ``3 / 4`` where the two are aligned at different numbers); ``d`` jumps to the next
divergence; Enter replays the left episode at the step, ``R`` the right one. Under the table, both
episodes' terminals at the highlighted step, as each policy was shown them (each agent recording played
to the step's marker, in a worker: the keyframe index makes each move instant).
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from ...engine.app import reads
from ...engine.app.episodes import episode_record, why_lines
from ...engine.app.replay import (
    KEYSTROKES,
    OBSERVATION,
    ONLY_LEFT,
    ONLY_RIGHT,
    AlignedStep,
    CastError,
    KeyframeIndex,
    align,
    keys_text,
    read_cast,
)
from ...engine.core.workspace import Workspace
from ..errors import Guarded
from ..navigation import go_back
from ..widgets.terminal_view import TerminalView

DIVERGED = "bold reverse"
MARKS = {ONLY_LEFT: "−", ONLY_RIGHT: "+"}
#: Why a row diverges, in the table's "differs" column.
WHY = {
    KEYSTROKES: "keystrokes",
    OBSERVATION: "screen shown",
    ONLY_LEFT: "only left",
    ONLY_RIGHT: "only right",
}
SIDES = ("left", "right")


class CompareScreen(Guarded, Screen[None]):
    CSS_PATH = "compare.tcss"
    BINDINGS = [
        Binding("d", "next_divergence", "Next divergence"),
        Binding("enter", "replay('left')", "Replay left"),
        Binding("R", "replay('right')", "Replay right"),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, ws: Workspace, left: int, right: int) -> None:
        super().__init__()
        self.ws = ws
        self.ids = (left, right)
        self.records = (episode_record(ws, left), episode_record(ws, right))
        left_obs, right_obs = (reads.step_observations(ws, e) for e in self.ids)
        self.rows, self.first_divergence = align(
            self.records[0]["steps"], self.records[1]["steps"], (left_obs, right_obs)
        )

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="compare-heads"):
            for side, rec in zip(("left", "right"), self.records, strict=True):
                head = [
                    f"episode {rec['episode']} · {rec['task']} · {rec['agent']}",
                    *why_lines(rec, checks=3, evidence=0),
                ]
                yield Static("\n".join(head), id=f"compare-head-{side}", classes="compare-head", markup=False)
        yield Static(self.divergence_text(), id="compare-divergence", markup=False)
        yield DataTable(id="compare-steps", cursor_type="row", zebra_stripes=True)
        with Horizontal(id="compare-terminals"):
            for side in SIDES:
                with Vertical(classes="compare-terminal"):
                    yield Static("", id=f"compare-term-head-{side}", classes="side-heading", markup=False)
                    yield TerminalView(id=f"compare-term-{side}", cols=80, rows=24)
        with Horizontal(id="compare-verifiers"):
            for side, rec in zip(("left", "right"), self.records, strict=True):
                with Vertical(classes="compare-verifier"):
                    yield Static(f"verifier output · episode {rec['episode']}", classes="side-heading")
                    with VerticalScroll():
                        yield Static(
                            rec["verifier_output_tail"] or "—", id=f"compare-out-{side}", markup=False
                        )
        yield Footer(compact=True)

    def divergence_text(self) -> str:
        if self.first_divergence is None:
            return f"the {len(self.rows)} steps match (same keystrokes, same screens)"
        r = self.rows[self.first_divergence]
        n = sum(1 for x in self.rows if x.differs)
        names = (f"episode {self.ids[0]}", f"episode {self.ids[1]}")
        return f"first divergence at {r.describe(*names)} · {n} divergent row{'s' * (n != 1)}"

    def on_mount(self) -> None:
        self.sub_title = f"episode {self.ids[0]} vs {self.ids[1]}"
        table = self.query_one(DataTable)
        # the keystrokes share what is left of the width: both stay readable at 100 columns
        keys_width = max(16, (self.app.size.width - 32) // 2)
        table.add_columns("", "step", "differs", f"episode {self.ids[0]}", f"episode {self.ids[1]}")
        for n, r in enumerate(self.rows):
            style = DIVERGED if n == self.first_divergence else ""
            table.add_row(
                Text(MARKS.get(r.why, "≠") if r.differs else "", style=style),
                Text(r.steps_label(), style=style),
                Text(WHY.get(r.why, "") if r.differs else "", style=style),
                Text(_cut(keys_text(r.left), keys_width), style=style),
                Text(_cut(keys_text(r.right), keys_width), style=style),
            )
        if self.first_divergence is not None:
            table.move_cursor(row=self.first_divergence)
        table.focus()
        self.indexes: dict[str, KeyframeIndex | None] = {}
        self._show_terminals()
        self.run_worker(self._load_casts, thread=True, group="compare-casts", exit_on_error=False)

    def _load_casts(self) -> None:
        """Runs in a worker: both agent recordings, indexed for instant seeks (missing ones are None)."""
        out: dict[str, KeyframeIndex | None] = {}
        for side, rec in zip(SIDES, self.records, strict=True):
            cast = rec["casts"].get("agent")
            index = None
            if cast and cast.get("exists"):
                try:
                    index = KeyframeIndex(read_cast(self.ws.abs(cast["path"])))
                    index.build()
                except CastError:
                    index = None
            out[side] = index
        self.app.call_from_thread(self._casts_loaded, out)

    def _casts_loaded(self, indexes: dict[str, KeyframeIndex | None]) -> None:
        self.indexes = indexes
        self._show_terminals()

    def _show_terminals(self) -> None:
        """Both terminals at the highlighted step: each agent recording at the step's marker."""
        row = self.current
        for side, eid in zip(SIDES, self.ids, strict=True):
            head = self.query_one(f"#compare-term-head-{side}", Static)
            step = (row.left if side == "left" else row.right) if row is not None else None
            if step is None:
                head.update(f"episode {eid}: no counterpart of this step")
                continue
            index = self.indexes.get(side)
            if index is None:
                loading = not self.indexes
                head.update(
                    f"episode {eid} · step {step['index']}: " + ("loading…" if loading else "no recording")
                )
                continue
            t = float(step.get("time") or 0.0)
            head.update(f"episode {eid} · step {step['index']} · the screen at {t:.1f} s")
            self.query_one(f"#compare-term-{side}", TerminalView).set_screen(index.screen_at(t))

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        if self.is_mounted:
            self._show_terminals()

    @property
    def current(self) -> AlignedStep | None:  # the highlighted row
        row = self.query_one(DataTable).cursor_row
        return self.rows[row] if 0 <= row < len(self.rows) else None

    def action_next_divergence(self) -> None:
        table = self.query_one(DataTable)
        start = table.cursor_row
        for k in range(1, len(self.rows) + 1):
            row = (start + k) % len(self.rows)
            if self.rows[row].differs:
                table.move_cursor(row=row)
                return
        self.notify("no divergence", timeout=2)

    def action_replay(self, side: str) -> None:
        from .replay import ReplayScreen

        n = 0 if side == "left" else 1
        screen = ReplayScreen(self.ws, episode_id=self.ids[n])
        cur = self.current
        step = (cur.left if n == 0 else cur.right) if cur else None
        self.app.push_screen(screen)
        if step is not None:
            t = float(step.get("time") or 0.0)

            def seek() -> None:
                if screen.player is not None:
                    screen.player.seek(t)
                    screen._seeked()  # the screen's own repaint after a seek

            self.app.call_after_refresh(seek)

    def action_back(self) -> None:
        go_back(self)


def _cut(text: str, width: int) -> str:
    return text if len(text) <= width else text[: width - 1] + "…"
