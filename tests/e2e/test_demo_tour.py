"""The demo as a new user meets it: `bandpass demo` opens on the Overview, and every screen has data.

The demo workspace is built from the committed samples (real recorded episodes of two scripted policy
checkpoints, real audits, curator tags and Claude reviews recorded over the Messages API), so these tests
need no Docker. What they check is what the README's "first 10 minutes" promises: where a task got 14-20
episodes the band is decided at 90% confidence (two tasks in at step 10; two in and one above at step 40),
where it got four it is not; export keeps the decided-in tasks; access-log-report leaves the band beyond
noise (in, then above: saturated) and the paired test says "better"; clusters have several members, the
guard caught a forgery verified in place, and reviews have agreement figures.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from textual.widgets import DataTable, TextArea

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.compare import CompareScreen
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.generate import GenerateScreen
from bandpass.tui.screens.generation import GenerationScreen
from bandpass.tui.screens.help import HelpScreen
from bandpass.tui.screens.overview import OverviewScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.runs import RunsScreen
from bandpass.tui.screens.settings import SettingsScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.screens.tasks import TasksScreen
from bandpass.tui.widgets.batch_watch import BatchWatch
from bandpass.tui.widgets.virtual_table import VirtualTable
from tests.support.narrow import present
from tests.support.paths import REPO
from tests.support.waiting import S, wait_for, wait_for_screen

# Slow (builds the whole demo and opens every screen): the full suite runs it, `scripts/test --fast` does not.
pytestmark = pytest.mark.slow


def test_demo_summary_has_the_whole_product(tmp_path: Path) -> None:
    """`bandpass demo --no-tui --json`, without Docker: the figures each screen is about."""
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent"}
    cmd = [
        sys.executable,
        "-m",
        "bandpass.tui.cli",
        "demo",
        "--no-tui",
        "--json",
        "--workspace",
        str(tmp_path / "d"),
    ]
    res = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=300)
    assert res.returncode == 0, res.stderr
    ov = json.loads(res.stdout)
    assert [m["model"] for m in ov["models"]] == ["demo-step10", "demo-step40"]  # ordered by checkpoint step
    early, late = ov["models"]
    # The band is a decision, not a guess: 14-20 episodes decide a task at 90%, four decide nothing.
    assert early["band"] == {"below": 0, "in": 2, "above": 0, "undecided": 7} and early["exportable"] == 2
    assert late["band"] == {"below": 0, "in": 2, "above": 1, "undecided": 6} and late["exportable"] == 2
    assert ov["confidence"] == 0.9
    assert [(x["task"], x["kind"]) for x in ov["left_band"]] == [("access-log-report", "saturated")]
    assert early["mean_pass_at_k"] < late["mean_pass_at_k"]
    assert ov["clusters"] >= 2 and ov["largest_cluster"] >= 3
    assert ov["guard_caught"] >= 1
    assert set(ov["audits"]) == {"accepted", "rejected"}
    assert ov["reviews"] >= 10 and ov["tags"] >= 10
    assert ov["review_agreement"] is not None and 0 < ov["review_agreement"] < 1  # a real disagreement
    for code in (
        "harness.stuck_in_program",
        "harness.unterminated_input",
        "harness.action_loop",
        "harness.command_timeout",
        "harness.parse_error",
        "invalidity.oracle_fails",
        "misalignment.state_only_verifier",
        "invalidity.trivially_solved",
        "agent.sandbox_killed",
        "agent.oom",
        "agent.pids_exhausted",
    ):
        assert code in ov["diagnoses"], code
    plain = subprocess.run(
        cmd[:-3] + ["--workspace", str(tmp_path / "d")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert "left the band: access-log-report demo-step10 -> demo-step40 (saturated)" in plain.stdout


def _text(widget: Any) -> str:
    """What a Static shows, as plain text (its Rich renderable rendered at the widget's width)."""
    console = Console(width=max(widget.size.width, 80), record=True, file=io.StringIO())
    console.print(widget.content)
    return console.export_text()


async def _key(pilot: Any, key: str, screen: type[S]) -> S:
    await pilot.press(key)
    return await wait_for_screen(pilot, screen, what=f"{key} opens {screen.__name__}")


async def test_every_screen_of_the_demo_shows_data(demo: Workspace) -> None:
    app = BandpassApp(demo, bus=EventBus(), show_path=False, start="overview")
    async with app.run_test(size=(160, 50)) as pilot:
        ov = app.screen
        assert isinstance(ov, OverviewScreen)
        await wait_for(pilot, lambda: ov.overview is not None, what="overview built")
        band = _text(ov.query_one("#overview-band"))
        assert "demo-step10 (step 10)" in band and "demo-step40 (step 40)" in band
        assert "decided at 90% confidence" in band
        assert "agent_error:verifier_tamper" in _text(ov.query_one("#overview-outcomes"))

        tasks = await _key(pilot, "1", TasksScreen)
        await wait_for(pilot, lambda: tasks.last_load_s is not None, what="tasks loaded")
        assert tasks.query_one("#task-table", VirtualTable).row_count == 9  # 8 examples + 1 generated

        eps = await _key(pilot, "8", EpisodesScreen)
        # Opened from Tasks: the highlighted task's episodes, both checkpoints' and the audit samples'.
        await wait_for(pilot, lambda: len(eps.shown) >= 8, what="episodes listed")
        assert eps.task_name == "access-log-report"
        await pilot.press("enter")
        replay = await wait_for_screen(pilot, ReplayScreen, what="replay opened")
        await wait_for(pilot, lambda: bool(getattr(replay, "players", None)), what="cast loaded")
        assert not replay.error
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is eps, what="back to episodes")
        await pilot.press("space", "down", "space", "c")
        compare = await wait_for_screen(pilot, CompareScreen, what="compare opened")
        assert all(r["steps"] is not None for r in compare.records)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is eps, what="back to episodes")
        await pilot.press("escape")

        queue = await _key(pilot, "7", TagQueueScreen)
        await wait_for(pilot, lambda: len(getattr(queue, "_all", []) or []) > 0, what="queue loaded")
        await pilot.press("k")
        await wait_for(pilot, lambda: queue.cluster_view and len(queue.clusters) > 0, what="clusters shown")
        assert max(len(c.items) for c in queue.clusters) >= 3

        calib = await _key(pilot, "5", CalibrationScreen)
        await wait_for(pilot, lambda: calib.report is not None, what="report built")
        report = present(calib.report)
        assert report.model in ("demo-step10", "demo-step40")
        decided = {
            "demo-step10": {"in": 2, "undecided": 7},
            "demo-step40": {"in": 2, "above": 1, "undecided": 6},
        }
        counts = {k: v for k, v in report.band_counts().items() if v}
        assert counts == decided[report.model]
        await pilot.press("h")
        await wait_for(pilot, lambda: calib.comparison is not None, what="comparison built")
        comparison = present(calib.comparison)
        assert comparison.models == ["demo-step10", "demo-step40"]
        assert [lv.task for lv in comparison.leavers] == ["access-log-report"]
        assert [p.verdict for p in comparison.paired] == ["better"]
        await pilot.press("l")  # the ledger: what another round would cost
        assert calib.next_round is not None and calib.next_round.episodes > 0

        runs = await _key(pilot, "2", RunsScreen)
        watch = runs.query_one("#runs-watch", BatchWatch)
        # Nothing runs in the demo; the checkpoints' recorded batches are listed with their outcomes.
        await wait_for(pilot, lambda: watch.row_count == 2 and watch.display, what="recent batches listed")
        assert {str(k.value) for k in watch.rows} == {"sample:demo-step10", "sample:demo-step40"}

        gen = await _key(pilot, "3", GenerateScreen)
        history = gen.query_one("#gen-history", DataTable)
        await wait_for(pilot, lambda: history.row_count == 2, what="generation history")
        history.focus()
        await pilot.press("o")
        attempt = await wait_for_screen(pilot, GenerationScreen, what="attempt opened")
        await wait_for(pilot, lambda: attempt.reading is not None, what="transcript read")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is gen, what="back to generate")

        settings = await _key(pilot, "4", SettingsScreen)
        assert "demo-step40" in settings.query_one(TextArea).text

        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help opened")
