"""The TUI's search, driven by keys on the real sample episodes: ctrl+f from any screen, Enter into Replay
on the frame where the hit is visible (highlighted), n/N through the episode's hits, / inside Replay,
tag all listed episodes, add to compare."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import DataTable, Static

from bandpass.engine.audit.samples import load_samples
from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.search_index import build_index
from bandpass.engine.review.tagging import Tagger
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import pk
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.compare import CompareScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.search import SearchScreen, split_filters
from bandpass.tui.screens.tag_dialog import TagDialog
from bandpass.tui.widgets.search_bar import SearchBar
from bandpass.tui.widgets.terminal_view import TerminalView
from tests.support.host import Host
from tests.support.narrow import present
from tests.support.paths import EXAMPLES, REPO
from tests.support.waiting import wait_for

SAMPLES = REPO / "recordings" / "samples"
SIZE = (170, 48)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    ws = Workspace.open(tmp_path / "ws")
    assert import_paths(ws, [EXAMPLES]).ok
    assert load_samples(ws, SAMPLES) > 0
    return ws


async def _search(pilot: Pilot[Any], app: App[Any], query: str) -> SearchScreen:
    await pilot.press("ctrl+f")
    await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen), what="search screen open")
    screen = app.screen
    assert isinstance(screen, SearchScreen)
    await wait_for(pilot, lambda: not screen.indexing, what="index brought up to date")
    await pilot.press(*query, "enter")
    text, _filters = split_filters(query)
    await wait_for(pilot, lambda: screen.result is not None and screen.result.query == text, what="results")
    return screen


def _view(replay: ReplayScreen, kind: str = "agent") -> TerminalView:
    return replay.query_one(f"#view-{kind}", TerminalView)


def _highlighted(view: TerminalView) -> list[str]:
    """The text under each highlight mark of the view's screen."""
    rows = view.emulator.lines()
    return [rows[y][a:b] for y, marks in sorted(view.highlights.items()) for a, b in marks]


async def test_a_hit_that_scrolled_away_opens_replay_on_its_frame_highlighted(ws: Workspace) -> None:
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("1")  # from another area: ctrl+f is the app's
        search = await _search(pilot, app, '"line 200"')
        assert len(search.rows) == 1 and search.rows[0].text == "line 200"
        assert "line 199" in str(search.query_one("#search-context", Static).content)  # the hit in context
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen), what="replay open")
        replay = app.screen
        assert isinstance(replay, ReplayScreen)
        view = _view(replay)
        await wait_for(pilot, lambda: _highlighted(view) == ["line 200"], what="the match highlighted")
        assert "line 200" in view.emulator.lines()  # on screen: the frame mid-write where it is visible
        bar = replay.query_one(SearchBar)
        assert "match 1 of 1" in bar.status and "scrolled past" in bar.status and "step 0" in bar.status
        # Playing on brings the player's own screen back, without the marks.
        await pilot.press("space")
        await wait_for(
            pilot, lambda: view.emulator is present(replay.player).screen, what="player's screen back"
        )
        await wait_for(pilot, lambda: not view.highlights, what="marks gone once the screen moved")


@pytest.mark.slow
async def test_n_and_shift_n_step_through_the_episodes_hits(ws: Workspace) -> None:
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=SIZE) as pilot:
        search = await _search(pilot, app, ">>> task:configure-kv-service")
        assert {h.episode_id for h in search.rows} == {search.rows[0].episode_id}  # the stuck-REPL episode
        await pilot.press("enter")
        await wait_for(pilot, lambda: isinstance(app.screen, ReplayScreen), what="replay open")
        replay = app.screen
        assert isinstance(replay, ReplayScreen)
        view = _view(replay)
        hits = replay.search.hits
        assert len(hits) >= 4 and replay.search.at == 0
        await wait_for(pilot, lambda: ">>>" in _highlighted(view), what="first hit highlighted")
        seen = []
        for _ in range(len(hits)):
            await pilot.press("n")
            at = replay.search.at
            seen.append(at)
            await wait_for(pilot, lambda: _highlighted(view) and set(_highlighted(view)) == {">>>"})
            assert replay.player is not None
            assert replay.player.position == pytest.approx(hits[at].time, abs=1e-3)
        assert seen == [*range(1, len(hits)), 0]  # forward through all, wrapping to the first
        await pilot.press("N")
        assert replay.search.at == len(hits) - 1


