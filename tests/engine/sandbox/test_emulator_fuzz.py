"""Bad input stays harmless: random bytes, truncated escape sequences and huge parameters never crash the
emulator or the terminal widget, and the screen keeps its shape (a task's output is adversarial)."""

from __future__ import annotations

import random

from textual.app import App, ComposeResult

from bandpass.engine.sandbox.emulator import Screen, SnapshotError
from bandpass.tui.widgets.terminal_view import TerminalView

SEQUENCES = [
    "\x1b[31m",
    "\x1b[38;5;200m",
    "\x1b[38;2;1;2;3m",
    "\x1b[?1049h",
    "\x1b[?1049l",
    "\x1b[2J",
    "\x1b[3;6r",
    "\x1b[5;10H",
    "\x1b]0;title\x07",
    "\x1b]52;c;aGVsbG8=\x07",
    "\x1b]8;;http://x\x1b\\",
    "\x1b]133;A\x07",
    "\x1bP+q544e\x1b\\",
    "\x1b[6n",
    "\x1b(0lqk\x1b(B",
    "日本",
    "e\u0301",
    "\u200d\U0001f469",
    "\r\n",
    "\t",
]
HUGE = [
    "\x1b[99999999999;99999999999H",
    "\x1b[999999999999999999999999L",
    "\x1b[4294967296M",
    "\x1b[38;5;99999m",
    "\x1b[38;2;999;999;999m",
    "\x1b[?99999h",
    "\x1b[1;99999r",
    "\x1b[8;9999;9999t",
    "\x1b[99999@",
    "\x1b[99999P",
    "\x1b[99999X",
    "\x1b[1000b",
    "\x1b[" + ";".join(["1"] * 500) + "m",
    "\x1b]" + "x" * 70000 + "\x07",
    "e" + "\u0301" * 300,
]


def _case(r: random.Random) -> list[str | bytes]:
    """A few chunks mixing text, valid sequences cut anywhere, huge parameters and random bytes."""
    out: list[str | bytes] = []
    for _ in range(r.randint(1, 6)):
        k = r.random()
        if k < 0.3:
            out.append(bytes(r.getrandbits(8) for _ in range(r.randint(1, 200))))
        elif k < 0.55:
            seq = r.choice(SEQUENCES + HUGE)
            out.append(seq[: r.randint(1, len(seq))])  # truncated anywhere
        elif k < 0.75:
            out.append(r.choice(HUGE))
        else:
            out.append("".join(r.choice(SEQUENCES) + "word " for _ in range(r.randint(1, 10))))
    return out


def _check_shape(s: Screen) -> None:
    lines, rows = s.lines(), s.styled_rows()
    assert len(lines) == s.rows and len(rows) == s.rows
    assert all(len(row) == s.cols for row in rows)
    x, y = s.cursor()
    assert 0 <= x < s.cols and 0 <= y < s.rows
    assert s.dirty <= set(range(s.rows))


def test_three_thousand_hostile_streams_never_crash_the_emulator() -> None:
    r = random.Random(18)
    restored = 0
    for n in range(3000):
        s = Screen(r.randint(1, 50), r.randint(1, 12))
        for chunk in _case(r):
            s.feed(chunk)
            if r.random() < 0.1:
                s.resize(r.randint(1, 60), r.randint(1, 15))
        _check_shape(s)
        if n % 10 == 0:
            try:
                snap = s.snapshot()
            except SnapshotError:
                continue
            t = Screen.restore(snap)
            assert t.lines() == s.lines() and t.cursor() == s.cursor(), n
            t.feed("after")
            _check_shape(t)
            restored += 1
    assert restored > 250


class FuzzApp(App[None]):
    def compose(self) -> ComposeResult:
        yield TerminalView(cols=40, rows=10)


async def test_hostile_streams_never_crash_the_widget_and_no_control_reaches_the_real_terminal() -> None:
    r = random.Random(1818)
    app = FuzzApp()
    async with app.run_test(size=(40, 10)) as pilot:
        view = app.query_one(TerminalView)
        for _ in range(300):
            for chunk in _case(r):
                view.feed(chunk if isinstance(chunk, str) else chunk.decode("utf-8", "replace"))
            view._flush()
            for y in range(10):
                strip = view.render_line(y)
                assert strip.cell_length == 40
                for seg in strip:
                    assert not any(ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 for c in seg.text), repr(seg.text)
        await pilot.pause()
        assert app.is_running
