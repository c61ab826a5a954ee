"""TerminalView: colours and attributes, wide characters, the alternate screen, neutralised sequences,
repaint throttling, dirty-row-only refreshes, and feeding from plain (non-Textual) threads."""

from __future__ import annotations

import threading
import time

import pytest
from rich.color import Color
from rich.style import Style
from textual.app import App, ComposeResult
from textual.geometry import Region

from bandpass.engine.sandbox.emulator import Screen
from bandpass.tui.widgets.terminal_view import TerminalView
from tests.support.narrow import present
from tests.support.waiting import wait_for


class ViewApp(App[None]):
    def __init__(self, *, max_fps: float = 60.0, show_cursor: bool = True) -> None:
        super().__init__()
        self.max_fps, self.show_cursor = max_fps, show_cursor  # TerminalView's own defaults

    def compose(self) -> ComposeResult:
        yield TerminalView(cols=40, rows=10, max_fps=self.max_fps, show_cursor=self.show_cursor)


def _text(view: TerminalView, y: int = 0) -> str:
    return view.render_line(y).text


def _segments(view: TerminalView, y: int) -> list[tuple[str, Style]]:
    return [(s.text, s.style or Style.null()) for s in view.render_line(y) if s.text.strip()]


async def test_colours_and_attributes() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed(
            "\x1b[31mred\x1b[0m \x1b[38;5;200mc200\x1b[0m \x1b[38;2;10;20;30;48;2;200;100;0mtc\x1b[0m "
            "\x1b[1mB\x1b[0m \x1b[3mI\x1b[0m \x1b[4mU\x1b[0m \x1b[7mR\x1b[0m"
        )
        await wait_for(pilot, lambda: _text(view).startswith("red c200 tc B I U R"))
        segs = dict(_segments(view, 0))
        assert present(segs["red"].color).name == "red"
        assert present(segs["c200"].color).number == 200
        tc = segs["tc"]
        assert tc.color == Color.parse("#0a141e") and tc.bgcolor == Color.parse("#c86400")
        assert segs["B"].bold and segs["I"].italic and segs["U"].underline and segs["R"].reverse


async def test_wide_characters_keep_columns() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("漢字x|")
        await wait_for(pilot, lambda: "x|" in _text(view))
        strip = view.render_line(0)
        assert strip.cell_length == 40
        assert strip.text.startswith("漢字x|")  # 2+2+1 cells, then the bar in column 5


async def test_alternate_screen_and_back() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("$ shell")
        await wait_for(pilot, lambda: _text(view).startswith("$ shell"))
        view.feed("\x1b[?1049h\x1b[2J\x1b[HEDITOR")
        await wait_for(pilot, lambda: _text(view).startswith("EDITOR"))
        assert "shell" not in "".join(_text(view, y) for y in range(10))
        view.feed("\x1b[?1049l")
        await wait_for(pilot, lambda: _text(view).startswith("$ shell"))


async def test_sequences_that_would_reach_the_real_terminal_are_neutralised() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("\x1b]52;c;aGVsbG8=\x07\x1b]0;pwned\x07\x1b]8;;http://evil\x07link\x1b]8;;\x07 ok")
        await wait_for(pilot, lambda: "ok" in _text(view))
        strip = view.render_line(0)
        assert strip.text.rstrip() == "link ok"
        for seg in strip:
            assert "\x1b" not in seg.text and "\x07" not in seg.text
            assert seg.style is None or not seg.style.link


async def test_cursor_is_drawn_and_follows() -> None:
    app = ViewApp()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("ab")

        def cells() -> tuple[object, object, object]:
            line = view.render_line(0)
            _, cell, rest = line.divide([2, 3, line.cell_length])
            (seg,) = list(cell)
            return seg.text, seg.style, next(iter(rest)).style

        # the cursor cell after 'ab' is styled apart (drawn on the next paint)
        await wait_for(
            pilot, lambda: _text(view).startswith("ab") and cells()[0] == " " and cells()[1] != cells()[2]
        )
        plain = cells()[2]
        view.feed("\r\nnext")
        await wait_for(pilot, lambda: _text(view, 1).startswith("next"))
        await wait_for(pilot, lambda: view.render_line(0).divide([2, 3])[1]._segments[0].style == plain)


async def test_small_pane_follows_the_cursor() -> None:
    """A grid cell shorter than the screen shows the rows around the cursor (the prompt), not row 0."""
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 4)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("\r\n".join(f"line{i}" for i in range(9)))
        await wait_for(pilot, lambda: _text(view, 3).startswith("line8"))
        assert _text(view, 0).startswith("line5")


