"""Nothing runs while nothing happens (issue 45): an app left open all day uses no CPU.

What is held here is the structure, not a timing (``bench/bench_idle.py`` measures the CPU): Textual keeps
its timers per message pump (the app, each screen, each widget), so after every screen has settled these
tests read every timer of the app, of every screen of every mode's stack and of their widgets, and
require that none would fire — a paused replay does not tick, a screen that was left or dismissed left
nothing running, a focused text field stops blinking when nobody types — and that the background work of
first use (a cast's keyframe index, the search index) says how far it got and ends.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.message_pump import MessagePump
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.replay import load_source
from bandpass.tui.app import BandpassApp
from bandpass.tui.commands.demo import prepare_demo
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.changes import ChangesScreen
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.generate import GenerateScreen
from bandpass.tui.screens.generation import GenerationScreen
from bandpass.tui.screens.help import HelpScreen
from bandpass.tui.screens.overview import OverviewScreen
from bandpass.tui.screens.replay import ReplayApp, ReplayScreen
from bandpass.tui.screens.runs import RunsScreen
from bandpass.tui.screens.search import SearchScreen
from bandpass.tui.screens.settings import SettingsScreen
from bandpass.tui.screens.tag_dialog import TagDialog
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.screens.tasks import TasksScreen
from bandpass.tui.widgets.cursor_rest import CursorRest
from tests.support.paths import REPO
from tests.support.replay_data import make_episode
from tests.support.waiting import wait_for, wait_for_screen

TUI = REPO / "tui"
SAMPLE_CAST = REPO / "recordings" / "samples" / "policy-context-truncated" / "agent.cast"
#: A focused field rests this soon here (10 s in the app): the tests wait for it, never sleep.
REST_S = 0.2


# --- what is running --- #


def _pumps(app: App[Any]) -> Iterator[MessagePump]:
    """The app, every screen of every mode's stack (shown or not) and all their widgets."""
    yield app
    for stack in app._screen_stacks.values():
        for screen in stack:
            yield from screen.walk_children(with_self=True)


def _fires(timer: Timer) -> bool:
    """Will fire: its task is alive and it is not paused."""
    return timer._task is not None and not timer._task.done() and timer._active.is_set()


def _named(node: MessagePump, timer: Timer) -> str:
    callback = getattr(timer._callback, "__qualname__", repr(timer._callback))
    return f"{type(node).__name__}: {callback} every {timer._interval:g} s"


def interval_timers(app: App[Any]) -> list[str]:
    """Every repeating timer that will fire (a one-shot timer ends by itself)."""
    return sorted(
        _named(node, t) for node in _pumps(app) for t in list(node._timers) if t._repeat != 0 and _fires(t)
    )


def pending_timers(app: App[Any]) -> list[str]:
    """Every timer that will fire, one-shot timers included."""
    return sorted(_named(node, t) for node in _pumps(app) for t in list(node._timers) if _fires(t))


def busy_workers(app: App[Any]) -> list[str]:
    return sorted(f"{w.group}: {w.name}" for w in app.workers if w.is_running)


async def settled(pilot: Any, app: App[Any], where: str, *, allowed: tuple[str, ...] = ()) -> None:
    """Waits until no worker runs and no repeating timer fires (but ``allowed`` ones); fails naming them."""

    def quiet() -> bool:
        return not busy_workers(app) and not [t for t in interval_timers(app) if not t.startswith(allowed)]

    try:
        await wait_for(pilot, quiet, what=where)
    except AssertionError as exc:
        raise AssertionError(
            f"{exc}; workers running: {busy_workers(app)}; timers firing: {interval_timers(app)}"
        ) from None


def status_line(screen: ReplayScreen) -> str:
    return str(screen.query_one("#replay-status", Static).content)


# --- every screen of the demo, as a curator visits them --- #


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    ws, _added, warnings = prepare_demo(tmp_path_factory.mktemp("idle") / "ws")
    assert warnings == []
    return ws


