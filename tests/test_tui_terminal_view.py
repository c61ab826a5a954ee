"""TerminalView: colours and attributes, wide characters, the alternate screen, neutralised sequences,
repaint throttling, dirty-row-only refreshes, and feeding from plain (non-Textual) threads."""

from __future__ import annotations

import threading

from rich.color import Color
from textual.app import App, ComposeResult

from engine.sandbox.emulator import Screen
from tui.widgets.terminal_view import TerminalView


class ViewApp(App[None]):
    def __init__(self, **kw: object) -> None:
        super().__init__()
        self.kw = kw

    def compose(self) -> ComposeResult:
        yield TerminalView(cols=40, rows=10, **self.kw)  # type: ignore[arg-type]


def _segments(view: TerminalView, y: int) -> list[tuple[str, object]]:
    return [(s.text, s.style) for s in view.render_line(y) if s.text.strip()]


async def test_colours_and_attributes() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed(
            "\x1b[31mred\x1b[0m \x1b[38;5;200mc200\x1b[0m \x1b[38;2;10;20;30;48;2;200;100;0mtc\x1b[0m "
            "\x1b[1mB\x1b[0m \x1b[3mI\x1b[0m \x1b[4mU\x1b[0m \x1b[7mR\x1b[0m"
        )
        await pilot.pause(0.05)
        segs = dict(_segments(view, 0))
        assert segs["red"].color.name == "red"  # type: ignore[attr-defined]
        assert segs["c200"].color.number == 200  # type: ignore[attr-defined]
        tc = segs["tc"]
        assert tc.color == Color.parse("#0a141e") and tc.bgcolor == Color.parse("#c86400")  # type: ignore[attr-defined]
        assert segs["B"].bold and segs["I"].italic and segs["U"].underline and segs["R"].reverse  # type: ignore[attr-defined]


async def test_wide_characters_keep_columns() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("漢字x|")
        await pilot.pause(0.05)
        strip = view.render_line(0)
        assert strip.cell_length == 40
        assert strip.text.startswith("漢字x|")  # 2+2+1 cells, then the bar in column 5


async def test_alternate_screen_and_back() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("$ shell")
        await pilot.pause(0.05)
        view.feed("\x1b[?1049h\x1b[2J\x1b[HEDITOR")
        await pilot.pause(0.05)
        assert view.render_line(0).text.startswith("EDITOR")
        view.feed("\x1b[?1049l")
        await pilot.pause(0.05)
        assert view.render_line(0).text.startswith("$ shell")


async def test_sequences_that_would_reach_the_real_terminal_are_neutralised() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("\x1b]52;c;aGVsbG8=\x07\x1b]0;pwned\x07\x1b]8;;http://evil\x07link\x1b]8;;\x07 ok")
        await pilot.pause(0.05)
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
        await pilot.pause(0.05)
        line = view.render_line(0)
        _, cell, rest = line.divide([2, 3, line.cell_length])
        (seg,) = list(cell)
        plain = next(iter(rest)).style
        assert seg.text == " " and seg.style != plain, "the cursor cell after 'ab' is styled apart"
        view.feed("\r\nnext")
        await pilot.pause(0.05)
        assert view.render_line(0).divide([2, 3])[1]._segments[0].style == plain  # old cell repainted


async def test_small_pane_follows_the_cursor() -> None:
    """A grid cell shorter than the screen shows the rows around the cursor (the prompt), not row 0."""
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 4)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("\r\n".join(f"line{i}" for i in range(9)))
        await pilot.pause(0.05)
        assert view.render_line(3).text.startswith("line8")


async def test_burst_of_output_is_throttled() -> None:
    app = ViewApp(max_fps=20)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        await pilot.pause(0.05)
        before = view.paint_count
        for i in range(2000):
            view.feed(f"{i}\r\n")
        await pilot.pause(0.3)
        painted = view.paint_count - before
        assert 1 <= painted <= 10, painted  # 2000 feeds in 0.3 s at 20 fps: a handful of paints
        assert "1999" in "".join(view.render_line(y).text for y in range(10))


async def test_only_dirty_rows_are_refreshed(monkeypatch) -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("\r\n".join(f"row{i}" for i in range(5)))
        await pilot.pause(0.1)
        regions: list = []
        real = view.refresh

        def spy(*r, **kw):  # noqa: ANN002, ANN003, ANN202
            regions.append(r)
            return real(*r, **kw)

        monkeypatch.setattr(view, "refresh", spy)
        view.feed("\x1b[2;1Hchanged")  # row 1 only
        await pilot.pause(0.1)
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
        await pilot.pause(0.1)
        assert view.render_line(0).text.startswith("from a thread")
        assert view.paint_count >= 1


async def test_set_screen_swaps_content() -> None:
    app = ViewApp(show_cursor=False)
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        view.feed("old")
        other = Screen(40, 10)
        other.feed("restored keyframe")
        snap = Screen.restore(other.snapshot())
        view.set_screen(snap)
        await pilot.pause(0.05)
        assert view.emulator is snap
        assert view.render_line(0).text.startswith("restored keyframe")
