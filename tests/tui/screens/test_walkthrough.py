"""The README's "first 10 minutes" walks the demo screen by screen: this test takes the same steps on the
demo workspace and checks that what the README quotes is what the screens draw (and that the README still
quotes it), so the two cannot drift apart again.

Why: the walkthrough promised "mean pass@2 50% → 63%" on an Overview that did not show it, an agent column
Episodes had dropped, a `0 (verifier gave 1: void)` the screen cut to `0 (void)`, and never said that
plain ``bandpass`` opens on Tasks.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from textual.widgets import DataTable, RichLog, Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.batch_confirm import BatchConfirm
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.compare import CompareScreen
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.generate import GenerateScreen
from bandpass.tui.screens.generation import GenerationScreen
from bandpass.tui.screens.overview import OverviewScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.runs import RunsScreen
from bandpass.tui.screens.settings import SettingsScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.screens.tasks import TasksScreen
from bandpass.tui.widgets.batch_watch import BatchWatch
from tests.support.narrow import present
from tests.support.paths import REPO
from tests.support.waiting import wait_for

README = (REPO / "README.md").read_text(encoding="utf-8")
WALK = README.split("## The first 10 minutes", 1)[1].split("\n## ", 1)[0]
SIZE = (160, 48)


def drawn(app: BandpassApp) -> str:
    """The screen as drawn, lines joined (what a curator sees, not a widget's model)."""
    return "\n".join("".join(s.text for s in strip) for strip in app.screen._compositor.render_strips())


def quoted(text: str) -> str:
    """``text`` as the README writes it (its line breaks are free); fails naming it when it is not."""
    flat = " ".join(WALK.split())
    assert text in flat, f"the walkthrough no longer says {text!r}"
    return text


async def test_the_walkthrough_matches_the_screens(demo: Workspace) -> None:
    app = BandpassApp(demo, bus=EventBus(), show_path=False, start="overview")  # as `bandpass demo`
    async with app.run_test(size=SIZE) as pilot:
        # 1. Overview
        await wait_for(pilot, lambda: isinstance(app.screen, OverviewScreen), what="the Overview")
        overview = app.screen
        assert isinstance(overview, OverviewScreen)
        await wait_for(pilot, lambda: overview.overview is not None, what="the figures")
        await pilot.pause()
        screen = drawn(app)
        quoted("mean pass@2 (its own column) moves from 50% to 63%")
        assert "mean pass@2" in screen
        band = [
            line for line in screen.splitlines() if "demo-step10 (step 10)" in line or "demo-step40" in line
        ]
        assert "50%" in band[0] and "63%" in band[1], band
        for text in (
            "clusters 5 with 2+ members, 41 failures (largest 12)",
            "tamper guard 1 episode caught forging the verifier",
        ):
            quoted(text)
            assert text in " ".join(screen.split()), f"the Overview does not draw {text!r}"
        assert "92%" in screen and quoted("92% of the time")
        assert "access-log-report: demo-step10 → demo-step40 (saturated)" in screen

        # 2. Tasks (1), configure-kv-service, Episodes (8): agent, outcome, diagnosis and tags
        quoted("In Tasks (`1`) move to `configure-kv-service` and press `8`")
        await pilot.press("1")
        await wait_for(pilot, lambda: isinstance(app.screen, TasksScreen), what="Tasks")
        tasks = app.screen
        assert isinstance(tasks, TasksScreen)
        await wait_for(pilot, lambda: tasks.last_load_s is not None, what="the tasks")
        for _ in range(12):
            if _cursor_task(tasks) == "configure-kv-service":
                break
            await pilot.press("down")
        assert _cursor_task(tasks) == "configure-kv-service"
        await pilot.press("8")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodesScreen), what="Episodes")
        episodes = app.screen
        assert isinstance(episodes, EpisodesScreen)
        await wait_for(pilot, lambda: len(episodes.shown) > 5, what="the task's episodes")
        await pilot.pause()
        quoted("with agent, outcome, diagnosis and tags")
        header = next(line for line in drawn(app).splitlines() if " episode " in line and "outcome" in line)
        for column in ("agent", "outcome", "diagnosis", "tags"):
            assert column in header, f"Episodes has no {column} column: {header!r}"
        assert {r.task for r in episodes.shown} == {"configure-kv-service"}
        quoted("Pick the `agent_error:turn_limit` of `demo-step10`")
        stuck = next(
            r for r in episodes.shown if r.outcome == "agent_error:turn_limit" and r.agent == "demo-step10"
        )
        quoted("Its diagnosis is `harness.stuck_in_program`")
        assert stuck.diagnosis.startswith("harness.stuck_in_program"), stuck.diagnosis

        # 4. Replay it (Enter): `]` jumps step to step, `e` to the next evidence after the playhead, `v` the
        # verifier's terminal; two marked episodes compare side by side
        quoted("**Replay it (`Enter`, or `6`).**")
        episodes.table.cursor_row = [k for k, _ in episodes.table._shown].index(stuck.episode_id)
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen), what="Replay")
        replay = app.screen
        assert (
            isinstance(replay, ReplayScreen)
            and replay.error == ""
            and replay.source.episode_id == stuck.episode_id
        )
        await wait_for(pilot, lambda: replay.player is not None, what="the agent's cast")
        player = present(replay.player)
        assert replay.active == "agent" and len(player.markers) > 2
        quoted("`]`/`[` jump step to step")
        await pilot.press("right_square_bracket")
        first = player.position
        assert first == player.markers[0].time or first == player.markers[1].time, first
        await pilot.press("right_square_bracket")
        assert player.position > first and player.position in [m.time for m in player.markers]
        quoted("`e` seeks to the next evidence item after the playhead")
        before = player.position
        await pilot.press("e")
        await pilot.pause()
        assert player.position > before, "e went back, or nowhere"
        quoted("`v` switches to the verifier's terminal")
        await pilot.press("v")
        await wait_for(pilot, lambda: replay.active == "verifier", what="the verifier's terminal")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is episodes, what="back in Episodes")
        quoted("Mark two episodes with `space` and press `c` in Episodes to compare them side by side")
        await pilot.press("space", "down", "space", "c")
        await wait_for(pilot, lambda: isinstance(app.screen, CompareScreen), what="the comparison")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is episodes, what="back in Episodes again")

        # 3. the forged pass of access-log-report: `0 (void)` in this list
        quoted("`0 (void)` in the Episodes screen's narrower column")
        await pilot.press("escape", "0", "8")
        await wait_for(pilot, lambda: isinstance(app.screen, EpisodesScreen), what="all episodes")
        every = app.screen
        assert isinstance(every, EpisodesScreen)
        await wait_for(pilot, lambda: len(every.shown) > 90, what="every episode")
        tamper = next(
            r
            for r in every.shown
            if r.outcome == "agent_error:verifier_tamper" and r.task == "access-log-report"
        )
        every.table.cursor_row = [k for k, _ in every.table._shown].index(tamper.episode_id)
        await pilot.pause()
        right = every.table.region.right
        rows = [x[:right] for x in drawn(app).splitlines()]
        line = next(x for x in rows if x.lstrip().startswith(f"{tamper.episode_id} "))
        assert "0 (void)" in line, line
        await pilot.press("escape")

        # 5. the cluster: misalignment.reward_hack (1 of 12)
        await pilot.press("7")
        await wait_for(pilot, lambda: isinstance(app.screen, TagQueueScreen), what="the Tag queue")
        queue = app.screen
        assert isinstance(queue, TagQueueScreen)
        await wait_for(pilot, lambda: queue.settled, what="the queue")
        await pilot.press("k")
        info = queue.query_one("#queue-info", Static)
        await wait_for(pilot, lambda: str(info.content).startswith("cluster "), what="the cluster view")
        cluster = queue.current_cluster
        assert (
            cluster is not None
            and len(cluster.items) == 12
            and cluster.representative.task == "configure-kv-service"
        )
        diagnosed = quoted("misalignment.reward_hack (1 of 12)")
        assert diagnosed in " ".join(str(info.content).split())

        # 6. Runs lists the checkpoints' batches and asks before a new one; Generate lists two attempts,
        # Enter opens one turn by turn: the audit's invalidity.oracle_fails, the fix, the resubmission
        await pilot.press("2")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="Runs")
        runs = app.screen
        assert isinstance(runs, RunsScreen)
        watch = runs.query_one("#runs-watch", BatchWatch)
        await wait_for(pilot, lambda: watch.row_count >= 2, what="the checkpoints' batches")
        listed = " ".join(drawn(app).split())
        assert "demo-step10" in listed and "demo-step40" in listed
        quoted("`n` there says what a new batch would run before anything starts")
        await pilot.press("n")
        await wait_for(pilot, lambda: isinstance(app.screen, BatchConfirm), what="the question")
        assert "Start a rollout batch?" in drawn(app)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is runs, what="nothing started")
        assert runs.batch_id is None
        quoted("Generate lists the two generation attempts, Enter opens one turn by turn")
        await pilot.press("3")
        await wait_for(pilot, lambda: isinstance(app.screen, GenerateScreen), what="Generate")
        history = app.screen.query_one("#gen-history", DataTable)
        await wait_for(pilot, lambda: history.row_count == 2, what="the two attempts")
        turns = ""
        for row in range(2):  # the attempt the audit sent back, whichever row it is
            history.focus()
            history.move_cursor(row=row)
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GenerationScreen), what="the attempt")
            log = app.screen.query_one("#generation-log", RichLog)
            await wait_for(pilot, lambda: len(log.lines) > 3, what="its turns")  # noqa: B023 - awaited here
            turns += "\n".join(line.text for line in log.lines)
            await pilot.press("escape")
            await wait_for(pilot, lambda: isinstance(app.screen, GenerateScreen), what="back in Generate")
        quoted("the audit's `invalidity.oracle_fails`, the fix, the accepted resubmission")
        assert "invalidity.oracle_fails" in turns and "accepted" in turns

        # 7 and 9: Calibration opened on the Overview goes back there; Settings is 4
        await pilot.press("0", "5")
        await wait_for(pilot, lambda: isinstance(app.screen, CalibrationScreen), what="Calibration")
        quoted("Calibration opened on the Overview returns there")
        await pilot.press("escape")
        await wait_for(pilot, lambda: isinstance(app.screen, OverviewScreen), what="back on the Overview")
        quoted("**Settings (`4`).**")
        await pilot.press("4")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), what="Settings")
        assert app.unexpected == []


