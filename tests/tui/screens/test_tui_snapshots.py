"""SVG snapshots of the main screens (pytest-textual-snapshot).

Deterministic on purpose: fixed terminal size, the workspace path hidden (``show_path=False``), seeded
data without timestamps on screen, a private event bus, and live panes fed before the snapshot is taken.
Update with ``pytest tests/tui/screens/test_tui_snapshots.py --snapshot-update`` after a deliberate visual
change.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable, RichLog

from bandpass.engine.core.events import EpisodeFinished, EpisodeStarted, EventBus, PtyOutput, StepFinished
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.help import HelpScreen
from bandpass.tui.screens.overview import OverviewScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.settings import SettingsScreen
from bandpass.tui.screens.tag_dialog import TagDialog
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.widgets.episode_pane import EpisodePane
from bandpass.tui.widgets.feed_pump import pump
from bandpass.tui.widgets.step_panel import StepPanel
from bandpass.tui.widgets.terminal_view import TerminalView
from bandpass.tui.widgets.virtual_table import VirtualTable
from tests.support.calib_data import add_episodes, add_task, outcomes
from tests.support.narrow import present
from tests.support.replay_data import make_episode
from tests.support.tui_data import seed
from tests.support.waiting import wait_for, wait_for_screen

SIZE = (150, 40)


async def _settle(pilot: Any) -> None:
    """Waits for the Tasks load worker and the feed pump; the load time is then hidden (it varies)."""
    tasks = [s for s in pilot.app.screen_stack if hasattr(s, "last_load_s")]
    if tasks:
        await wait_for(pilot, lambda: tasks[0].last_load_s is not None, what="tasks loaded")
    for s in pilot.app.screen_stack:  # the load time varies run to run: keep it out of the picture
        if hasattr(s, "last_load_s"):
            s.last_load_s = None
            s._apply_filter()
    assert pump.drain()
    await pilot.pause()


def test_snapshot_tasks(ws: Workspace, snap_compare: Any) -> None:
    seed(ws, 12)
    app = BandpassApp(ws, bus=EventBus(), show_path=False)

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        table = app.screen.query_one("#task-table", VirtualTable)
        table.cursor_row = 1  # task-01: no audit, so no timestamp in the detail pane
        body = app.screen.query_one("#task-detail-body")
        await wait_for(pilot, lambda: "task-01" in str(body.render()), what="detail of task-01")
        assert table.cursor_row == 1 and app.focused is table

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_runs_with_live_panes(ws: Workspace, snap_compare: Any) -> None:
    bus = EventBus()
    app = BandpassApp(ws, bus=bus, show_path=False)

    async def run_before(pilot: Any) -> None:
        for eid in (1, 2, 3):
            bus.publish(EpisodeStarted(episode_id=eid, task_name=f"demo-task-{eid}", agent="oracle"))
            bus.publish(
                PtyOutput(
                    episode_id=eid,
                    data=f"# ls --color\r\n\x1b[1;34mdir{eid}\x1b[0m  \x1b[32mrun.sh\x1b[0m  "
                    f"\x1b[38;5;208mdata.csv\x1b[0m  漢字.txt\r\n# ",
                )
            )
            bus.publish(
                StepFinished(
                    episode_id=eid,
                    index=0,
                    action={"analysis": "list files", "plan": "ls", "commands": [{"keystrokes": "ls\n"}]},
                )
            )
        bus.publish(PtyOutput(episode_id=1, stream="verifier", data="\x1b[32mPASS\x1b[0m 3 checks\r\n# "))
        bus.publish(EpisodeFinished(episode_id=1, outcome="passed", reward=1.0))
        bus.publish(EpisodeFinished(episode_id=3, outcome="infra_error:oom"))
        await pilot.press("2")
        await wait_for(pilot, lambda: len(app.screen.query(EpisodePane)) == 3, what="three panes")
        await _settle(pilot)
        panes = list(app.screen.query(EpisodePane))
        for pane in panes:  # every pane painted its listing, the finished one its verifier too

            def listed(view: TerminalView = pane.agent_view) -> bool:
                return "run.sh" in "".join(view.render_line(y).text for y in range(4))

            await wait_for(pilot, listed)
        first = next(p for p in panes if p.live.episode_id == 1)
        await wait_for(pilot, lambda: first.verifier_view.display and first.has_class("-passed"))
        app.screen.query(".pane-agent").first().focus()
        steps = app.screen.query_one("#runs-steps", RichLog)
        await wait_for(pilot, lambda: any("list files" in line.text for line in steps.lines), what="steps")

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_settings(ws: Workspace, snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)  # the screen says whether the key is set
    ws.config_path.write_text(
        '[models.qwen-9b]\nbase_url = "http://127.0.0.1:8000/v1"\nserved_name = "Qwen/Qwen3.5-9B"\n\n'
        '[images.aliases]\n"python:3.12-slim" = "bandpass/base:bookworm"\n\n[band]\nlo = 0.2\nhi = 0.8\n',
        encoding="utf-8",
    )

    async def run_before(pilot: Any) -> None:
        await pilot.press("4")
        await wait_for(pilot, lambda: isinstance(app.screen, SettingsScreen), what="settings open")
        models = app.screen.query_one("#settings-models", DataTable)
        await wait_for(pilot, lambda: models.row_count == 1 and models.get_row_at(0)[0] == "qwen-9b")
        await pilot.pause()

    app = BandpassApp(ws, bus=EventBus(), show_path=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_generate(ws: Workspace, snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from bandpass.engine.core.events import GenerationEvent
    from bandpass.tui.screens.generate import GenerateScreen

    monkeypatch.setattr(GenerateScreen, "_prompt_versions", lambda self: ["v1", "v2"])  # not the live set
    bus = EventBus()
    app = BandpassApp(ws, bus=bus, show_path=False)

    async def run_before(pilot: Any) -> None:
        await pilot.press("3")
        await wait_for(pilot, lambda: isinstance(app.screen, GenerateScreen), what="generate open")
        for kind, data in (
            ("turn", "turn 1"),
            ("text", "I will write a log-parsing task."),
            ("tool_use", 'write_file {"path": "instruction.md"}'),
            ("tool_result", "ok"),
            ("finished", "accepted"),
        ):
            bus.publish(GenerationEvent(generation_id=1, kind=kind, data=data))
        log = app.screen.query_one("#gen-log", RichLog)
        await wait_for(pilot, lambda: len(log.lines) == 5, what="five transcript lines")
        history = app.screen.query_one("#gen-yield")
        await wait_for(pilot, lambda: "no attempts yet" in str(history.render()), what="history loaded")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_replay_seeked_to_a_marker(ws: Workspace, snap_compare: Any) -> None:
    eid = make_episode(ws, steps=3)
    app = BandpassApp(ws, bus=EventBus(), show_path=False)

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        app.open_replay(eid)
        replay = await wait_for_screen(pilot, ReplayScreen, what="replay open")
        indexed = lambda: replay.players and all(p.index.complete for p in replay.players.values())  # noqa: E731 - a one-line wait condition
        await wait_for(pilot, indexed, what="keyframe index built")
        await pilot.press("right_square_bracket", "right_square_bracket")  # to the marker of step 1
        panel = replay.query_one(StepPanel)
        await wait_for(
            pilot, lambda: present(replay.player).position == 11.0 and panel.title_text.startswith("step 1")
        )
        view = replay.query_one("#view-agent", TerminalView)

        def shown() -> str:
            return "".join(view.render_line(y).text for y in range(8))

        await wait_for(pilot, lambda: "output of step 0" in shown(), what="the screen at step 1")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_tag_queue_with_the_dialog_open(
    ws: Workspace, snap_compare: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("BANDPASS_AUTHOR", "curator")
    make_episode(ws, task="fix-it", outcome="failed")
    make_episode(ws, task="fix-it", outcome="agent_error:turn_limit")
    make_episode(ws, task="log-report", outcome="infra_error:oom", with_casts=False)
    app = BandpassApp(ws, bus=EventBus(), show_path=False)

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.press("7")
        queue = await wait_for_screen(pilot, TagQueueScreen, what="tag queue open")
        await wait_for(pilot, lambda: len(queue.items) == 3, what="three pending episodes")
        await pilot.press("down")  # the turn_limit episode: its suggestion is preselected
        await wait_for(pilot, lambda: queue.current is not None and queue.current.suggestion is not None)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(app.screen, TagDialog), what="tag dialog open")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_calibration(ws: Workspace, snap_compare: Any) -> None:
    for name, result in (
        ("always-solved", outcomes(6)),
        ("in-band", outcomes(3, 3)),
        ("never-solved", outcomes(0, 6)),
        ("infra-heavy", outcomes(2, 1, infra_error__oom=3)),
        ("few-samples", outcomes(1, 1)),
    ):
        vid, _ = add_task(ws, name)
        add_episodes(ws, vid, "qwen-9b", result)
    app = BandpassApp(ws, bus=EventBus(), show_path=False)

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.press("5")
        await wait_for(pilot, lambda: isinstance(app.screen, CalibrationScreen), what="calibration open")
        table = app.screen.query_one("#calib-table", DataTable)
        await wait_for(pilot, lambda: table.row_count == 5, what="five tasks")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_help_page(ws: Workspace, snap_compare: Any) -> None:
    seed(ws, 3)
    app = BandpassApp(ws, bus=EventBus(), show_path=False)

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        await pilot.press("question_mark")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help open")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_overview_of_the_demo(tmp_path: Path, snap_compare: Any) -> None:
    from bandpass.tui.commands.demo import prepare_demo

    ws, _added, _warnings = prepare_demo(tmp_path / "demo")
    app = BandpassApp(ws, bus=EventBus(), show_path=False, start="overview")

    async def run_before(pilot: Any) -> None:
        overview = await wait_for_screen(pilot, OverviewScreen, what="the overview")
        await wait_for(pilot, lambda: overview.overview is not None, what="overview built")
        await pilot.pause()

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
