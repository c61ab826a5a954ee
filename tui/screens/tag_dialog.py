"""TagDialog: choose ``class.subclass`` and a note for one or many episodes.

Why a dialog and not direct keys: a tag can keep a task out of every export, so even the outcome's
suggestion is only *preselected* here and written when the curator confirms (Enter). One key picks the
class (1-9, taxonomy file order), the list picks the subclass, a field takes the note.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from bandpass.engine.core.taxonomy import Taxonomy
from bandpass.tui.errors import Guarded
from bandpass.tui.widgets.option_list import SteadyOptionList


@dataclass(frozen=True)
class TagChoice:
    code: str  # class.subclass
    note: str


class TagDialog(Guarded, ModalScreen[TagChoice | None]):
    CSS_PATH = "tag_dialog.tcss"
    BINDINGS = [
        *(Binding(str(n), f"pick_class({n})", f"class {n}", show=False) for n in range(1, 10)),
        Binding("enter", "confirm", "Confirm tag", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(
        self,
        taxonomy: Taxonomy,
        *,
        targets: str,
        preselect: str | None = None,
        suggestion: str | None = None,
        reason: str = "",
    ) -> None:
        super().__init__()
        self.taxonomy = taxonomy
        self.targets = targets
        self.suggestion = suggestion
        self.reason = reason
        cls, _, sub = (preselect or "").partition(".")
        first = next(iter(taxonomy.classes))
        self.tag_class = cls if cls in taxonomy.classes else first
        self._initial_sub = sub

    def compose(self) -> ComposeResult:
        with Vertical(id="tag-dialog"):
            yield Static(f"Tag {self.targets}", id="tag-title")
            if self.suggestion:
                why = f" (from {self.reason})" if self.reason else ""
                yield Static(
                    f"suggested: {self.suggestion}{why} — preselected, Enter confirms", id="tag-hint"
                )
            yield Static("", id="tag-classes")
            yield SteadyOptionList(id="tag-subclass")
            yield Input(placeholder="note (optional)", id="tag-note")
            yield Static("1-9 class · ↑↓ subclass · Enter confirm · Esc cancel", id="tag-help")

    def on_mount(self) -> None:
        self._fill(self._initial_sub)
        self.query_one("#tag-subclass", OptionList).focus()

    def _fill(self, subclass: str | None = None) -> None:
        text = Text()
        for n, c in enumerate(self.taxonomy.classes.values(), start=1):
            style = "reverse bold" if c.name == self.tag_class else ""
            text.append(f" {n} {c.name} ", style)
            text.append(" ")
        self.query_one("#tag-classes", Static).update(text)
        options = self.query_one("#tag-subclass", OptionList)
        options.clear_options()
        subs = self.taxonomy.classes[self.tag_class].subclasses
        for name, desc in subs.items():
            options.add_option(Option(Text.assemble((name, "bold"), ("  " + desc, "dim")), id=name))
        names = list(subs)
        options.highlighted = names.index(subclass) if subclass in names else 0

    @property
    def subclass(self) -> str | None:
        options = self.query_one("#tag-subclass", OptionList)
        if options.highlighted is None:
            return None
        return options.get_option_at_index(options.highlighted).id

    @property
    def code(self) -> str | None:
        sub = self.subclass
        return f"{self.tag_class}.{sub}" if sub else None

    def action_pick_class(self, number: int) -> None:
        c = self.taxonomy.class_at(number)
        if c is not None and c.name != self.tag_class:
            self.tag_class = c.name
            self._fill()

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.action_confirm()

    def action_confirm(self) -> None:
        code = self.code
        if code is not None:
            self.dismiss(TagChoice(code, self.query_one("#tag-note", Input).value.strip()))

    def action_cancel(self) -> None:
        self.dismiss(None)
