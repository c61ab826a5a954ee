"""A yes/no question before something is lost (unsaved edits): ``y`` / Enter confirms, ``n`` / Escape
keeps things as they are."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from ..errors import Guarded


class ConfirmDialog(Guarded, ModalScreen[bool]):
    CSS_PATH = "confirm.tcss"
    BINDINGS = [
        Binding("y,enter", "answer(True)", "Yes", priority=True),
        Binding("n,escape", "answer(False)", "No", priority=True),
    ]

    def __init__(self, question: str, *, yes: str = "discard", no: str = "keep editing") -> None:
        super().__init__()
        self.question = question
        self.yes, self.no = yes, no

    def compose(self) -> ComposeResult:
        with Vertical(id="confirm-box"):
            yield Static(self.question, id="confirm-question", markup=False)
            yield Static(f"y: {self.yes} · n / Esc: {self.no}", id="confirm-help")

    def action_answer(self, yes: bool) -> None:
        self.dismiss(yes)