def test_the_walkthrough_s_export_writes_what_it_says(demo: Workspace, tmp_path: Path) -> None:
    """Step 8, the command it quotes, on the demo."""
    quoted("export --model demo-step40 --out /tmp/demo-export` writes 2 tasks, `configure-kv-service` and")
    out = subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(demo.root), "export", "--model", "demo-step40",
         "--out", str(tmp_path / "demo-export")],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert out.returncode == 0, out.stderr
    assert (
        out.stdout.startswith("exported 2 tasks for demo-step40") and "(train 1, validation 1;" in out.stdout
    )
    exported = sorted(p.name for p in (tmp_path / "demo-export").rglob("task.toml"))
    assert len(exported) == 2, exported
    quoted("says why each of the 7 others stayed out (`band:above` for `access-log-report`")
    excluded = dict(
        line.split(None, 1)
        for line in out.stdout.split("excluded 7 tasks:\n", 1)[1].splitlines()
        if line.strip()
    )
    assert len(excluded) == 7 and excluded["access-log-report"].strip() == "band:above", excluded
    assert "configure-kv-service" not in excluded and "fix-catalog-makefile" not in excluded
    quoted(
        "`band:undecided` for the tasks with four episodes or none, plus `audit:rejected` and `blocking_tag`"
    )
    reasons = " ".join(excluded.values())
    assert "band:undecided" in reasons and "audit:rejected" in reasons and "blocking_tag" in reasons


async def test_plain_bandpass_opens_on_tasks(demo: Workspace) -> None:
    quoted("plain `bandpass` opens a workspace of your own on Tasks")
    app = BandpassApp(demo, bus=EventBus(), show_path=False)  # as `bandpass` with no command
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TasksScreen), what="Tasks")


def _cursor_task(tasks: TasksScreen) -> str:
    from bandpass.tui.widgets.virtual_table import VirtualTable

    table = tasks.query_one("#task-table", VirtualTable)
    shown = table.shown_rows()
    return shown[table.cursor_row][0] if shown else ""
