"""The emulator wrapper: what the policy and the curator see must be the terminal's real state."""

from __future__ import annotations

import random

import pytest

from engine.sandbox.emulator import Cell, Screen


def fed(data: str, cols: int = 20, rows: int = 5) -> Screen:
    s = Screen(cols, rows)
    s.feed(data)
    return s


def test_plain_text_and_cursor() -> None:
    s = fed("hello\r\nworld")
    assert s.lines()[:2] == ["hello", "world"]
    assert s.text() == "hello\nworld"
    assert s.cursor() == (5, 1)
    assert (s.cols, s.rows) == (20, 5)


def test_wrap_scroll_and_erase() -> None:
    s = fed("a" * 25 + "\r\n1\r\n2\r\n3\r\n4")
    assert s.lines() == ["aaaaa", "1", "2", "3", "4"]
    s.feed("\x1b[2;1H\x1b[K")
    assert s.lines()[1] == ""


def test_alternate_screen_restores_shell() -> None:
    """pyte's failure mode: after quitting a full-screen app the policy must see the shell again."""
    s = fed("$ vim\r\n")
    s.feed("\x1b[?1049h\x1b[2J\x1b[HEDITOR")
    assert s.alternate_screen
    assert s.text() == "EDITOR"
    s.feed("\x1b[?1049l")
    assert not s.alternate_screen
    assert s.text() == "$ vim"


def test_wide_and_combining_characters_keep_columns() -> None:
    s = fed("日本x\r\ne\u0301xy")
    assert s.lines()[:2] == ["日本x", "e\u0301xy"]
    assert s.cursor() == (3, 1)
    row = s.styled_rows()[0]
    assert [c.char for c in row[:5]] == ["日", "", "本", "", "x"]


def test_combining_survives_full_reset() -> None:
    s = fed("\x1bce\u0301x")
    assert s.cursor() == (2, 0)


@pytest.mark.parametrize(
    "seq",
    [
        "\x1b]133;A\x07",
        "\x1b]133;D;0\x07",
        "\x1b]133;D;1\x1b\\",
        "\x1b]52;c;aGVsbG8=\x07",
        "\x1b]52;c;?\x07",
        "\x1b]0;title\x07",
        "\x1b]2;title\x1b\\",
        "\x1b]8;;http://example.com\x07",
        "\x1b]8;;\x07",
        "\x1b[6n\x1b[c\x1b[>c",
        "\x1bP+q544e\x1b\\",
    ],
)
def test_terminal_side_sequences_leave_no_garbage(seq: str) -> None:
    s = fed(f"a{seq}b")
    assert s.text() == "ab"


def test_styles_map_to_rich_colours() -> None:
    s = fed("\x1b[31mr\x1b[38;5;200mx\x1b[38;2;1;2;3my\x1b[0;1;3;4;7;44mz\x1b[0m ")
    row = s.styled_rows()[0]
    assert row[0] == Cell("r", fg="red")
    assert row[1].fg == "#ff00d7"
    assert row[2].fg == "#010203"
    assert row[3] == Cell("z", bg="blue", bold=True, italic=True, underline=True, reverse=True)
    assert row[4] == Cell(" ")
    assert len(s.styled_rows()) == 5 and all(len(r) == 20 for r in s.styled_rows())


def test_dirty_rows() -> None:
    s = fed("x")
    assert s.dirty == set(range(5))
    s.clear_dirty()
    assert s.dirty == set()
    s.feed("\x1b[3;1Hq")
    assert s.dirty == {2}
    s.clear_dirty()
    s.feed("\x1b[?1049h")
    assert s.dirty == set(range(5))
    s.clear_dirty()
    s.resize(30, 6)
    assert s.dirty == set(range(6))


def test_resize() -> None:
    s = fed("hello")
    s.resize(40, 10)
    assert (s.cols, s.rows) == (40, 10)
    assert s.lines()[0] == "hello" and len(s.lines()) == 10
    with pytest.raises(ValueError):
        s.resize(0, 10)


def test_cursor_clamped_after_last_column() -> None:
    s = fed("x" * 20)
    assert s.cursor() == (19, 0)


def _stream(seed: int) -> str:
    r = random.Random(seed)
    parts = ["\x1b[?1049h" if seed % 2 else ""]
    for _ in range(400):
        k = r.random()
        if k < 0.4:
            parts.append(f"\x1b[{r.randint(30, 37)}mword{r.randint(0, 99)}\x1b[0m ")
        elif k < 0.6:
            parts.append(f"\x1b[{r.randint(1, 6)};{r.randint(1, 30)}H")
        elif k < 0.7:
            parts.append("\r\n")
        elif k < 0.8:
            parts.append(r.choice(["\x1b[K", "\x1b[2J", "\x1b[L", "\x1b[M", "\x1b[2;5r", "\x1b[r", "\x1b7"]))
        elif k < 0.9:
            parts.append(r.choice(["日本", "e\u0301", "\x1b8", "\t", "\b", "\x1b(0lqk\x1b(B"]))
        else:
            parts.append(
                r.choice(["\x1b[?1049h", "\x1b[?1049l", "\x1b[?7l", "\x1b[?7h", "\x1b[4h", "\x1b[4l"])
            )
    return "".join(parts)


@pytest.mark.parametrize("seed", range(24))
def test_snapshot_restore_is_a_full_independent_copy(seed: int) -> None:
    """A replay keyframe must continue exactly like the live screen, whatever mode it was cut in."""
    data = _stream(seed)
    cut = random.Random(seed).randint(0, len(data))
    live = fed(data[:cut], 30, 6)
    snap = live.snapshot()
    a, b = Screen.restore(snap), Screen.restore(snap)
    for s in (live, a):
        s.feed(data[cut:])
    assert a.lines() == live.lines()
    assert a.styled_rows() == live.styled_rows()
    assert a.cursor() == live.cursor()
    assert a.alternate_screen == live.alternate_screen
    # the snapshot itself was not disturbed by feeding a restored copy
    c = Screen.restore(snap)
    assert c.lines() == b.lines()
