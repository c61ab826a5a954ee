"""No screen starts costly work without a confirmation that says what it spends.

Every key that costs containers, tokens or minutes — Tasks' audit, Runs' batch, Generate's generation,
Calibration's round, a Claude review from the Tag queue or Replay — is pressed on the demo workspace;
each must put up a question naming the spend, and answering no must leave the store as it was (no
episode, generation or review row) with no costly worker running. An empty Tasks filter never widens a
batch to every task."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import text
from textual.notifications import Notification
from textual.widgets import Input, Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.batch_confirm import BatchConfirm
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.confirm import ConfirmDialog
from bandpass.tui.screens.generate import GenerateScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.runs import RunsScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.screens.tasks import TasksScreen
from bandpass.tui.widgets.virtual_table import VirtualTable
from tests.support.narrow import present
from tests.support.waiting import wait_for, wait_for_screen

COSTLY_GROUPS = {"tasks-audit", "gen-run", "calib-round", "review", "runs-batch"}


def _counts(ws: Workspace) -> tuple[int, ...]:
    with ws.engine.connect() as c:
        return tuple(
            c.execute(text(f"SELECT count(*) FROM {t}")).scalar_one()
            for t in ("episode", "generation", "review_suggestion", "audit", "batch")
        )


def _costly_workers(app: Any) -> list[str]:
    return [w.group for w in app.workers if w.group in COSTLY_GROUPS and not w.is_finished]


async def _asks(pilot: Any, app: Any, keys: tuple[str, ...], *spends: str) -> str:
    """Presses ``keys``; a question must come up naming each of ``spends``; answers no."""
    await pilot.press(*keys)
    await wait_for(
        pilot, lambda: isinstance(app.screen, ConfirmDialog | BatchConfirm), what=f"a question after {keys}"
    )
    dialog = app.screen
    shown = (
        str(dialog.query_one("#confirm-question", Static).content)
        if isinstance(dialog, ConfirmDialog)
        else " ".join(str(w.content) for w in dialog.query(Static))
    )
    for word in spends:
        assert word in shown, f"{keys}: the question does not say {word!r}: {shown}"
    await pilot.press("n")
    await wait_for(pilot, lambda: app.screen is not dialog, what="the question answered no")
    await pilot.pause()
    assert _costly_workers(app) == [], f"{keys} started work although declined"
    return shown


@pytest.mark.parametrize("size", [(160, 48)])
async def test_every_costly_key_asks_first_and_no_starts_nothing(
    demo: Workspace, size: tuple[int, int]
) -> None:
    before = _counts(demo)
    app = BandpassApp(demo, bus=EventBus(), show_path=False, start="tasks")
    async with app.run_test(size=size) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TasksScreen), what="Tasks")
        tasks = app.screen
        table = tasks.query_one(VirtualTable)
        await wait_for(pilot, lambda: table.row_count > 0 and table.has_focus, what="the tasks listed")
        await _asks(pilot, app, ("a",), "Audit ", "Docker containers", "minutes")

        await pilot.press("2")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="Runs")
        await _asks(pilot, app, ("n",), "episode")

        await pilot.press("3")
        await wait_for(pilot, lambda: isinstance(app.screen, GenerateScreen), what="Generate")
        shown = await _asks(pilot, app, ("n",), "Generate 5 tasks", "tokens", "Docker", "$")
        assert "at most $" in shown

        await pilot.press("5")
        calib = await wait_for_screen(pilot, CalibrationScreen, what="Calibration")
        await wait_for(pilot, lambda: calib.next_round is not None, what="a round priced", timeout=30)
        assert present(calib.next_round).attempts
        shown = await _asks(pilot, app, ("l", "a"), "Run a", "episode", "Docker engine")
        assert "Run an first" not in shown
        rejected = calib.round_rejected
        assert rejected and all(name in shown for name in rejected)  # named, and left out
        planned = set(present(calib.next_round).attempts)
        assert planned <= set(calib.round_versions)

        await pilot.press("7")
        queue = await wait_for_screen(pilot, TagQueueScreen, what="Tag queue")
        await wait_for(pilot, lambda: queue.settled, what="the queue")
        await _asks(pilot, app, ("R",), "Claude", "spends tokens")
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen), what="Replay")
        await _asks(pilot, app, ("R",), "Claude", "spends tokens")
    assert _counts(demo) == before


async def test_an_empty_tasks_filter_runs_nothing(demo: Workspace) -> None:
    before = _counts(demo)
    app = BandpassApp(demo, bus=EventBus(), show_path=False, start="tasks")
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, TasksScreen), what="Tasks")
        tasks = app.screen
        table = tasks.query_one(VirtualTable)
        await wait_for(pilot, lambda: table.row_count > 0 and table.has_focus, what="the tasks listed")
        await pilot.press("slash")
        search = tasks.query_one("#task-search", Input)
        await wait_for(pilot, lambda: search.has_focus, what="the search field")
        await pilot.press(*"no such task at all", "enter")
        await wait_for(pilot, lambda: app.task_scope == [], what="an empty filter")
        await wait_for(pilot, lambda: table.has_focus, what="Enter hands the keys back to the table")
        await pilot.press("2")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="Runs")
        await pilot.press("n")
        await wait_for(
            pilot,
            lambda: any("shows no tasks: nothing to run" in str(n.message) for n in app._notifications),
            what="the refusal",
        )
        assert not isinstance(app.screen, BatchConfirm) and _costly_workers(app) == []
    assert _counts(demo) == before


async def test_r_on_an_empty_queue_is_a_warning_not_a_failure(workspace: Workspace) -> None:
    """``R`` with nothing in the Tag queue said "review failed": it is a warning that names why, and
    nothing is asked or spent."""
    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await pilot.press("7")
        queue = await wait_for_screen(pilot, TagQueueScreen, what="Tag queue")
        await wait_for(pilot, lambda: queue.settled, what="the empty queue")
        await pilot.press("R")

        def said() -> list[Notification]:
            return [n for n in app._notifications if "review" in str(n.message)]

        await wait_for(pilot, lambda: bool(said()), what="a word about the review")
        (note,) = said()
        assert note.severity == "warning" and "nothing to review" in str(note.message), note.message
        assert "failed" not in str(note.message) and "failed" not in (note.title or "")
        assert not isinstance(app.screen, ConfirmDialog)
        assert app.unexpected == []
