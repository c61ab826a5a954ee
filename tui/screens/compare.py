"""Compare screen: two episodes side by side — steps aligned by content, first divergence highlighted,
both verifier outputs.

Steps are aligned by what they did (engine/review/compare.py), so a step one episode inserted shows as a
one-sided row and the steps after it line up again. The step table's cursor opens on the first divergent
row (highlighted; ``≠``: different keystrokes or a different screen, ``+``/``−``: a step only the right /
left episode has; the step column reads ``3 / 4`` where the two are aligned at different numbers); ``d``
jumps to the next divergence; Enter replays the left episode at the step, ``R`` the right one.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from engine.core.workspace import Workspace
from engine.review.compare import ONLY_LEFT, ONLY_RIGHT, AlignedStep, align, keys_text
from engine.review.evidence import episode_record, why_lines
from store import queries
from store.db import session

DIVERGED = "bold reverse"
MARKS = {ONLY_LEFT: "−", ONLY_RIGHT: "+"}


class CompareScreen(Screen[None]):
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
        with session(ws.engine) as s:
            obs = tuple({st.index: st.observation for st in queries.steps(s, e)} for e in self.ids)
        self.rows, self.first_divergence = align(self.records[0]["steps"], self.records[1]["steps"], obs)  # type: ignore[arg-type]

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
        with Horizontal(id="compare-verifiers"):
            for side, rec in zip(("left", "right"), self.records, strict=True):
                with Vertical(classes="compare-verifier"):
                    yield Static(f"verifier output · episode {rec['episode']}", classes="side-heading")
                    with VerticalScroll():
                        yield Static(
                            rec["verifier_output_tail"] or "—", id=f"compare-out-{side}", markup=False
                        )
        yield Footer()

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
        table.add_columns("", "step", f"episode {self.ids[0]}", f"episode {self.ids[1]}")
        for n, r in enumerate(self.rows):
            style = DIVERGED if n == self.first_divergence else ""
            table.add_row(
                Text(MARKS.get(r.why, "≠") if r.differs else "", style=style),
                Text(r.steps_label(), style=style),
                Text(keys_text(r.left)[:70], style=style),
                Text(keys_text(r.right)[:70], style=style),
            )
        if self.first_divergence is not None:
            table.move_cursor(row=self.first_divergence)
        table.focus()

    @property
    def current(self) -> AlignedStep | None:
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
        from tui.screens.replay import ReplayScreen

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
                    screen._seeked()  # noqa: SLF001 - the screen's own repaint after a seek

            self.app.call_after_refresh(seek)

    def action_back(self) -> None:
        self.dismiss(None)
