"""Every list screen at 80, 100 and 160 columns keeps what a row *is* on screen: the episode and its task
(a cluster and its task, a task), and in the tag queue the ``?`` that marks a suggestion.

Why: at 100 columns the Tag queue and its cluster view dropped the task column (a row was then only a
number), and cutting ``policy.failed_checks?`` to ``policy.failed_…`` made a suggestion read as a tag. The
check reads the screen as drawn (the compositor's lines), not the table's model: a column that is
"shown" but scrolled off, or under the detail pane, fails it too. From 100 columns an outcome code is
whole too (``agent:parse_err…`` named no code), and so are Calibration's gates (pushed off the screen at
100 columns, they hid why a task is not exported) and 30 characters of Search's matching line (it showed
3). The demo workspace is the data.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from textual.widgets import DataTable, Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.search import SearchScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.screens.tasks import TasksScreen
from bandpass.tui.widgets.virtual_table import VirtualTable, shorten_outcome
from tests.support.waiting import wait_for

SIZES = [(80, 24), (100, 30), (160, 48)]


def screen_lines(app: BandpassApp) -> list[str]:
    """The screen as drawn, one string per terminal line."""
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


def shows(line: str, text: str) -> bool:
    """``text`` is on ``line`` whole, or cut to a column's narrowest (11 characters and an ellipsis)."""
    return text in line or (len(text) > 11 and f"{text[:8]}" in line and "…" in line)


async def tasks(pilot: Any, app: BandpassApp) -> None:
    screen = app.screen
    assert isinstance(screen, TasksScreen)
    await wait_for(pilot, lambda: screen.last_load_s is not None, what="tasks loaded")


async def episodes(pilot: Any, app: BandpassApp) -> None:
    await pilot.press("0")
    await pilot.press("8")
    await wait_for(pilot, lambda: isinstance(app.screen, EpisodesScreen), what="Episodes")
    screen = app.screen
    assert isinstance(screen, EpisodesScreen)
    await wait_for(pilot, lambda: len(screen.shown) > 20, what="episodes")


async def tag_queue(pilot: Any, app: BandpassApp) -> None:
    await pilot.press("7")
    await wait_for(pilot, lambda: isinstance(app.screen, TagQueueScreen), what="the Tag queue")
    screen = app.screen
    assert isinstance(screen, TagQueueScreen)
    await wait_for(pilot, lambda: screen.settled and screen.table.row_count > 5, what="the queue")


async def clusters(pilot: Any, app: BandpassApp) -> None:
    await tag_queue(pilot, app)
    await pilot.press("k")
    info = app.screen.query_one("#queue-info", Static)
    await wait_for(pilot, lambda: str(info.content).startswith("cluster "), what="clusters")


async def search(pilot: Any, app: BandpassApp) -> None:
    screen = SearchScreen(app.workspace, query="cat")
    await app.push_screen(screen)
    await wait_for(pilot, lambda: screen.query_one(DataTable).row_count > 0, what="hits")


async def calibration(pilot: Any, app: BandpassApp) -> None:
    await pilot.press("5")
    await wait_for(pilot, lambda: isinstance(app.screen, CalibrationScreen), what="Calibration")
    table = app.screen.query_one("#calib-table", DataTable)
    await wait_for(pilot, lambda: table.row_count > 3, what="the report's tasks")