#: (keys, the screen they bring up) in the order a curator could press them.
TOUR: list[tuple[tuple[str, ...], type[Screen[Any]]]] = [
    ((), OverviewScreen),
    (("1",), TasksScreen),
    (("2",), RunsScreen),
    (("3",), GenerateScreen),
    (("enter",), GenerationScreen),  # the history has the focus: its first attempt, finished
    (("escape",), GenerateScreen),
    (("4",), SettingsScreen),
    (("5",), CalibrationScreen),
    (("7",), TagQueueScreen),
    (("1",), TasksScreen),
    (("8",), EpisodesScreen),
    (("escape",), TasksScreen),
    (("6",), ReplayScreen),
    (("d",), ChangesScreen),
    (("escape",), ReplayScreen),
    (("t",), TagDialog),
    (("escape",), ReplayScreen),
    (("escape",), TasksScreen),
    (("ctrl+f",), SearchScreen),  # its query field has the focus: it blinks, then rests
    (("escape",), TasksScreen),
    (("question_mark",), HelpScreen),
    (("escape",), TasksScreen),
    (("0",), OverviewScreen),
]


async def test_no_screen_keeps_a_timer_running_while_nothing_happens(demo: Workspace) -> None:
    """Every screen of the demo, shown, left and dismissed: once its loads are done, no repeating timer
    fires anywhere in the app (the Runs screen's poll, its progress bar's clock and animation, a paused
    replay's frame clock, a finished generation's re-read all did), and at the end not even a one-shot."""
    app = BandpassApp(demo, bus=EventBus(), show_path=False, start="overview")
    app.REST_AFTER_S = REST_S
    async with app.run_test(size=(160, 48)) as pilot:
        for keys, want in TOUR:
            await pilot.press(*keys)
            opened = f"{keys} opens {want.__name__}"
            await wait_for_screen(pilot, want, what=opened)
            await settled(pilot, app, f"nothing runs on {want.__name__} ({' '.join(keys) or 'start'})")
            screen = app.screen
            if isinstance(screen, ReplayScreen) and not screen._shown - {"agent"}:
                await _play_then_pause(pilot, app, screen)
        runs = next(s for s in app._screen_stacks["runs"] if isinstance(s, RunsScreen))
        assert runs._watch_timer is None, "Runs, left, still watches the store"
        assert runs.follower.idle and not runs.follower.stopped  # alive, asleep: no batch to follow
        await wait_for(pilot, lambda: not pending_timers(app), what="no timer at all left to fire")


async def _play_then_pause(pilot: Any, app: App[Any], screen: ReplayScreen) -> None:
    """Space plays (the frame clock runs), space again pauses (it stops)."""
    player = screen.player
    assert player is not None and not player.playing
    player.seek(0.0)
    player.speed = 0.25  # the demo's casts are short: still playing when the second space lands
    await pilot.press("space")
    assert player.playing and screen._timer is not None and _fires(screen._timer)
    await pilot.press("space")
    assert not player.playing
    await settled(pilot, app, "the frame clock stops when the replay is paused")


# --- a replay, paused; first use of its keyframe index --- #


class Host(CursorRest, App[None]):
    REST_AFTER_S = REST_S

    def __init__(self, screen: Screen[None]) -> None:
        super().__init__()
        self._first = screen

    def on_mount(self) -> None:
        self.push_screen(self._first)


class RecordingReplay(ReplayScreen):
    """The Replay screen, keeping every status line it painted."""

    CSS_PATH = str(TUI / "screens" / "replay.tcss")  # a subclass finds its styles beside its own module

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines: list[str] = []

    def _refresh_status(self) -> None:
        super()._refresh_status()
        if not self.lines or self.lines[-1] != self.status_text():
            self.lines.append(self.status_text())


