"""The app's navigation keys do what the Overview and the help page say, wherever they are pressed.

Why (issue 42): ``6`` ("replay the highlighted episode") did nothing on Episodes and the Tag queue; Escape
from an area opened on the Overview landed on Tasks; Replay's ``e`` stepped the evidence list in its own
order, so it could jump backwards; the standalone ``bandpass replay`` ignored ``q`` and ``?``.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

from bandpass.engine.app.replay import load_source
from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.help import HelpScreen
from bandpass.tui.screens.overview import OverviewScreen
from bandpass.tui.screens.replay import ReplayApp, ReplayScreen, next_evidence
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.screens.tasks import TasksScreen
from tests.support.waiting import wait_for, wait_for_screen

REPO = Path(__file__).resolve().parents[3]
SAMPLE_CAST = REPO / "recordings" / "samples" / "policy-context-truncated" / "agent.cast"


async def test_six_replays_the_highlighted_episode_from_episodes_and_the_tag_queue(demo: Workspace) -> None:
    app = BandpassApp(demo, bus=EventBus(), show_path=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("8")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodesScreen), what="Episodes")
        episodes = app.screen
        assert isinstance(episodes, EpisodesScreen)
        await wait_for(pilot, lambda: len(episodes.shown) > 5, what="episodes")
        episodes.table.focus()
        await pilot.press("down", "down")
        await wait_for(pilot, lambda: episodes.current is not None, what="a highlighted episode")
        wanted = episodes.current.episode_id if episodes.current else None
        await pilot.press("6")
        replay = await wait_for_screen(pilot, ReplayScreen, what="Replay from Episodes")
        assert replay.source.episode_id == wanted
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is episodes, what="back on Episodes")
        await pilot.press("escape")

        await pilot.press("7")
        await wait_for(pilot, lambda: isinstance(app.screen, TagQueueScreen), what="the Tag queue")
        queue = app.screen
        assert isinstance(queue, TagQueueScreen)
        await wait_for(pilot, lambda: queue.settled and queue.current is not None, what="the queue")
        await pilot.press("down")
        wanted = queue.current.episode_id if queue.current else None
        await pilot.press("6")
        replay = await wait_for_screen(pilot, ReplayScreen, what="Replay from the queue")
        assert replay.source.episode_id == wanted
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is queue, what="back on the queue")

        await pilot.press("k")  # a cluster replays the episode its diagnosis follows
        await wait_for(pilot, lambda: queue.current_cluster is not None, what="the cluster view")
        cluster = queue.current_cluster
        assert cluster is not None
        await pilot.press("6")
        replay = await wait_for_screen(pilot, ReplayScreen, what="Replay of a cluster")
        assert replay.source.episode_id == cluster.representative.episode_id
        assert app.unexpected == []


async def test_escape_goes_back_to_the_area_a_screen_was_opened_from(demo: Workspace) -> None:
    app = BandpassApp(demo, bus=EventBus(), show_path=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TasksScreen), what="Tasks")
        await pilot.press("0")
        await wait_for(pilot, lambda: isinstance(app.screen, OverviewScreen), what="the Overview")
        await pilot.press("5")
        await wait_for(pilot, lambda: isinstance(app.screen, CalibrationScreen), what="Calibration")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, OverviewScreen), what="back on the Overview")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, TasksScreen), what="then back on Tasks")
        assert app.unexpected == []


def test_next_evidence_is_the_next_after_the_playhead() -> None:
    items: list[dict[str, Any]] = [
        {"what": "the failing check", "cast": "verifier", "quote": "FAIL"},
        {"what": "step 9", "time": 90.0},
        {"what": "step 2", "time": 20.0},
        {"what": "step 5", "time": 50.0},
    ]
    assert next_evidence(items, "agent", 0.0, -1) == 2  # step 2, not the list's first
    assert next_evidence(items, "agent", 20.0, 2) == 3  # after the playhead at step 2: step 5
    assert next_evidence(items, "agent", 60.0, 2) == 1  # the playhead moved on: step 9, never back
    assert next_evidence(items, "agent", 90.0, 1) == 0  # past the last step: the verifier's check
    assert next_evidence(items, "verifier", 5.0, 0) == 2  # and around, to the earliest step


async def test_the_standalone_replay_takes_q_and_question_mark(tmp_path: Path) -> None:
    cast = tmp_path / "bare" / "agent.cast"
    cast.parent.mkdir()
    shutil.copy(SAMPLE_CAST, cast)
    app = ReplayApp(None, load_source(None, str(cast)))
    async with app.run_test(size=(120, 40)) as pilot:
        await wait_for(pilot, lambda: app.screen is app.replay, what="the replay")
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="the help page")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.replay, what="back on the replay")
        await pilot.press("q")
        await wait_for(pilot, lambda: not app.is_running, what="q quits")