async def test_slash_in_replay_searches_the_whole_cast_including_what_scrolled_away(tmp_path: Path) -> None:
    cast = tmp_path / "agent.cast"  # a copy: Replay saves its keyframe index beside the cast
    shutil.copyfile(REPO / "recordings" / "samples" / "policy-context-truncated" / "agent.cast", cast)
    replay = ReplayScreen(None, cast_path=cast)  # a bare cast file: no index, no workspace
    async with Host(replay).run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: replay.player is not None, what="cast loaded")
        await pilot.press("slash")
        bar = replay.query_one(SearchBar)
        assert bar.input.has_focus
        await pilot.press(*'"line 44"*', "enter")  # line 44 (step 0), lines 440-449 (step 1)
        await wait_for(pilot, lambda: replay.search.hits, what="hits")
        texts = [h.text for h in replay.search.hits]
        assert texts == ["line 44", *(f"line {n}" for n in range(440, 450))]  # in the order they appeared
        await wait_for(pilot, lambda: _highlighted(_view(replay)) == ["line 44"], what="first hit shown")
        await pilot.press("n")

        # The next hit's frame, the hit marked; other hits written in the same terminal write are on that
        # frame too and marked with it (how the pty splits `seq` output into writes varies run to run)
        def next_hit_marked() -> bool:
            marked = _highlighted(_view(replay))
            return "line 440" in marked and set(marked) <= set(texts)

        await wait_for(pilot, next_hit_marked, what="next hit shown")
        assert replay.player is not None
        assert replay.player.position == pytest.approx(replay.search.hits[1].time, abs=1e-3)
        assert "line 440" in _view(replay).emulator.lines()
        await pilot.press("slash", "escape")  # Escape closes the bar, and stays in Replay
        assert app_screen_is(replay)


def app_screen_is(screen: Screen[Any]) -> bool:
    return screen.app.screen is screen


async def test_tag_all_listed_episodes_and_add_two_to_compare(ws: Workspace) -> None:
    build_index(ws)
    tagger = Tagger(ws, author="tester")
    screen = SearchScreen(ws, query='"FAIL: blank.txt N=None" terminal:verifier', tagger=tagger)
    async with Host(screen).run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: screen.result is not None, what="results")
        assert screen.result is not None
        listed = [e.episode_id for e in screen.result.episodes]
        assert len(listed) >= 3 and all(h.terminal == "verifier" for h in screen.rows)
        with session(ws.engine) as s:
            before = {e: sorted(pk(t) for t in queries.tags_for_episode(s, e)) for e in listed}
        screen.query_one(DataTable).focus()
        await pilot.press("t")
        await wait_for(pilot, lambda: isinstance(screen.app.screen, TagDialog), what="tag dialog")
        await pilot.press("3", "enter")  # misalignment, its first subclass
        await wait_for(pilot, lambda: isinstance(screen.app.screen, SearchScreen), what="dialog closed")
        with session(ws.engine) as s:
            tagged = {
                e for e in listed for t in queries.tags_for_episode(s, e) if t.tag_class == "misalignment"
            }
        assert tagged == set(listed)
        await pilot.press("u")  # one undo takes the whole tag back (the curators' own tags stay)
        with session(ws.engine) as s:
            assert {e: sorted(pk(t) for t in queries.tags_for_episode(s, e)) for e in listed} == before

        # a on one hit, then on a hit of another episode: Compare opens on the two.
        table = screen.query_one(DataTable)
        first = screen.rows[0].episode_id
        await pilot.press("a")
        assert screen.compare == [first]
        other = next(n for n, h in enumerate(screen.rows) if h.episode_id != first)
        table.move_cursor(row=other)
        await pilot.press("a")
        await wait_for(pilot, lambda: isinstance(screen.app.screen, CompareScreen), what="compare open")
        compare = screen.app.screen
        assert isinstance(compare, CompareScreen)
        assert compare.ids == (first, screen.rows[other].episode_id)


def test_filter_words_are_split_off_the_query() -> None:
    assert split_filters('task:x "a b:c" agent:y kv.ini') == ('"a b:c" kv.ini', {"task": "x", "agent": "y"})
    assert split_filters("outcome:failed") == ("", {"outcome": "failed"})