async def test_a_paused_replay_stops_its_clock_and_its_first_index_reports_and_ends(
    workspace: Workspace,
) -> None:
    """A replay opened on an episode whose casts were never indexed: the status line says it is indexing,
    then says nothing of it once the index is built — with the replay paused throughout, when nothing
    else repaints that line — and nothing keeps running: not the indexing worker, not the frame clock.
    Played to its end, the clock stops by itself."""
    eid = make_episode(workspace, steps=3)
    screen = RecordingReplay(workspace, episode_id=eid)
    app = Host(screen)
    async with app.run_test(size=(160, 45)) as pilot:
        indexed = lambda: screen.players and all(p.index.complete for p in screen.players.values())  # noqa: E731
        await wait_for(pilot, indexed, what="the keyframe indexes built")
        assert "indexing 0%" in screen.lines[0]  # first use: nothing saved to load
        await wait_for(pilot, lambda: "indexing" not in status_line(screen), what="the status: done")
        await settled(pilot, app, "nothing runs on a paused replay")

        player = screen.player
        assert player is not None
        player.seek(player.duration - 1.0)
        await pilot.press("space")  # plays: only the frame clock moves it on, to its end
        await wait_for(pilot, lambda: player.at_end and not player.playing, what="played to its end")
        await settled(pilot, app, "the frame clock stops at the end of the cast")

        await pilot.press("t")  # a dialog on top of a playing replay pauses it, and its clock
        await wait_for(pilot, lambda: isinstance(app.screen, Screen) and app.screen is not screen)
        await settled(pilot, app, "nothing runs under the tag dialog")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen)
        await settled(pilot, app, "nothing runs once the dialog is gone")


async def test_the_standalone_replay_paused_runs_nothing(tmp_path: Path) -> None:
    """``bandpass replay some.cast`` (the same app): once its index is built in memory, paused as it opens,
    nothing fires — the standalone replay was the one measured at 6-12% of a core."""
    cast = tmp_path / "bare" / "agent.cast"  # no workspace here: the index is never saved
    cast.parent.mkdir()
    shutil.copy(SAMPLE_CAST, cast)
    app = ReplayApp(None, load_source(None, str(cast)))
    app.REST_AFTER_S = REST_S
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.replay
        await wait_for(pilot, lambda: app.screen is screen and screen.player is not None)
        player = screen.player
        assert player is not None and not player.playing
        await wait_for(pilot, lambda: player.index.complete, what="the keyframe index built")
        await wait_for(pilot, lambda: "indexing" not in status_line(screen), what="the status: done")
        await settled(pilot, app, "nothing runs on the paused standalone replay")
        await pilot.press("space")
        await pilot.press("space")
        await settled(pilot, app, "nothing runs once it is paused again")
        await wait_for(pilot, lambda: not pending_timers(app), what="no timer at all left to fire")


# --- the search index, on first use --- #


class RecordingSearch(SearchScreen):
    CSS_PATH = str(TUI / "screens" / "search.tcss")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.lines: list[str] = []

    def status(self, text: str) -> None:
        super().status(text)
        self.lines.append(text)


async def test_first_use_of_search_indexes_with_progress_then_rests(workspace: Workspace) -> None:
    """Episodes the search index lacks are indexed when Search opens: the status line counts them, the
    work ends, and then nothing runs — its focused query field included, once nobody types."""
    for n in range(3):
        make_episode(workspace, task=f"task-{n}")
    screen = RecordingSearch(workspace)
    app = Host(screen)
    async with app.run_test(size=(160, 45)) as pilot:
        await wait_for(pilot, lambda: not screen.indexing, what="the search index brought up to date")
        assert any(line.startswith("indexing episodes: 0/3") for line in screen.lines), screen.lines
        assert "indexing" not in screen.lines[-1]
        await settled(pilot, app, "nothing runs on the search screen once indexed")
        await wait_for(pilot, lambda: not pending_timers(app), what="no timer at all left to fire")
        await pilot.press("a")  # a key: the field blinks again...
        assert interval_timers(app) == ["Input: Input._toggle_cursor every 0.5 s"]
        await settled(pilot, app, "...and rests again")
