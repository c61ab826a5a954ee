"""HelpScreen: every key of the screen it was opened on, grouped by where the key lives.

Why generic: the footer only has room for the few keys that matter most (the rest are ``show=False``),
so the full list must be one keystroke away on *every* screen, including screens added later. The app's
``?`` binding builds this screen from the active screen's live bindings (the same ``active_bindings``
Textual dispatches keys with), so a screen gets its help page by declaring ``BINDINGS`` and nothing
else, and the page can never disagree with what the keys do.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen, Screen
from textual.widgets import Static

from ..errors import Guarded
from ..key_names import full_name


@dataclass(frozen=True)
class KeyHelp:
    """One row of the help page."""

    group: str  # "This screen", "Focused: <widget>", "Everywhere"
    key: str  # as the footer shows it
    description: str
    in_footer: bool
    note: str = ""


def _group(node: DOMNode, screen: Screen[Any]) -> str:
    if node is screen:
        return "This screen"
    if node is screen.app:
        return "Everywhere"
    name = node.id or type(node).__name__
    return f"Focused: {name}"


def screen_keys(screen: Screen[Any]) -> list[KeyHelp]:
    """The keys active on ``screen`` (its focused widget's, its own, the app's), one row per action,
    in binding order within each group: screen first, then the focused widget, then the app. App keys
    the screen reuses for itself (Replay's digits) are listed as reachable through the palette."""
    app = screen.app
    rows: dict[tuple[str, str], KeyHelp] = {}
    for node, binding, enabled, _tooltip in screen.active_bindings.values():
        if not enabled or not binding.description:
            continue
        group = _group(node, screen)
        key = binding.key_display or app.get_key_display(binding)
        prev = rows.get((group, binding.action))
        if prev is not None:  # one action on several keys: one row, keys joined
            rows[(group, binding.action)] = KeyHelp(
                group, f"{prev.key} / {key}", prev.description, prev.in_footer or binding.show
            )
        else:
            rows[(group, binding.action)] = KeyHelp(group, key, full_name(binding), binding.show)
    taken = {b.action for _n, b, _e, _t in screen.active_bindings.values()}
    for app_binding in app.BINDINGS:  # app keys this screen reuses stay reachable by name
        if isinstance(app_binding, Binding) and app_binding.description and app_binding.action not in taken:
            key = app_binding.key_display or app.get_key_display(app_binding)
            note = f"{key} is this screen's"
            rows[("Everywhere", app_binding.action)] = KeyHelp(
                "Everywhere", "ctrl+p", full_name(app_binding), False, note
            )
    order = {"This screen": 0, "Everywhere": 2}
    return sorted(rows.values(), key=lambda r: order.get(r.group, 1))  # stable: binding order kept


def render_keys(title: str, rows: list[KeyHelp]) -> Table:
    """The page: one section per group, the key as the footer shows it, what it does, and whether the
    footer shows it (or why the key does something else here)."""
    width = min(max((len(r.key) for r in rows), default=4), 24)
    table = Table(title=title, show_header=True, header_style="bold", expand=True, box=None, padding=(0, 1))
    table.add_column("key", style="bold", no_wrap=True, width=width)
    table.add_column("does", ratio=1)
    table.add_column("", style="dim", no_wrap=True)
    group = None
    for r in rows:
        if r.group != group:
            group = r.group
            table.add_row("", Text(group, style="bold underline"), "")
        table.add_row(r.key, r.description, r.note or ("footer" if r.in_footer else ""))
    return table


class HelpScreen(Guarded, ModalScreen[None]):
    """The key list of one screen; Escape, q or ? closes it."""

    CSS_PATH = "help.tcss"
    BINDINGS = [
        Binding("escape,question_mark,q", "close", "Close help"),
    ]

    def __init__(self, title: str, rows: list[KeyHelp]) -> None:
        super().__init__()
        self.title_text = title
        self.rows = rows

    def compose(self) -> ComposeResult:
        with Vertical(id="help-box"):
            with VerticalScroll(id="help-scroll"):
                yield Static(render_keys(f"Keys: {self.title_text}", self.rows), id="help-keys")
            yield Static(
                "Every key is also a command: ctrl+p, then type its name.  Esc closes.", id="help-hint"
            )

    def action_close(self) -> None:
        self.dismiss(None)
