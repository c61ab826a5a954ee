"""SVG snapshots of the main screens (pytest-textual-snapshot).

Deterministic on purpose: fixed terminal size, the workspace path hidden (``show_path=False``), seeded
data without timestamps on screen, a private event bus, and live panes fed before the snapshot is taken.
Update with ``pytest tests/test_tui_snapshots.py --snapshot-update`` after a deliberate visual change.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.core.events import EpisodeFinished, EpisodeStarted, EventBus, PtyOutput, StepFinished
from engine.core.workspace import Workspace
from tests.test_tui_app import seed
from tui.app import BandpassApp
from tui.widgets.feed_pump import pump

SIZE = (150, 40)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace.open(tmp_path / "ws")


async def _settle(pilot: Any) -> None:
    """Waits for the Tasks load worker and the feed pump, then for the UI to go idle."""
    end = time.monotonic() + 15
    while time.monotonic() < end:
        tasks = [s for s in pilot.app.screen_stack if hasattr(s, "last_load_s")]
        if not tasks or tasks[0].last_load_s is not None:
            break
        await pilot.pause(0.05)
    for s in pilot.app.screen_stack:  # the load time varies run to run: keep it out of the picture
        if hasattr(s, "last_load_s"):
            s.last_load_s = None
            s._apply_filter()
    pump.drain()
    await pilot.pause(0.3)


def test_snapshot_tasks(ws: Workspace, snap_compare: Any) -> None:
    seed(ws, 12)
    app = BandpassApp(ws, bus=EventBus(), show_path=False)

    async def run_before(pilot: Any) -> None:
        await _settle(pilot)
        table = app.screen.query_one("#task-table")
        table.cursor_row = 1  # task-01: no audit, so no timestamp in the detail pane
        body = app.screen.query_one("#task-detail-body")
        end = time.monotonic() + 10
        while "task-01" not in str(body.render()) and time.monotonic() < end:
            await pilot.pause(0.05)
        await pilot.pause(0.3)
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
        await _settle(pilot)
        app.screen.query(".pane-agent").first().focus()
        await pilot.pause(0.2)

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
        await pilot.pause(0.3)

    app = BandpassApp(ws, bus=EventBus(), show_path=False)
    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_snapshot_generate(ws: Workspace, snap_compare: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    from engine.core.events import GenerationEvent
    from tui.screens.generate import GenerateScreen

    monkeypatch.setattr(GenerateScreen, "_prompt_versions", lambda self: ["v1", "v2"])  # not the live set
    bus = EventBus()
    app = BandpassApp(ws, bus=bus, show_path=False)

    async def run_before(pilot: Any) -> None:
        await pilot.press("3")
        await pilot.pause(0.2)
        for kind, data in (
            ("turn", "turn 1"),
            ("text", "I will write a log-parsing task."),
            ("tool_use", 'write_file {"path": "instruction.md"}'),
            ("tool_result", "ok"),
            ("finished", "accepted"),
        ):
            bus.publish(GenerationEvent(generation_id=1, kind=kind, data=data))
        await pilot.pause(0.4)

    assert snap_compare(app, terminal_size=SIZE, run_before=run_before)