VIEWS: dict[str, Callable[[Any, BandpassApp], Awaitable[None]]] = {
    "tasks": tasks,
    "episodes": episodes,
    "tag_queue": tag_queue,
    "clusters": clusters,
    "search": search,
    "calibration": calibration,
}
#: The columns that say what a row is, per list screen; the tag queue's tags column carries the marker.
IDENTITY = {
    "tasks": ("task",),
    "episodes": ("episode", "task"),
    "tag_queue": ("episode", "task"),
    "clusters": ("id", "task"),
    "search": ("episode", "task"),
    "calibration": ("task",),
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", list(VIEWS))
async def test_a_list_keeps_its_identities_and_the_suggestion_marker(
    demo: Workspace, view: str, size: tuple[int, int]
) -> None:
    app = BandpassApp(demo, bus=EventBus(), show_path=False)
    async with app.run_test(size=size) as pilot:
        await VIEWS[view](pilot, app)
        await pilot.pause()
        lines = screen_lines(app)
        checked = suggested = 0
        tables: list[VirtualTable | DataTable[Any]] = [*app.screen.query(VirtualTable)] or [
            *app.screen.query(DataTable)
        ]
        table = tables[0]
        top = table.region.y + 1  # under the header
        visible = min(table.region.height - 1, 8)
        if isinstance(table, VirtualTable):
            keys = [c.key for c in table.columns]
            always = {c.key for c in table.columns if c.priority == 0}
            assert always <= {c.key for c in table.shown_columns}
            assert table.virtual_size.width <= table.scrollable_content_region.width, "it scrolls sideways"
            rows = table.shown_rows()[:visible]
        else:
            keys = [str(c.label) for c in table.columns.values()]
            keys = ["id" if k == "cluster" else k for k in keys]
            rows = [tuple(str(c) for c in table.get_row_at(i)) for i in range(min(visible, table.row_count))]
        assert rows, "no rows to check"
        for n, cells in enumerate(rows):
            line = lines[top + n][table.region.x : table.region.right]
            for key in IDENTITY[view]:
                value = cells[keys.index(key)]
                assert shows(line, value), f"{view} at {size}: row {n} lost its {key} {value!r}: {line!r}"
            if size[0] >= 100 and "outcome" in keys:  # a code cut to "agent:parse_err…" names nothing
                code = cells[keys.index("outcome")]
                assert code in line or shorten_outcome(code) in line, f"{view} at {size}: {code}: {line!r}"
            if size[0] >= 100 and view == "calibration":  # why a task is not exported, whole
                gates = cells[keys.index("gates")]
                assert gates in line, f"calibration at {size} lost gates {gates!r}: {line!r}"
            if size[0] >= 100 and view == "search":  # the matching line, not its first 3 characters
                text = cells[keys.index("line")].strip()[:30]
                assert text in line, f"search at {size} cut the line {text!r}: {line!r}"
            if size[0] >= 100 and view == "tasks":  # "undeci…" named no band
                band = cells[keys.index("band")]
                assert band in line, f"tasks at {size} cut the band {band!r}: {line!r}"
            if view == "tag_queue" and cells[keys.index("tags")].endswith("?"):
                suggested += 1
                assert "?" in line, f"the suggestion marker is cut at {size}: {line!r}"
            checked += 1
        assert checked == len(rows)
        if view == "tag_queue":
            assert suggested, "the demo's queue lists suggested rows"
        assert app.unexpected == []


@pytest.mark.parametrize("size", SIZES[1:], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_generate_s_history_shows_what_each_attempt_cost(
    demo: Workspace, size: tuple[int, int]
) -> None:
    """Generate's history listed cost last, cut off the pane at 160 columns: what an attempt cost (the
    demo's two) is on screen, read as drawn."""
    from bandpass.tui.screens.generate import GenerateScreen

    app = BandpassApp(demo, bus=EventBus(), show_path=False)
    async with app.run_test(size=size) as pilot:
        await pilot.press("3")
        await wait_for(pilot, lambda: isinstance(app.screen, GenerateScreen), what="Generate")
        table = app.screen.query_one("#gen-history", DataTable)
        await wait_for(pilot, lambda: table.row_count == 2, what="the demo's two attempts")
        await pilot.pause()
        lines = screen_lines(app)
        region = table.region
        header = lines[region.y][region.x : region.right]
        assert "cost $" in header, header
        costs = [str(table.get_row_at(i)[2]) for i in range(table.row_count)]
        for n, cost in enumerate(costs):
            line = lines[region.y + 1 + n][region.x : region.right]
            assert cost in line, f"the cost {cost!r} is off the pane at {size}: {line!r}"


async def test_replay_s_status_line_is_whole_at_160_columns(demo: Workspace) -> None:
    """Replay's status line was one row high: at 160 columns a step's label pushed the pan hint off, and
    just after ``v`` it read ``cols 1-0``. Every part of it is on screen after each step and a switch."""
    from bandpass.tui.screens.replay import ReplayScreen

    app = BandpassApp(demo, bus=EventBus(), show_path=False)
    async with app.run_test(size=(160, 48)) as pilot:
        await episodes(pilot, app)
        await pilot.press("6")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen), what="Replay")
        screen = app.screen
        assert isinstance(screen, ReplayScreen)
        status = screen.query_one("#replay-status", Static)
        for key in ("]", "]", "]", "v", "]"):
            await pilot.press(key)
            await pilot.pause()
            text = screen.status_text()
            await wait_for(pilot, lambda: str(status.content) == screen.status_text(), what="the status")
            region = status.region
            drawn = " ".join(
                line[region.x : region.right].strip() for line in screen_lines(app)[region.y : region.bottom]
            )
            for part in text.split(" · "):
                assert part in drawn, f"after {key}: {part!r} is not on screen: {drawn!r}"
            assert " 1-0 " not in text, text
        assert app.unexpected == []


@pytest.mark.parametrize("size", SIZES[1:], ids=lambda s: f"{s[0]}x{s[1]}")
async def test_runs_shows_each_batch_s_outcomes_whole(demo: Workspace, size: tuple[int, int]) -> None:
    """Runs listed a batch's outcomes last, and at 100 columns cut the infra count ("agent err 4 · in"):
    each of the demo's batches shows its whole outcome line, read as drawn."""
    from bandpass.tui.widgets.batch_watch import BatchWatch

    app = BandpassApp(demo, bus=EventBus(), show_path=False)
    async with app.run_test(size=size) as pilot:
        await pilot.press("2")
        watch = await wait_for_widget(pilot, app, BatchWatch)
        await wait_for(pilot, lambda: watch.row_count == 2, what="the demo's two batches")
        await pilot.pause()
        lines = screen_lines(app)
        region = watch.region
        drawn = [line[region.x : region.right] for line in lines[region.y : region.bottom]]
        for n in range(watch.row_count):
            row = [str(c) for c in watch.get_row_at(n)]
            outcomes = row[[k for k, _ in watch_columns()].index("outcomes")]
            (line,) = [x for x in drawn if f" {row[0]} " in x]  # its batch id
            assert outcomes in line, f"the outcomes are cut at {size}: {line!r}"


def watch_columns() -> tuple[tuple[str, str], ...]:
    from bandpass.tui.widgets.batch_watch import COLUMNS

    return COLUMNS


async def wait_for_widget(pilot: Any, app: BandpassApp, kind: type[Any]) -> Any:
    await wait_for(pilot, lambda: bool(app.screen.query(kind)), what=kind.__name__)
    return app.screen.query_one(kind)
