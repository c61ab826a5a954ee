"""Escape's one rule, shared by the screens: a pushed screen goes back to the one under it; an area's own
screen (a mode: Overview, Calibration, ...) goes to Tasks.

Why one function: Calibration's Escape used to pop the mode's only screen, which Textual refuses with a
``ScreenStackError`` that ended the app. A key that arrives late (a slow switch under load) for a screen
that is no longer on top does nothing, rather than popping whatever is there now.
"""

from __future__ import annotations

from textual.screen import Screen

HOME_MODE = "tasks"


def go_back(screen: Screen) -> None:
    app = screen.app
    if app.screen is not screen:
        return
    if len(app.screen_stack) > 1:
        screen.dismiss(None)
    elif app.current_mode != HOME_MODE:
        app.switch_mode(HOME_MODE)
