"""A real episode in the cockpit: the oracle on a sample task, real Docker, started from the Runs screen;
its policy terminal output and the verifier's appear in the live pane."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Select

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.tasks.importer import import_one
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.runs import RunsScreen
from bandpass.tui.widgets.batch_watch import BatchWatch
from bandpass.tui.widgets.episode_pane import EpisodePane
from bandpass.tui.widgets.feed_pump import pump
from tests.support.narrow import present
from tests.support.paths import EXAMPLES
from tests.support.waiting import start_batch, wait_for

pytestmark = pytest.mark.docker

EXAMPLE = EXAMPLES / "access-log-report"


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
        runs.query_one("#runs-scope", Select).value = "all"
        await start_batch(pilot)
        # the new batch is in the batch table at once, marked as this screen's own
        watch = runs.query_one("#runs-watch", BatchWatch)
        await wait_for(pilot, lambda: runs.batch_id and watch.cells(runs.batch_id), what="the batch row")
        assert watch.cells(present(runs.batch_id))["executor"] in ("not started (here)", "local (here)")

        # an unaudited version: before its first rollout its oracle learns where it is verified, in a pane
        # of its own that says so; then the rollout's pane
        def rollouts() -> list[EpisodePane]:
            return [p for p in runs.query(EpisodePane) if not p.live.learns_footprint]

        await wait_for(pilot, rollouts, 240, what="the rollout's live pane")
        (pane,) = rollouts()
        await wait_for(pilot, lambda: pane.live.status == "done", 240, what="episode finished")
        assert pump.drain()
        assert pane.live.outcome == "passed", pane.live.outcome
        # the solution's keystrokes and its output reached the policy pane, through the real widget
        agent = _text(pane.agent_view)
        assert "__BANDPASS_SOLUTION__" in agent and "report.csv" in agent
        view = pane.agent_view
        painted = lambda: "".join(view.render_line(y).text for y in range(view.size.height)).strip()  # noqa: E731 - a one-line wait condition
        await wait_for(pilot, painted)
        assert pane.verifier_view.display and "test.sh" in _text(pane.verifier_view)
        await wait_for(pilot, lambda: pane.has_class("-passed"))
        start = runs.query_one("#runs-start")
        await wait_for(pilot, lambda: not start.disabled, what="Start enabled again")  # batch finished
        # the screen's own batch is on the bus: its recordings were never tailed too (no second feed)
        assert not app.live.followed and len(runs.query(EpisodePane)) == 2
        (learner,) = [p for p in runs.query(EpisodePane) if p.live.learns_footprint]
        assert learner.live.agent == "oracle" and learner.live.outcome == "passed"
        assert "learning where it is verified" in str(learner.title_bar.content)
        assert learner.live.started_at <= pane.live.started_at  # learnt first, once
