"""Escape's one rule, shared by the screens: a pushed screen goes back to the one under it; an area's own
screen (a mode: Overview, Calibration, ...) goes back to the area it was opened from (Calibration opened
on the Overview returns to the Overview: ``BandpassApp.mode_trail``), and to Tasks when there is none.

Why one function: Calibration's Escape used to pop the mode's only screen, which Textual refuses with a
``ScreenStackError`` that ended the app. A key that arrives late (a slow switch under load) for a screen
that is no longer on top does nothing, rather than popping whatever is there now.
"""

from __future__ import annotations

from typing import Any

from textual.screen import Screen

HOME_MODE = "tasks"


def go_back(screen: Screen[Any]) -> None:
    app = screen.app
    if app.screen is not screen:
        return
    if len(app.screen_stack) > 1:
        screen.dismiss(None)
        return
    trail: list[str] | None = getattr(app, "mode_trail", None)
    while trail and trail[-1] == app.current_mode:
        trail.pop()
    if trail:
        mode = trail.pop()
        app.switch_mode(mode)
        trail.pop()  # the switch back is not a step forward: Escape again goes further back
    elif app.current_mode != HOME_MODE:
        app.switch_mode(HOME_MODE)
