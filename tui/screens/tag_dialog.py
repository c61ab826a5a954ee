"""TagDialog: choose ``class.subclass`` and a note for one or many episodes.

Why a dialog and not direct keys: a tag can keep a task out of every export, so even the diagnosis's
suggestion is only *preselected* here and written when the curator confirms (Enter). One key picks the
class (1-9, taxonomy file order), the list picks the subclass, a field takes the note.

The dialog has one model, a :class:`TagPlan` (engine/review/tag_choice.py): its suggestion is the row
preselected — there is no second field that could name another — and with no suggestion no row is, so
Enter writes nothing until the curator picks. Under the list a line says what Enter would do with the
highlighted code: how many episodes it tags, and which it leaves out and why (a passed episode for a
failure class, a forged reward for the valid failure, a member whose evidence suggests something else).
Every entry point (Tag queue rows and clusters, Search's "tag all listed", Replay's ``t``) opens it
through :func:`open_tag_dialog`, which tags exactly those episodes and says so.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen, Screen
from textual.widgets import Input, OptionList, Static
from textual.widgets.option_list import Option

from ...engine.app.tagging import Tagger, TagPlan
from ...engine.core.taxonomy import Taxonomy
from ..errors import Guarded, refusals
from ..widgets.option_list import SteadyOptionList


@dataclass(frozen=True)
class TagChoice:
    code: str  # class.subclass
    note: str
    targets: tuple[int, ...] = ()  # the episodes to tag (what the effect line stated)
    left_out: tuple[tuple[int, str], ...] = ()  # (episode, why) not tagged


class TagDialog(Guarded, ModalScreen[TagChoice | None]):
    CSS_PATH = "tag_dialog.tcss"
    BINDINGS = [
        *(Binding(str(n), f"pick_class({n})", f"class {n}", show=False) for n in range(1, 10)),
        Binding("enter", "confirm", "Confirm tag", priority=True),
        Binding("escape", "cancel", "Cancel"),
    ]

    def __init__(self, taxonomy: Taxonomy, plan: TagPlan, *, targets: str | None = None) -> None:
        super().__init__()
        self.taxonomy = taxonomy
        self.plan = plan
        self.targets = targets or plan.what
        cls, _, sub = (plan.suggestion or "").partition(".")
        self.tag_class = cls if cls in taxonomy.classes else next(iter(taxonomy.classes))
        # no suggestion (or one outside the taxonomy): no row is preselected, Enter waits for a pick
        self._initial_sub: str | None = sub if cls in taxonomy.classes else None

    def compose(self) -> ComposeResult:
        with Vertical(id="tag-dialog"):
            yield Static(f"Tag {self.targets}", id="tag-title")
            if self.plan.suggestion:
                why = f" ({self.plan.reason})" if self.plan.reason else ""
                hint = f"suggested: {self.plan.suggestion}{why} — preselected, Enter confirms"
            else:
                hint = "no suggestion: pick a class (1-9) and a subclass (↑↓), then Enter"
            yield Static(hint, id="tag-hint")
            yield Static("", id="tag-classes")
            yield SteadyOptionList(id="tag-subclass")
            yield Static("", id="tag-effect")
            yield Input(placeholder="note (optional)", id="tag-note")
            yield Static("1-9 class · ↑↓ subclass · Enter confirm · Esc cancel", id="tag-help")

    def on_mount(self) -> None:
        self._fill(self._initial_sub, preselect=self._initial_sub is not None)
        self.query_one("#tag-subclass", OptionList).focus()

    def on_option_list_option_highlighted(self, event: OptionList.OptionHighlighted) -> None:
        event.stop()
        self._show_effect()

    def _show_effect(self) -> None:
        code = self.code
        line = self.plan.effect(code).describe() if code else "no subclass highlighted: ↑↓ picks one"
        self.query_one("#tag-effect", Static).update(line)

    def _fill(self, subclass: str | None = None, *, preselect: bool = True) -> None:
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
        if preselect:
            options.highlighted = names.index(subclass) if subclass in names else 0
        self._show_effect()

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
        if code is None:
            self.notify("pick a subclass first (↑↓), or Esc", severity="warning", timeout=3)
            return
        effect = self.plan.effect(code)
        if not effect.targets:
            self.notify(effect.describe(), severity="warning", timeout=5)
            return
        note = self.query_one("#tag-note", Input).value.strip()
        self.dismiss(TagChoice(code, note, effect.targets, effect.left_out))

    def action_cancel(self) -> None:
        self.dismiss(None)


def open_tag_dialog(
    screen: Screen[Any],
    tagger: Tagger,
    plan: TagPlan,
    *,
    targets: str | None = None,
    then: Callable[[TagChoice], None] | None = None,
) -> None:
    """Every entry point's tag action: the dialog over ``plan``, then exactly the episodes its effect line
    named are tagged (one undoable step), and a notification says how many, with what, and what was left
    out. ``then`` runs after a write (a reload, a move to the next pending episode)."""
    if not plan.members:
        screen.notify("nothing to tag here", severity="warning", timeout=3)
        return

    def done(choice: TagChoice | None) -> None:
        if choice is None:
            return
        with refusals(screen):
            tags = tagger.tag(choice.targets, choice.code, note=choice.note)
            added = tagger.last_added
            n = len(choice.targets)
            what = f"episode {choice.targets[0]}" if n == 1 else f"{n} episodes"
            if not added:
                msg = f"{what} already carr{'ies' if n == 1 else 'y'} {choice.code}: nothing added"
            else:
                kept = f" ({n - added} already had it)" if added < n else ""
                blocks = " · blocks its task's export" if any(t.blocking for t in tags) else ""
                msg = f"tagged {what}: {choice.code}{kept}{blocks} (u: undo)"
            if choice.left_out:
                msg += f"; left out {len(choice.left_out)} ({choice.left_out[0][1]}"
                msg += ", …)" if len({w for _, w in choice.left_out}) > 1 else ")"
            screen.notify(msg, timeout=5)
            if then is not None:
                then(choice)

    screen.app.push_screen(TagDialog(tagger.taxonomy, plan, targets=targets), done)
