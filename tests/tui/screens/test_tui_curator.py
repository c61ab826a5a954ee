"""A curator's day on the screens: what each key does is what its footer says, and nothing is lost.

Replay shows the verifier's terminal when switched to (its output, not an empty first frame) and ``e``
follows a verifier evidence item to that terminal, at the line it quotes; Episodes keeps its cursor when
Replay returns; Generate's Enter opens the highlighted attempt; Runs asks before a batch (model, tasks
with the audit-rejected ones left out, k, where) and lists the new batch at once.
"""

from __future__ import annotations

from typing import Any

import pytest
from textual.pilot import Pilot
from textual.widgets import DataTable, Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.diagnoser import diagnose_episodes
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.batch_confirm import BatchConfirm
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.runs import RunsScreen
from bandpass.tui.widgets.terminal_view import TerminalView
from tests.support.narrow import present
from tests.support.replay_data import PYTEST_FAIL, make_episode, write_cast
from tests.support.tui_data import seed
from tests.support.waiting import wait_for, wait_for_screen

SIZE = (160, 48)


def _screen_text(view: TerminalView) -> str:
    return "\n".join(view.emulator.lines())


def _failing_episode(ws: Workspace) -> int:
    """A failed episode whose verifier prints its failing check at 2.0 s of a 3.0 s recording."""
    eid = make_episode(ws, task="t1", test="test_answer")
    out = PYTEST_FAIL.format(test="test_answer").replace("\n", "\r\n")
    head, _, tail = out.partition("FAILED")
    rec = ws.recordings_dir / f"episode-{eid}" / "verifier.cast"
    write_cast(rec, [(0.5, "o", head), (2.0, "o", "FAILED" + tail), (3.0, "o", "# ")], cols=100, rows=20)
    diagnose_episodes(ws, [eid])
    return eid


async def test_the_verifier_pane_shows_its_output_and_e_follows_a_check_there(workspace: Workspace) -> None:
    eid = _failing_episode(workspace)
    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=SIZE) as pilot:
        screen = ReplayScreen(workspace, episode_id=eid)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: len(screen.players) == 2, what="both casts loaded")
        assert screen.active == "agent"
        await pilot.press("v")
        verifier = screen.players["verifier"]
        assert screen.active == "verifier" and verifier.position == verifier.duration == 3.0
        view = screen.query_one("#view-verifier", TerminalView)
        assert "FAILED tests/test_outputs.py::test_answer" in _screen_text(view)
        assert "00:03.0 / 00:03.0" in screen.status_text()  # tenths: a short cast does not read 00:00
        await pilot.press("v", "home")  # back on the agent, at its start
        assert screen.active == "agent"
        verifier.seek(0.0)
        items = screen.evidence_items()
        check = next(n for n, e in enumerate(items) if e.get("cast") == "verifier")
        screen._evidence_at = check - 1  # the next `e` lands on the failing check
        await pilot.press("e")
        assert screen.active == "verifier"  # the evidence's own terminal
        assert verifier.position == 2.0  # where the quoted line appears, not the end or the start
        assert "FAILED tests/test_outputs.py::test_answer" in _screen_text(view)
        assert app.unexpected == []


async def test_episodes_keeps_its_cursor_when_replay_returns(workspace: Workspace) -> None:
    ids = [make_episode(workspace, task="t1") for _ in range(4)]
    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("8")
        eps = await wait_for_screen(pilot, EpisodesScreen, what="episodes")
        await wait_for(pilot, lambda: len(eps.shown) == 4)
        await pilot.press("down", "down")
        assert present(eps.current).episode_id == ids[2]
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen), what="replay")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is eps, what="back to episodes")
        await pilot.pause()
        assert present(eps.current).episode_id == ids[2]  # was back on the first row after every replay


