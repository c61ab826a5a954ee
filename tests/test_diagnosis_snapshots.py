"""SVG snapshots of the diagnosis views (pytest-textual-snapshot): the tag queue's cluster view, the
Episodes screen and the two-episode compare. Seeded data, fixed size, nothing time-dependent on screen.
Update with ``pytest tests/test_diagnosis_snapshots.py --snapshot-update`` after a deliberate change."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.app import App

from engine.core.workspace import Workspace
from tests._replay_data import make_episode
from tests.test_diagnosis_tui import make_loop_episode
from tests.tui_wait import wait_for
from tui.screens.compare import CompareScreen
from tui.screens.episodes import EpisodesScreen
from tui.screens.tag_queue import TagQueueScreen

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
        await wait_for(pilot, lambda: pilot.app.screen.cluster_view, what="the cluster view")
        await pilot.pause()

    assert snap_compare(Host(lambda: TagQueueScreen(ws)), terminal_size=SIZE, run_before=run_before)


def test_snapshot_episodes(ws: Workspace, snap_compare: Any) -> None:
    async def run_before(pilot: Any) -> None:
        await pilot.press("space", "down", "down", "down")
        await pilot.pause(0.2)

    assert snap_compare(
        Host(lambda: EpisodesScreen(ws, task="fix-it")), terminal_size=SIZE, run_before=run_before
    )


def test_snapshot_compare(ws: Workspace, snap_compare: Any) -> None:
    async def run_before(pilot: Any) -> None:
        await pilot.pause(0.2)

    assert snap_compare(Host(lambda: CompareScreen(ws, 1, 5)), terminal_size=SIZE, run_before=run_before)
