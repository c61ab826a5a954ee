"""What the TUI does with a bug: an exception in an action, a handler, a worker or a timer is shown and
logged to the workspace, and the session goes on; one it cannot survive ends the app with exit status 1.

The bugs are a test screen's own (a key whose action raises, a handler that raises...), pushed on the
real app over a real workspace: the app's handling is what is under test, not the screens'.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import typer
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Button, Footer, Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.app import BandpassApp
from bandpass.tui.cli import run_tui
from bandpass.tui.errors import Guarded, log_path
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.tasks import TasksScreen
from tests.support.waiting import wait_for


class Buggy(Guarded, Screen[None]):
    BINDINGS = [
        Binding("b", "boom", "Boom"),
        Binding("w", "worker_boom", "Worker boom"),
        Binding("t", "timer_boom", "Timer boom"),
    ]

    def compose(self) -> ComposeResult:
        yield Static("buggy", id="buggy")
        yield Button("press me", id="buggy-button")
        yield Footer()

    def action_boom(self) -> None:
        raise ZeroDivisionError("an action's bug")

    def on_button_pressed(self, _: Button.Pressed) -> None:
        raise KeyError("a handler's bug")

    def action_worker_boom(self) -> None:
        self._fail()

    @work(thread=True)
    def _fail(self) -> None:
        raise RuntimeError("a worker's bug")

    def action_timer_boom(self) -> None:
        def tick() -> None:
            raise ValueError("a timer's bug")

        self.set_timer(0.01, tick)


class Fatal(Widget):
    """Not guarded: an exception in its handler stops its message loop, which Textual cannot survive."""

    def on_mount(self) -> None:
        raise OSError("a bug no handler catches")


async def test_bugs_in_actions_handlers_workers_and_timers_are_shown_logged_and_survived(
    ws: Workspace,
) -> None:
    app = BandpassApp(ws, bus=EventBus(), show_path=False)
    app.raise_unexpected_in_tests = False  # this test expects them
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = Buggy()
        await app.push_screen(screen)
        await pilot.press("b")
        await wait_for(pilot, lambda: len(app.unexpected) == 1, what="the action's bug reported")
        await pilot.click("#buggy-button")
        await wait_for(pilot, lambda: len(app.unexpected) == 2, what="the handler's bug reported")
        await pilot.press("w")
        await wait_for(pilot, lambda: len(app.unexpected) == 3, what="the worker's bug reported")
        await pilot.press("t")
        await wait_for(pilot, lambda: len(app.unexpected) == 4, what="the timer's bug reported")
        assert app.is_running and app.screen is screen  # the session goes on, on the same screen
        await pilot.press("b")  # and the screen still answers keys
        await wait_for(pilot, lambda: len(app.unexpected) == 5, what="the screen still answers")
        shown = [str(n.message) for n in app._notifications if n.title == "Unexpected error"]
        assert any("ZeroDivisionError: an action's bug" in m for m in shown)
        assert any("KeyError" in m and "a handler's bug" in m for m in shown)
        assert all(str(log_path(ws.root)) in m for m in shown)  # each says where its traceback went
    log = log_path(ws.root).read_text()
    for text in ("an action's bug", "a handler's bug", "a worker's bug", "a timer's bug"):
        assert text in log
    assert "Traceback (most recent call last)" in log and "action 'boom'" in log
    assert not app.return_code  # the app was never stopped by them (None or 0)


async def test_a_bug_the_app_cannot_survive_ends_it_with_status_1_and_a_log(ws: Workspace) -> None:
    app = BandpassApp(ws, bus=EventBus(), show_path=False)
    app.raise_unexpected_in_tests = False
    with pytest.raises(OSError, match="no handler catches"):  # the pilot re-raises it, as for any app
        async with app.run_test(size=(120, 40)) as pilot:
            await pilot.pause()
            await app.screen.mount(Fatal())
            await pilot.pause()
    assert app.return_code == 1
    assert "a bug no handler catches" in log_path(ws.root).read_text()
    assert app.unexpected == ["fatal: OSError: a bug no handler catches"]


def test_the_cli_exits_with_the_apps_status_and_names_the_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    class Stopped:
        return_code = 1
        error_log = tmp_path / "logs" / "tui-errors.log"

        def run(self) -> None:
            pass

    with pytest.raises(typer.Exit) as exc:
        run_tui(Stopped())
    assert exc.value.exit_code == 1  # was 0: a script could not tell
    assert f"traceback in {Stopped.error_log}" in capsys.readouterr().err


async def test_escape_on_calibration_goes_to_tasks(ws: Workspace) -> None:
    """The bug that started it: Escape on Calibration popped the mode's only screen (ScreenStackError)."""
    app = BandpassApp(ws, bus=EventBus(), show_path=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("5")
        await wait_for(pilot, lambda: isinstance(app.screen, CalibrationScreen), what="calibration")
        await pilot.press("escape", "escape", "5", "escape")
        await wait_for(pilot, lambda: isinstance(app.screen, TasksScreen), what="back on Tasks")
        assert app.is_running and app.unexpected == []


async def test_what_reaches_a_screen_already_left_is_no_error(ws: Workspace) -> None:
    """A key or a message can still reach a screen the curator just left (Enter then Escape at once,
    under load) while Textual removes it; a widget already gone there is no failure of the session."""
    app = BandpassApp(ws, bus=EventBus(), show_path=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause()
        screen = Buggy()
        await app.push_screen(screen)
        app.pop_screen()
        await screen.run_action("boom")  # its key arrives after it was dismissed
        await pilot.pause()
        assert app.unexpected == [] and app.is_running