async def test_generate_opens_the_highlighted_attempt_on_enter(workspace: Workspace) -> None:
    from bandpass.tui.screens.generate import GenerateScreen
    from bandpass.tui.screens.generation import GenerationScreen

    with session(workspace.engine) as s:
        gen = q.create_generation(s, prompt_version="v1-plain", model="claude-haiku-4-5", outcome="rejected")
    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("3")
        await wait_for(pilot, lambda: isinstance(app.screen, GenerateScreen), what="generate")
        table = app.screen.query_one("#gen-history", DataTable)
        await wait_for(pilot, lambda: table.row_count == 1, what="the history")
        assert app.focused is table  # not the form: Enter opens, as the footer says
        await pilot.press("enter")
        attempt = await wait_for_screen(pilot, GenerationScreen, what="the attempt")
        assert attempt.generation_id == gen.id


async def _confirm(pilot: Pilot[Any], app: BandpassApp) -> BatchConfirm:
    await pilot.press("2")
    await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="runs")
    await pilot.press("n")
    return await wait_for_screen(pilot, BatchConfirm, what="the confirmation")


async def test_runs_asks_first_and_leaves_rejected_tasks_out(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``n`` starts nothing: it names the agent, the tasks (task-02 and task-06 are audit-rejected:
    left out, named, ``r`` puts them back), k and the episode count, and where episodes run."""
    vids = seed(workspace, 8)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=SIZE) as pilot:
        dialog = await _confirm(pilot, app)
        text = str(dialog.query_one("#batch-confirm-body", Static).render())
        assert "built-in agent oracle" in text
        assert "tasks     6: task-00, task-01, task-03" in text
        assert "2 audit-rejected left out: task-02, task-06 (r: include)" in text
        assert "1 attempt per task → 6 episodes" in text and "this machine's Docker engine" in text
        assert dialog.request.scope.version_ids == [v for i, v in enumerate(vids) if i not in (2, 6)]
        await pilot.press("r")
        assert len(dialog.request.scope.version_ids) == 8 and "audit-rejected included" in str(
            dialog.query_one("#batch-confirm-body", Static).render()
        )
        await pilot.press("escape")  # nothing starts
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="back to runs")
        with session(workspace.engine) as s:
            assert q.batches(s) == []


async def test_a_confirmed_batch_without_docker_is_one_line_and_nothing_queued(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Yes, with no Docker engine: one red line, nothing queued, the screen free again — it used to hold
    the batch for 300 s waiting for the engine, and the app would not quit meanwhile. (A real batch
    listed at once in the table: tests/tui/screens/test_tui_docker.py.)"""
    seed(workspace, 2)
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=SIZE) as pilot:
        await _confirm(pilot, app)
        await pilot.press("y")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="back to runs")
        runs = app.screen
        await wait_for(
            pilot,
            lambda: any("Docker engine not reachable" in str(n.message) for n in app._notifications),
            what="the one line",
        )
        start = runs.query_one("#runs-start")
        await wait_for(pilot, lambda: not start.disabled, what="Start enabled again")
    with session(workspace.engine) as s:
        assert q.batches(s) == []


async def test_compare_shows_both_terminals_at_the_highlighted_step(workspace: Workspace) -> None:
    """Under the aligned steps, each episode's terminal as it was at the highlighted step's marker:
    step 2 shows the output of steps 0 and 1 and not yet step 2's."""
    from textual.widgets import DataTable

    from bandpass.tui.screens.compare import CompareScreen

    a = make_episode(workspace, task="t1", outcome="passed")
    b = make_episode(workspace, task="t1")
    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=(100, 30)) as pilot:
        screen = CompareScreen(workspace, a, b)
        await app.push_screen(screen)
        left = screen.query_one("#compare-term-left", TerminalView)
        right = screen.query_one("#compare-term-right", TerminalView)
        await wait_for(pilot, lambda: screen.indexes, what="both recordings indexed")
        table = screen.query_one("#compare-steps", DataTable)
        table.move_cursor(row=2)
        await wait_for(pilot, lambda: "output of step 1" in _screen_text(left), what="left at step 2")
        for view in (left, right):
            text = _screen_text(view)
            assert "output of step 1" in text and "output of step 2" not in text
        head = str(screen.query_one("#compare-term-head-right", Static).render())
        assert f"episode {b} · step 2 · the screen at 21.0 s" in head
