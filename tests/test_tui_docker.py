"""A real episode in the cockpit: the oracle on a sample task, real Docker, started from the Runs screen;
its policy terminal output and the verifier's appear in the live pane."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.core.events import EventBus
from engine.core.workspace import Workspace
from engine.tasks.importer import import_one
from tui.app import BandpassApp
from tui.screens.runs import RunsScreen
from tui.widgets.episode_pane import EpisodePane
from tui.widgets.feed_pump import pump

pytestmark = pytest.mark.docker

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "tasks" / "access-log-report"


async def wait_for(pilot: Any, cond: Any, timeout: float = 10.0) -> None:
    """Repaints are throttled under load: wait for what a person would see instead of sleeping."""
    end = time.monotonic() + timeout
    while not cond():
        assert time.monotonic() < end, "condition not met in time"
        await pilot.pause(0.05)


def _text(view: Any) -> str:
    return "\n".join(view.emulator.lines())


async def test_oracle_episode_output_appears_in_live_pane(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws")
    item = import_one(ws, EXAMPLE)
    assert item.status == "new", item
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("2")
        await pilot.pause(0.2)
        runs = app.screen
        assert isinstance(runs, RunsScreen)
        runs.query_one("#runs-scope").value = "all"
        await pilot.press("n")
        end = time.monotonic() + 240
        pane: EpisodePane | None = None
        while time.monotonic() < end:
            panes = list(runs.query(EpisodePane))
            if panes:
                pane = panes[0]
                if pane.live.status == "done":
                    break
            await pilot.pause(0.2)
        assert pane is not None, "no live pane appeared"
        assert pane.live.status == "done", "episode did not finish in time"
        assert pump.drain()
        await pilot.pause(0.5)
        assert pane.live.outcome == "passed", pane.live.outcome
        # the solution's keystrokes and its output reached the policy pane, through the real widget
        agent = _text(pane.agent_view)
        assert "__BANDPASS_SOLUTION__" in agent and "report.csv" in agent
        view = pane.agent_view
        painted = lambda: "".join(view.render_line(y).text for y in range(view.size.height)).strip()  # noqa: E731
        await wait_for(pilot, painted)
        assert pane.verifier_view.display and "test.sh" in _text(pane.verifier_view)
        assert pane.has_class("-passed")
        await pilot.pause(0.3)
        assert not runs.query_one("#runs-start").disabled  # batch finished, Start is back
