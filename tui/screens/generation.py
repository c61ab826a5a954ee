"""Generation screen: one stored generation attempt, read turn by turn.

Opened from the Generate screen's history (Enter on a row). It shows exactly what
``bandpass generations show ID`` prints — both render :func:`engine.app.generate.render_lines`
— so a curator reading an overnight batch in the TUI and one grepping the CLI see the same turns, tool
calls and results, audits, API retries, errors and message ids. An attempt still running is re-read every
two seconds until it ends.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, RichLog, Static

from ...engine.app import reads
from ...engine.app.generate import GenerationView, read_transcript, render_lines
from ...engine.app.prices import price_known
from ...engine.core.workspace import Workspace
from ..errors import Guarded
from ..navigation import go_back

REFRESH_S = 2.0


class GenerationScreen(Guarded, Screen[None]):
    CSS_PATH = "generation.tcss"
    AUTO_FOCUS = "#generation-log"
    BINDINGS = [
        Binding("escape", "back", "Back"),
        Binding("f", "toggle_full", "Full tool results"),
        Binding("r", "reload", "Reload"),
    ]

    def __init__(self, workspace: Workspace, generation_id: int) -> None:
        super().__init__()
        self.workspace = workspace
        self.generation_id = generation_id
        self.full = False
        self.reading: GenerationView | None = None
        self._refresh_timer: Timer | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        yield Static("", id="generation-title")
        yield RichLog(id="generation-log", wrap=True, markup=False, highlight=False, max_lines=20000)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        # After the first layout: a RichLog written before it knows its width wraps at 80 columns.
        self.call_after_refresh(self.action_reload)
        # re-reads only while the attempt runs: paused until a read says it does, paused again once it ended
        self._refresh_timer = self.set_interval(REFRESH_S, self._refresh_if_running, pause=True)

    def on_resize(self) -> None:
        if self.reading is not None:
            self._show()

    def _refresh_if_running(self) -> None:
        if self.reading is not None and self.reading.outcome == "running":
            self.action_reload()

    def action_toggle_full(self) -> None:
        self.full = not self.full
        self._show()

    def action_reload(self) -> None:
        g = reads.generation(self.workspace, self.generation_id)
        known = g is not None and price_known(self.workspace, g.model)
        self.reading = read_transcript(g, cost_known=known) if g is not None else None
        self._show()
        if self._refresh_timer is not None:
            running = self.reading is not None and self.reading.outcome == "running"
            (self._refresh_timer.resume if running else self._refresh_timer.pause)()

    def _show(self) -> None:
        title = self.query_one("#generation-title", Static)
        log = self.query_one("#generation-log", RichLog)
        log.clear()
        if self.reading is None:
            title.update(f"generation {self.generation_id} does not exist")
            return
        v = self.reading
        title.update(f"Generation {v.id} · {v.outcome} · {v.prompt_version} · {v.model}")
        width = log.scrollable_content_region.width or None  # wrap at the pane, not at 80 columns
        for style, line in render_lines(v, full=self.full):
            log.write(Text(line, style=style), width=width)

    def action_back(self) -> None:
        go_back(self)
