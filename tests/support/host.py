"""A bare Textual app that shows one screen, for pilot tests of a screen without the whole cockpit."""

from __future__ import annotations

from textual.app import App
from textual.screen import Screen


class Host(App[None]):
    """Pushes the screen it is given on mount; nothing else (no bindings, no bus, no other screen)."""

    def __init__(self, screen: Screen[None]) -> None:
        super().__init__()
        self._first = screen

    def on_mount(self) -> None:
        self.push_screen(self._first)
