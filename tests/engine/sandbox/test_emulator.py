"""The emulator wrapper: what the policy and the curator see must be the terminal's real state."""

from __future__ import annotations

import random

import pytest

from bandpass.engine.sandbox.emulator import Cell, Screen


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


def test_raw_cell_layout_matches_the_c_accessors() -> None:
    """Rows are decoded from the raw 64-bit cell values in bulk; the bit layout used must be the one
    libghostty-vt's own accessors read, for every kind of cell."""
    from bandpass.engine.sandbox import emulator as em
    from bandpass.engine.sandbox.ghostty import native

    s = fed("a\x1b[1;31mb\x1b[0m字e\u0301\x1b[48;5;100m\x1b[K\r\n\x1b[48;2;10;20;30m\x1b[K😀", 20, 3)
    s.lines()
    ffi, lib = native()
    u32, u16, u8 = ffi.new("uint32_t*"), ffi.new("uint16_t*"), ffi.new("uint8_t*")
    rgb = ffi.new("GhosttyColorRgb*")
    kinds = set()
    for raw_row in s._raw[:2]:
        for r in memoryview(raw_row).cast("Q"):
            lib.ghostty_cell_get(r, lib.GHOSTTY_CELL_DATA_CONTENT_TAG, u32)
            tag = u32[0]
            assert r & em._TAG_MASK == tag
            lib.ghostty_cell_get(r, lib.GHOSTTY_CELL_DATA_STYLE_ID, u16)
            assert (r >> em._SID_SHIFT) & em._SID_MASK == u16[0]
            lib.ghostty_cell_get(r, lib.GHOSTTY_CELL_DATA_WIDE, u32)
            assert (r >> em._WIDE_SHIFT) & em._WIDE_MASK == u32[0]
            content = (r >> em._CP_SHIFT) & 0xFFFFFF
            if tag == em._TAG_BG_PALETTE:
                lib.ghostty_cell_get(r, lib.GHOSTTY_CELL_DATA_COLOR_PALETTE, u8)
                assert content & 0xFF == u8[0]
            elif tag == em._TAG_BG_RGB:
                lib.ghostty_cell_get(r, lib.GHOSTTY_CELL_DATA_COLOR_RGB, rgb)
                assert (content & 0xFF, (content >> 8) & 0xFF, content >> 16) == (rgb.r, rgb.g, rgb.b)
            else:
                lib.ghostty_cell_get(r, lib.GHOSTTY_CELL_DATA_CODEPOINT, u32)
                assert (r >> em._CP_SHIFT) & em._CP_MASK == u32[0]
            kinds.add((tag, (r >> em._WIDE_SHIFT) & em._WIDE_MASK, bool((r >> em._SID_SHIFT) & em._SID_MASK)))
    assert {(0, 0, False), (0, 0, True), (0, 1, False), (0, 2, False), (1, 0, False)} <= kinds
    assert {k[0] for k in kinds} >= {2, 3}  # both kinds of colour-only cell were checked


def test_a_mark_joining_a_cell_drawn_before_the_last_read_is_seen() -> None:
    """The native render state does not report such a row dirty; the screen must still show the mark
    (and report the row changed), however the mark arrives."""
    s = fed("e")
    assert s.lines()[0] == "e"
    s.clear_dirty()
    s.feed("\u0301")
    assert s.lines()[0] == "e\u0301" and s.dirty == {0}
    s.clear_dirty()
    s.feed("\u0302")  # the cluster grows: its cell's raw value does not change
    assert s.lines()[0] == "e\u0301\u0302" and s.dirty == {0}
    t = fed("ab\r\ncd")
    t.lines()
    t.feed("\x1b[1;3H\x1b[31m\u0301\x1b[2;3H")  # joined to 'b' after a cursor move, cursor moved away
    assert t.lines()[:2] == ["ab\u0301", "cd"]


def test_row_versions_change_with_content_only() -> None:
    s = fed("one\r\ntwo\r\nthree")
    before = s.row_versions()
    s.feed("\x1b[1;1H")  # a cursor move changes no row
    assert s.row_versions() == before
    s.feed("\x1b[2;1HTWO")
    after = s.row_versions()
    assert [y for y in range(5) if after[y] != before[y]] == [1]
    assert s.lines()[1] == "TWO"


def test_a_restored_keyframe_decodes_only_the_rows_read() -> None:
    """A seek restores a keyframe; a repaint then reads what a pane shows, and only that is decoded."""
    s = fed("".join(f"\x1b[3{i % 8}mline {i}\x1b[0m\r\n" for i in range(60)), 40, 30)
    r = Screen.restore(s.snapshot())
    runs = r.styled_runs_many([(28, -1), (29, 3)], 0, 40)
    assert "".join(t for t, _ in runs[0]).rstrip() == s.lines()[28]
    assert sum(row is not None for row in r._decoded) == 2
    assert r.lines() == s.lines() and r.styled_rows() == s.styled_rows()
