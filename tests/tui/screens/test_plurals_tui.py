"""One of a thing is singular on screen: "1 of 1 episode", "1 cluster of 1 failure", "1 task"."""

from __future__ import annotations

from textual.widgets import Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.diagnoser import diagnose_episodes
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from tests.support.replay_data import make_episode
from tests.support.waiting import wait_for


async def test_one_episode_one_cluster_one_failure_are_singular(workspace: Workspace) -> None:
    make_episode(workspace, task="fix-it", test="test_rows", agent="qwen-9b")
    diagnose_episodes(workspace)
    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("8")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodesScreen), what="Episodes")
        episodes = app.screen
        assert isinstance(episodes, EpisodesScreen)
        await wait_for(pilot, lambda: len(episodes.rows) == 1, what="the episode")
        assert episodes.status_text().startswith("1 of 1 episode ·")
        await pilot.press("escape", "7")
        await wait_for(pilot, lambda: isinstance(app.screen, TagQueueScreen), what="the Tag queue")
        queue = app.screen
        assert isinstance(queue, TagQueueScreen)
        await wait_for(pilot, lambda: queue.settled, what="the queue")
        await pilot.press("k")
        info = queue.query_one("#queue-info", Static)
        await wait_for(pilot, lambda: str(info.content).startswith("cluster "), what="clusters")
        assert queue.status_text().startswith("1 cluster of 1 failure (every state)")
        assert app.unexpected == []