async def test_burst_of_output_is_throttled() -> None:
    """However fast output arrives, the pane paints at most ``max_fps`` times a second of wall time
    (measured, so a loaded machine only loosens the bound), and the last output is painted."""
    app = ViewApp(max_fps=20)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        await wait_for(pilot, lambda: view.paint_count >= 1)  # the first paint after mounting
        before = view.paint_count
        started = time.perf_counter()
        for i in range(2000):
            view.feed(f"{i}\r\n")
            if i % 20 == 0:
                await pilot.pause()  # let the app run between chunks, as a live episode does
        await wait_for(pilot, lambda: "1999" in "".join(_text(view, y) for y in range(10)))
        painted = view.paint_count - before
        allowed = (time.perf_counter() - started) * 20 + 2  # 20 fps over the time taken, plus the edges
        assert 1 <= painted <= allowed, (painted, allowed)
        assert painted < 100  # 100 chunks were fed: paints were coalesced


async def test_only_dirty_rows_are_refreshed(monkeypatch: pytest.MonkeyPatch) -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("\r\n".join(f"row{i}" for i in range(5)))
        await wait_for(pilot, lambda: _text(view, 4).startswith("row4"))
        await wait_for(pilot, view.up_to_date)  # everything painted
        regions: list[tuple[Region, ...]] = []
        real = view.refresh

        def spy(*r: Region, **kw: bool) -> TerminalView:
            regions.append(r)
            return real(*r, **kw)

        monkeypatch.setattr(view, "refresh", spy)
        view.feed("\x1b[2;1Hchanged")  # row 1 only
        await wait_for(pilot, lambda: regions and _text(view, 1).startswith("changed"))
        assert regions and all(r for r in regions), "partial refreshes, never a full repaint"
        rows = {y for call in regions for reg in call for y in range(reg.y, reg.y + reg.height)}
        assert rows <= {1, 4}, rows  # the changed row, and the row the cursor left


async def test_feed_from_a_plain_thread() -> None:
    """Engine threads are plain threading.Threads (no Textual context): feeding must still repaint."""
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        t = threading.Thread(target=lambda: view.feed("from a thread"))
        t.start()
        t.join()
        before = view.paint_count
        await wait_for(pilot, lambda: view.paint_count > before and _text(view).startswith("from a thread"))


async def test_set_screen_swaps_content() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("old")
        other = Screen(40, 10)
        other.feed("restored keyframe")
        snap = Screen.restore(other.snapshot())
        view.set_screen(snap)
        assert view.emulator is snap
        await wait_for(pilot, lambda: _text(view).startswith("restored keyframe"))


def _visible_text(view: TerminalView) -> list[str]:
    return [view.render_line(y).text.rstrip() for y in range(view.size.height)]


def _expected_text(view: TerminalView) -> list[str]:
    """What the screen holds in the rows the pane shows (it follows the cursor when it is smaller)."""
    lines = view.emulator.lines()
    top = max(view._origin[1], 0)
    return [line[: view.size.width].rstrip() for line in lines[top : top + view.size.height]]


async def test_a_pane_fed_from_a_thread_shows_the_right_screen_after_many_updates() -> None:
    """Thousands of chunks from an engine-like thread, frames built off the UI thread: what the pane
    finally shows is exactly the emulated screen's rows (text and colours), nothing older."""
    from bandpass.tui.widgets.feed_pump import pump

    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 6)) as pilot:
        view = app.query_one(TerminalView)

        def publisher() -> None:
            for i in range(3000):
                view.feed(f"\x1b[3{i % 7 + 1}mline {i}\x1b[0m {'x' * (i % 30)}\r\n")

        t = threading.Thread(target=publisher)
        t.start()
        t.join()
        await wait_for(pilot, lambda: pump.pending() == 0 and view.up_to_date(), what="all painted")
        assert view.paint_count < 3000  # frames were coalesced
        assert _visible_text(view) == _expected_text(view)
        assert _visible_text(view)[-2].startswith("line 2999")
        (seg,) = [s for s in view.render_line(4) if s.text.startswith("line")]
        assert present(present(seg.style).color).name == "blue"  # SGR 3(2999 % 7 + 1) = 34


async def test_a_hidden_pane_builds_no_frames_and_catches_up_when_shown() -> None:
    """While another screen is shown, a pane that keeps receiving output does no rendering work; shown
    again, it shows the latest screen at once."""
    from textual.screen import Screen as TextualScreen
    from textual.widgets import Static

    from bandpass.tui.widgets.feed_pump import pump

    class Other(TextualScreen[None]):
        def compose(self) -> ComposeResult:
            yield Static("another screen")

    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 6)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("before\r\n")
        await wait_for(pilot, lambda: "before" in "".join(_visible_text(view)))
        await app.push_screen(Other())
        await wait_for(pilot, lambda: not view._is_visible())
        built = view.frames_built
        for i in range(50):
            threading.Thread(target=view.feed, args=(f"hidden {i}\r\n",)).start()
            await pilot.pause(0.01)
        await wait_for(pilot, lambda: pump.pending() == 0)
        await pilot.pause(0.1)
        assert view.frames_built - built <= 1  # at most the frame that learned it was hidden
        app.pop_screen()
        await wait_for(pilot, lambda: _visible_text(view)[-2] == "hidden 49", what="caught up")
        assert _visible_text(view) == _expected_text(view)
