"""SVG snapshots of the diagnosis views (pytest-textual-snapshot): the tag queue's cluster view, the
Episodes screen and the two-episode compare. Seeded data, fixed size, nothing time-dependent on screen.
Update with ``pytest tests/tui/screens/test_diagnosis_snapshots.py --snapshot-update`` after a deliberate
change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.widgets import DataTable, Static

from bandpass.engine.core.workspace import Workspace
from bandpass.tui.screens.compare import CompareScreen
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from tests.support.replay_data import make_episode, make_loop_episode
from tests.support.waiting import wait_for, wait_for_screen

SIZE = (150, 40)


class Host(App[None]):
    TITLE = "Bandpass"

    def __init__(self, make: Any) -> None:
        super().__init__()
        self.make = make

    def on_mount(self) -> None:
        self.push_screen(self.make())


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    w = Workspace.open(tmp_path / "ws")
    for _ in range(3):
        make_episode(w, task="fix-it", test="test_x")
    make_episode(w, task="fix-it", test="test_y")
    make_loop_episode(w, task="loopy")
    make_episode(w, task="fix-it", outcome="infra_error:policy_unavailable")
    return w


def test_snapshot_cluster_view(ws: Workspace, snap_compare: Any) -> None:
    async def run_before(pilot: Any) -> None:
        await wait_for(pilot, lambda: getattr(pilot.app.screen, "settled", False), what="the queue's load")
        await pilot.press("k")
        screen = pilot.app.screen
        info = screen.query_one("#queue-info", Static)
        await wait_for(
            pilot,
            lambda: screen.clusters and str(info.content).startswith("cluster "),
            what="the cluster view",
        )

    assert snap_compare(Host(lambda: TagQueueScreen(ws)), terminal_size=SIZE, run_before=run_before)


def test_snapshot_episodes(ws: Workspace, snap_compare: Any) -> None:
    async def run_before(pilot: Any) -> None:
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, EpisodesScreen), what="Episodes")
        await pilot.press("space", "down", "down", "down")
        screen = pilot.app.screen
        info = screen.query_one("#episodes-info", Static)

        def marked_and_moved() -> bool:  # first row marked, the fourth highlighted and described
            cur = screen.current
            return (
                screen.marked == [screen.shown[0].episode_id]
                and cur is not None
                and cur is screen.shown[3]
                and str(info.content).startswith(f"episode {cur.episode_id} ")
            )

        await wait_for(pilot, marked_and_moved, what="the mark and the cursor on the fourth row")

    assert snap_compare(
        Host(lambda: EpisodesScreen(ws, task="fix-it")), terminal_size=SIZE, run_before=run_before
    )


def test_snapshot_compare(ws: Workspace, snap_compare: Any) -> None:
    async def run_before(pilot: Any) -> None:
        screen = await wait_for_screen(pilot, CompareScreen, what="Compare")
        table = screen.query_one("#compare-steps", DataTable)

        def on_first_divergence() -> bool:
            want = screen.first_divergence or 0
            return table.row_count == len(screen.rows) and table.cursor_row == want and table.has_focus

        await wait_for(pilot, on_first_divergence, what="the cursor on the first divergence")

    assert snap_compare(Host(lambda: CompareScreen(ws, 1, 5)), terminal_size=SIZE, run_before=run_before)
