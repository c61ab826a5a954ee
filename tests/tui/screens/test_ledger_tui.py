"""The Calibration screen's Ledger tab: undecided tasks, what another round costs, the band history, and
``a`` running that round for real (Docker)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest
from textual.app import App
from textual.widgets import DataTable, Static, TabbedContent

from bandpass.engine.calibration import ledger
from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.confirm import ConfirmDialog
from tests.support.calib_data import add_episodes, add_task, outcomes
from tests.support.footprints import footprints_known
from tests.support.narrow import present
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_for

M = "qwen-9b"


class _Host(App[None]):
    def __init__(self, ws: Workspace, model: str) -> None:
        super().__init__()
        self.ws, self.model = ws, model
        self.bus = EventBus()

    def on_mount(self) -> None:
        self.push_screen(CalibrationScreen(self.ws, model=self.model))


def _plain(widget: Static) -> str:
    from rich.console import Console

    console = Console(record=True, width=200, color_system=None)
    console.print(widget.content)
    return console.export_text()


async def test_ledger_tab_lists_undecided_tasks_the_round_cost_and_the_history(workspace: Workspace) -> None:
    ws = workspace
    for name, outs in {
        "decided-in": outcomes(30, 60),
        "near-top": outcomes(6, 0),  # two more passes settle it above
        "never": outcomes(0, 10),  # "below 0.1" is ~40 episodes away: ranked far behind
        "fresh": [],  # never run: the first round tops it up
    }.items():
        vid, _ = add_task(ws, name)
        add_episodes(ws, vid, M, outs)
    host = _Host(ws, M)
    async with host.run_test(size=(170, 50)) as pilot:
        screen = host.screen
        assert isinstance(screen, CalibrationScreen)
        await wait_for(pilot, lambda: screen.report is not None, what="report built")
        await pilot.press("l")
        assert screen.query_one("#calib-tabs", TabbedContent).active == "calib-tab-ledger"
        head = _plain(screen.query_one("#calib-ledger-head", Static))
        assert "1 decided (in 1 · below 0 · above 0) · 3 undecided" in head and "90% confidence" in head
        table = screen.query_one("#calib-ledger-table", DataTable)
        rows = [table.get_row_at(i) for i in range(table.row_count)]
        assert rows[0][0] == "near-top" and {r[0] for r in rows} == {"near-top", "never", "fresh"}
        by_task = {r[0]: r for r in rows}
        assert by_task["near-top"][5] == "hi"  # the edge still open
        assert float(by_task["near-top"][6]) > 10 * float(by_task["never"][6]) > 0  # edges per episode
        assert by_task["fresh"][6] == "first round"
        # the first round tops up the task never run: 1 episode, and nothing else this round
        assert screen.next_round is not None and screen.next_round.attempts == {
            e.version_id: 1 for e in present(screen.report).estimates if e.task == "fresh"
        }
        assert by_task["fresh"][7] == "1"
        cost = _plain(screen.query_one("#calib-ledger-round", Static))
        assert "Another round would cost 1 episode on 1 task (first round" in cost and "press a" in cost
        # the band history of the highlighted task, from the ledger the screen just wrote
        table.focus()
        table.move_cursor(row=0)
        await pilot.pause()
        history = _plain(screen.query_one("#calib-ledger-history", Static))
        assert "Band history of near-top" in history and "undecided" in history and "(tui)" in history
        assert [h.decision for h in ledger.task_history(ws, "decided-in")] == ["in"]
        await pilot.press("r")  # a refresh with the same evidence writes no second row
        await pilot.pause()
        assert len(ledger.task_history(ws, "decided-in")) == 1


@pytest.mark.docker
async def test_a_runs_the_round_it_showed(workspace: Workspace, tmp_path: Path) -> None:
    """``a`` asks first (``n`` starts nothing), then queues exactly the round the Ledger tab priced, runs
    it on Docker, and the tab follows it."""
    ws = workspace
    dirs = [
        make_task(tmp_path / "src", f"round-{c}", instruction=f"Write 42 into /app/answer.txt ({c}).")
        for c in "ab"
    ]
    assert import_paths(ws, dirs).ok
    footprints_known(ws)  # the round's own episode is the evidence, not the footprint's oracle
    with session(ws.engine) as s:
        vids = {r.name: r.version_id for r in queries.task_rows(s)}
    add_episodes(
        ws, vids["round-a"], "oracle", outcomes(3, 0)
    )  # enough to rank; round-b gets its first round
    host = _Host(ws, "oracle")
    async with host.run_test(size=(170, 50)) as pilot:
        screen = host.screen
        assert isinstance(screen, CalibrationScreen)
        await wait_for(pilot, lambda: screen.next_round is not None, what="round priced")
        planned = dict(present(screen.next_round).attempts)
        assert planned == {vids["round-b"]: 1}
        await pilot.press("l", "a")  # asks first, naming what the round would spend
        await wait_for(pilot, lambda: isinstance(host.screen, ConfirmDialog), what="the question")
        question = host.screen.query_one("#confirm-question", Static).content
        assert str(question).startswith("Run a first round of model oracle")
        assert "1 episode on 1 task (round-b)" in str(question) and "oracle" in str(question)
        await pilot.press("n")  # declined: nothing starts
        await wait_for(pilot, lambda: host.screen is screen, what="the question closed")
        await pilot.pause()
        assert screen.round_batch is None and screen._round_stop is None
        with session(ws.engine) as s:
            assert queries.episodes(s, version_id=vids["round-b"]) == []
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(host.screen, ConfirmDialog), what="the question again")
        await pilot.press("y")
        await wait_for(pilot, lambda: screen.round_batch is not None, what="round started", timeout=60)
        await wait_for(
            pilot,
            lambda: screen._round_stop is None and screen.round_status is not None,
            what="round finished",
            timeout=240,
        )
        bid = screen.round_batch
        with session(ws.engine) as s:
            eps = queries.episodes(s, batch_id=bid)
            batch = queries.get_batch(s, present(bid))
        assert Counter(e.task_version_id for e in eps) == Counter(planned)  # exactly the priced round
        assert all(e.outcome == "passed" for e in eps)
        assert batch is not None and queries.adaptive_settings(batch)["stopped"] == "budget spent"
        assert "Last round" in _plain(screen.query_one("#calib-ledger-round", Static))
        assert [h.n for h in ledger.task_history(ws, "round-b")][-1] == 1  # the ledger saw the new evidence
