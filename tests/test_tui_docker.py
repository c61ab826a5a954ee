"""A real episode in the cockpit: the oracle on a sample task, real Docker, started from the Runs screen;
its policy terminal output and the verifier's appear in the live pane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from engine.core.events import EventBus
from engine.core.workspace import Workspace
from engine.tasks.importer import import_one
from tests.tui_wait import wait_for
from tui.app import BandpassApp
from tui.screens.runs import RunsScreen
from tui.widgets.episode_pane import EpisodePane
from tui.widgets.feed_pump import pump

pytestmark = pytest.mark.docker

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tasks" / "access-log-report"


def _text(view: Any) -> str:
    return "\n".join(view.emulator.lines())


async def test_oracle_episode_output_appears_in_live_pane(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws")
    item = import_one(ws, EXAMPLE)
    assert item.status == "new", item
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("2")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen))
        runs = app.screen
        assert isinstance(runs, RunsScreen)
        runs.query_one("#runs-scope").value = "all"
        await pilot.press("n")
        await wait_for(pilot, lambda: runs.query(EpisodePane), what="a live pane")
        pane = runs.query(EpisodePane).first()
        await wait_for(pilot, lambda: pane.live.status == "done", 240, what="episode finished")
        assert pump.drain()
        assert pane.live.outcome == "passed", pane.live.outcome
        # the solution's keystrokes and its output reached the policy pane, through the real widget
        agent = _text(pane.agent_view)
        assert "__BANDPASS_SOLUTION__" in agent and "report.csv" in agent
        view = pane.agent_view
        painted = lambda: "".join(view.render_line(y).text for y in range(view.size.height)).strip()  # noqa: E731
        await wait_for(pilot, painted)
        assert pane.verifier_view.display and "test.sh" in _text(pane.verifier_view)
        await wait_for(pilot, lambda: pane.has_class("-passed"))
        start = runs.query_one("#runs-start")
        await wait_for(pilot, lambda: not start.disabled, what="Start enabled again")  # batch finished
        # the screen's own batch is on the bus: its recordings were never tailed too (no second feed)
        assert not app.live.followed and len(runs.query(EpisodePane)) == 1
