"""SearchBar: the query line under Replay's terminal (``/``), and where the current match is (``n``/``N``).

Why its own widget: Replay is shared by several people's work; the bar owns its input, its keys
(Enter searches, Escape closes it without leaving Replay) and its status line, and tells the screen only
``Submitted(query)``. The search itself is :class:`tui.screens.replay_search.ReplaySearch`.
"""

from __future__ import annotations

from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widget import Widget
from textual.widgets import Input, Static


class SearchBar(Widget):
    """An input (shown by :meth:`open`) above a one-line status of the current match."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")
    BINDINGS = [Binding("escape", "close", "Close search", show=False)]

    class Submitted(Message):
        def __init__(self, query: str) -> None:
            super().__init__()
            self.query = query

    def compose(self) -> ComposeResult:
        yield Input(placeholder='search the whole cast: words, "a phrase", prefix*, a OR b, a NOT b')
        yield Static("", classes="search-status", markup=False)

    def on_mount(self) -> None:
        self.query_one(Input).display = False
        self.display = False

    @property
    def input(self) -> Input:
        return self.query_one(Input)

    @property
    def status(self) -> str:
        return str(self.query_one(".search-status", Static).content)

    def open(self, query: str = "") -> None:
        """Shows the input, focused, holding ``query``."""
        self.display = True
        box = self.input
        box.display = True
        if query:
            box.value = query
        box.focus()

    def show_status(self, text: str, *, query: str | None = None) -> None:
        """Shows the status line (the input stays as it is); ``query`` fills the input for a later ``/``."""
        self.display = True
        if query is not None:
            self.input.value = query
        self.query_one(".search-status", Static).update(text)

    def action_close(self) -> None:
        box = self.input
        box.display = False
        self.display = bool(self.status)
        self.screen.set_focus(None)

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        query = event.value.strip()
        if query:
            self.input.display = False
            self.screen.set_focus(None)
            self.post_message(self.Submitted(query))
