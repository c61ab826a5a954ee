"""Terminal emulation: the one module that knows which library turns a byte stream into a screen.

The policy's observation, the curator's live pane and the replay must all show the same state, so they
all read it through :class:`Screen`. The backend is libghostty-vt (Ghostty's emulator, native code) through
pyghostty's raw cffi binding: measured 90-440x faster than pyte and 63-147x faster than bittty on our
streams (bench/BENCHMARKS.md), cell-for-cell equal to bittty on every sample recording
(tests/test_emulator_differential.py), and it keeps a real alternate screen, so a policy that quits ``vim``
sees the shell again. Swapping the backend means rewriting this file only.

Why the raw ``lib`` and not ``pyghostty.Terminal.style(x, y)``: one FFI round trip per cell attribute costs
~50 ms for a 160x40 screen. Instead a render state is updated once per read and only the rows it reports
dirty are decoded, one row iterator pass, into a per-row cache; a repaint reads Python tuples.

Keyframes are ghostty's own snapshot encoding (the full terminal state, modes, alternate screen and any
escape sequence cut in half included): a few KB of bytes, so a replay index can be kept on disk.

Nothing a task prints reaches the curator's real terminal or the host: no pty-reply, clipboard, title,
bell or query callback is ever attached, so OSC 52 (clipboard), OSC 0/2 (title), OSC 8 (hyperlinks) and
device queries are parsed and dropped; only cells are rendered.
"""

from __future__ import annotations

import re
import threading
import unicodedata
import weakref
from dataclasses import dataclass
from typing import Any

from pyghostty._ffi import ffi, lib

#: Rich's names for the 16 ANSI colours, indexed by SGR colour number.
ANSI_NAMES: tuple[str, ...] = (
    "black",
    "red",
    "green",
    "yellow",
    "blue",
    "magenta",
    "cyan",
    "white",
    "bright_black",
    "bright_red",
    "bright_green",
    "bright_yellow",
    "bright_blue",
    "bright_magenta",
    "bright_cyan",
    "bright_white",
)


def _xterm_256() -> list[str]:
    """Hex values of xterm colours 16..255, so every colour a widget gets is a plain Rich colour."""
    out = list(ANSI_NAMES)
    steps = (0, 95, 135, 175, 215, 255)
    for i in range(216):
        r, g, b = steps[i // 36], steps[(i // 6) % 6], steps[i % 6]
        out.append(f"#{r:02x}{g:02x}{b:02x}")
    for i in range(24):
        v = 8 + 10 * i
        out.append(f"#{v:02x}{v:02x}{v:02x}")
    return out


_PALETTE = _xterm_256()
#: How a style names palette colours: ANSI names for 0-15 (so a theme's ANSI palette applies), Rich's
#: ``color(N)`` for 16-255 (a widget keeps the exact xterm colour number).
_STYLE_PALETTE = (*ANSI_NAMES, *(f"color({n})" for n in range(16, 256)))
#: Style colour -> the plain colour a :class:`Cell` carries (hex for 16-255).
_CELL_COLOUR = {f"color({n})": _PALETTE[n] for n in range(16, 256)}


@dataclass(frozen=True, slots=True)
class Cell:
    """One screen cell for a widget. ``char`` is ``""`` for the right half of a wide character."""

    char: str = " "
    fg: str | None = None
    bg: str | None = None
    bold: bool = False
    italic: bool = False
    underline: bool = False
    reverse: bool = False


@dataclass(frozen=True, slots=True)
class CellStyle:
    """A cell's look without its text: the style key of a run in :meth:`Screen.styled_runs` (hashable, and
    interned per screen, so equal styles are usually the same object)."""

    fg: str | None = None
    bg: str | None = None
    bold: bool = False
    italic: bool = False
    underline: bool = False
    reverse: bool = False
    dim: bool = False
    strike: bool = False
    conceal: bool = False


DEFAULT_STYLE = CellStyle()

#: Scroll-back is not part of the screen a policy or a pane sees; keeping none saves memory per pane and
#: keeps a resize's reflow from pulling rows out of history a keyframe does not hold. (A *line* limit of
#: 0 still keeps a page of history; a *byte* limit of 0 keeps none.)
_SCROLLBACK = 0
#: Bytes of an unfinished escape sequence kept across a snapshot (a keyframe cut mid-sequence).
_CONTINUATION_MAX = 65536

_K_STYLE = lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_STYLE
_K_GLEN = lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_GRAPHEMES_LEN
_K_GBUF = lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_GRAPHEMES_BUF
_K_ROW_RAW = lib.GHOSTTY_RENDER_STATE_ROW_DATA_CELLS_RAW
_K_ROW_CELLS = lib.GHOSTTY_RENDER_STATE_ROW_DATA_CELLS
_TAG_GRAPHEME = lib.GHOSTTY_CELL_CONTENT_CODEPOINT_GRAPHEME
_TAG_BG_PALETTE = lib.GHOSTTY_CELL_CONTENT_BG_COLOR_PALETTE
_TAG_BG_RGB = lib.GHOSTTY_CELL_CONTENT_BG_COLOR_RGB
_TAIL = lib.GHOSTTY_CELL_WIDE_SPACER_TAIL
_COLOR_PALETTE = lib.GHOSTTY_STYLE_COLOR_PALETTE
_COLOR_RGB = lib.GHOSTTY_STYLE_COLOR_RGB


#: OSC 133 (FinalTerm shell-integration marks). The harness's own prompt emits them to detect command
#: completion; libghostty-vt would act on ``A`` with a "fresh line" (a newline when the cursor is not in
#: column 0), which no xterm-like terminal does and which would shift what the policy sees after every
#: command whose output lacks a final newline. They are metadata, never screen content: cut them out.
_OSC133 = re.compile(r"\x1b\]133;[^\x07\x1b]*(?:\x07|\x1b\\)")


#: Longest OSC 133 mark held back while waiting for its end (ours are ~12 bytes; beyond this, pass it on).
_MARKER_MAX = 256


def _hold_marker_tail(data: str) -> tuple[str, str]:
    """Splits off an OSC 133 mark cut by the end of this chunk (or the start of one: ``ESC``, ``ESC ]1``)
    so it can be cut out whole once the next chunk completes it. What is held is an unfinished escape
    sequence, which shows nothing on screen yet, so holding it changes no visible state."""
    j = data.rfind(_MARK, max(0, len(data) - _MARKER_MAX))
    if j >= 0:
        body = data[j + len(_MARK) :]
        if "\x07" not in body and "\x1b" not in body.rstrip("\x1b"):
            return data[:j], data[j:]
    i = data.rfind("\x1b")
    if i >= 0 and _MARK.startswith(data[i:]):
        return data[:i], data[i:]
    return data, ""


_MARK = "\x1b]133;"
#: Unicode categories of characters that modify the character before them (combining marks, joiners and
#: variation selectors, emoji modifiers).
_JOINERS = frozenset({"Mn", "Mc", "Me", "Cf", "Sk"})
_JOINER_RE = re.compile(
    "[\u0300-\u036f\u0483-\u0489\u0591-\u05c7\u0610-\u061a\u064b-\u065f\u0900-\u0903\u093a-\u094f"
    "\u0951-\u0957\u0981-\u09cd\u1ab0-\u1aff\u1dc0-\u1dff\u200b-\u200f\u20d0-\u20ff\u3099\u309a"
    "\ufe00-\ufe0f\ufe20-\ufe2f\U0001f3fb-\U0001f3ff\U000e0000-\U000e01ef]"
)


def _check(res: int, what: str) -> None:
    if res:
        raise RuntimeError(f"libghostty-vt: {what} failed (code {res})")


def _style_colour(c: Any) -> str | None:
    if c.tag == _COLOR_PALETTE:
        return _STYLE_PALETTE[c.value.palette]
    if c.tag == _COLOR_RGB:
        v = c.value.rgb
        return f"#{v.r:02x}{v.g:02x}{v.b:02x}"
    return None


class _Decoder:
    """Scratch buffers and caches for decoding render-state rows into Python tuples (one per Screen, used
    under its lock)."""

    def __init__(self) -> None:
        self.style = ffi.new("GhosttyStyle*")
        self.style.size = ffi.sizeof("GhosttyStyle")
        self.style_buf = ffi.buffer(self.style)
        self.glen = ffi.new("uint32_t*")
        self.gbuf = ffi.new("uint32_t[]", 64)
        self.written = ffi.new("size_t*")
        self.ckeys = ffi.new(
            "GhosttyCellData[4]",
            [
                lib.GHOSTTY_CELL_DATA_CONTENT_TAG,
                lib.GHOSTTY_CELL_DATA_CODEPOINT,
                lib.GHOSTTY_CELL_DATA_WIDE,
                lib.GHOSTTY_CELL_DATA_COLOR_PALETTE,
            ],
        )
        self.c_tag = ffi.new("uint32_t*")
        self.c_cp = ffi.new("uint32_t*")
        self.c_wide = ffi.new("uint32_t*")
        self.c_pal = ffi.new("uint8_t*")
        self.cvalues = ffi.new("void*[4]", [self.c_tag, self.c_cp, self.c_wide, self.c_pal])
        self.rgb = ffi.new("GhosttyColorRgb*")
        #: raw cell value -> (char, wide, bg colour of a colour-only cell, is a grapheme cluster, style id)
        self.raw_cache: dict[int, tuple[str, int, str | None, bool, int]] = {}
        self.sid = ffi.new("uint16_t*")
        self.view = ffi.new("GhosttyCellsView*")
        #: style struct bytes -> interned CellStyle
        self.style_cache: dict[bytes, CellStyle] = {}

    def content(self, raw: int) -> tuple[str, int, str | None, bool, int]:
        """(text, wide flag, background colour of a colour-only cell) of a raw cell, cached by value."""
        got = self.raw_cache.get(raw)
        if got is not None:
            return got
        lib.ghostty_cell_get_multi(raw, 3, self.ckeys, self.cvalues, self.written)
        tag, cp, wide = self.c_tag[0], self.c_cp[0], self.c_wide[0]
        bg = None
        if tag == _TAG_BG_PALETTE:
            lib.ghostty_cell_get(raw, lib.GHOSTTY_CELL_DATA_COLOR_PALETTE, self.c_pal)
            bg = _STYLE_PALETTE[self.c_pal[0]]
            cp = 0
        elif tag == _TAG_BG_RGB:
            lib.ghostty_cell_get(raw, lib.GHOSTTY_CELL_DATA_COLOR_RGB, self.rgb)
            bg = f"#{self.rgb.r:02x}{self.rgb.g:02x}{self.rgb.b:02x}"
            cp = 0
        if wide == _TAIL:
            ch = ""
        elif cp:
            ch = chr(cp)
        else:
            ch = " "
        lib.ghostty_cell_get(raw, lib.GHOSTTY_CELL_DATA_STYLE_ID, self.sid)
        got = (ch, wide, bg, tag == _TAG_GRAPHEME, self.sid[0])
        if len(self.raw_cache) > 65536:
            self.raw_cache.clear()
        self.raw_cache[raw] = got
        return got

    def cell_style(self, cells: Any) -> CellStyle:
        lib.ghostty_render_state_row_cells_get(cells, _K_STYLE, self.style)
        key = self.style_buf[:]
        st = self.style_cache.get(key)
        if st is None:
            s = self.style
            st = CellStyle(
                fg=_style_colour(s.fg_color),
                bg=_style_colour(s.bg_color),
                bold=bool(s.bold),
                italic=bool(s.italic),
                underline=bool(s.underline),
                reverse=bool(s.inverse),
                dim=bool(s.faint),
                strike=bool(s.strikethrough),
                conceal=bool(s.invisible),
            )
            if st == DEFAULT_STYLE:
                st = DEFAULT_STYLE
            self.style_cache[key] = st
        return st

    def graphemes(self, cells: Any) -> str:
        lib.ghostty_render_state_row_cells_get(cells, _K_GLEN, self.glen)
        n = self.glen[0]
        if n == 0:
            return " "
        if n > len(self.gbuf):
            self.gbuf = ffi.new("uint32_t[]", n * 2)
        lib.ghostty_render_state_row_cells_get(cells, _K_GBUF, self.gbuf)
        return "".join(map(chr, self.gbuf[0:n]))

    def row(self, it: Any, cells_p: Any) -> list[tuple[str, CellStyle]]:
        """One row of the render state as ``[(char, style)]``; ``char`` is ``""`` for a wide tail.

        Why this shape: the row's raw cells come in one call (a view of 64-bit values), and a raw value
        decides text, width and style id, so most cells cost a dict lookup. Only the first cell of each
        style id in the row (ids are per page, a row lives in one page) and grapheme clusters go back
        through the FFI, by column."""
        _check(lib.ghostty_render_state_row_get(it, _K_ROW_RAW, self.view), "row cells raw")
        raws = ffi.unpack(self.view.ptr, self.view.len)
        out: list[tuple[str, CellStyle]] = []
        append = out.append
        cache = self.raw_cache
        blank = (" ", DEFAULT_STYLE)
        styles: dict[int, CellStyle] = {}
        cells = None
        for x, r in enumerate(raws):
            if r == 0:  # an untouched cell: by far the commonest
                append(blank)
                continue
            got = cache.get(r)
            if got is None:
                got = self.content(r)
            ch, _wide, bg, cluster, sid = got
            if sid:
                st = styles.get(sid)
                if st is None:
                    if cells is None:
                        _check(lib.ghostty_render_state_row_get(it, _K_ROW_CELLS, cells_p), "row cells")
                        cells = cells_p[0]
                    lib.ghostty_render_state_row_cells_select(cells, x)
                    st = styles[sid] = self.cell_style(cells)
            elif bg is not None:
                st = CellStyle(bg=bg)
            else:
                st = DEFAULT_STYLE
            if cluster:  # a grapheme cluster (base + combining marks) is stored beside the cell
                if cells is None:
                    _check(lib.ghostty_render_state_row_get(it, _K_ROW_CELLS, cells_p), "row cells")
                    cells = cells_p[0]
                lib.ghostty_render_state_row_cells_select(cells, x)
                ch = self.graphemes(cells)
            append((ch, st))
        return out


class SnapshotError(RuntimeError):
    """The native encoder refused this state (seen after a resize cuts a wide character in two). A replay
    index then simply takes no keyframe there: seeking stays exact, just a little slower."""


@dataclass(frozen=True)
class ScreenSnapshot:
    """An immutable keyframe for replay; restore it any number of times. ``data`` is libghostty-vt's
    snapshot encoding (bytes), so a keyframe can be written to disk and read back."""

    data: bytes
    cols: int
    rows: int
    pending: str = ""  # an OSC 133 mark cut at the keyframe, held back (see Screen.feed)


class Screen:
    """A thread-safe emulated screen: the reader thread feeds it while the UI and the policy read it."""

    def __init__(self, cols: int = 120, rows: int = 40, *, _terminal: Any = None) -> None:
        if cols < 1 or rows < 1:
            raise ValueError(f"screen size must be positive, got {cols}x{rows}")
        self._lock = threading.RLock()
        if _terminal is None:
            t = ffi.new("GhosttyTerminal*")
            _check(lib.ghostty_terminal_new(ffi.NULL, t, cols, rows), "terminal_new")
            _terminal = t[0]
        self._t = _terminal
        _check(
            lib.ghostty_terminal_set(
                self._t, lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, ffi.new("size_t*", _SCROLLBACK)
            ),
            "set scrollback",
        )
        _check(
            lib.ghostty_terminal_set(
                self._t,
                lib.GHOSTTY_TERMINAL_OPT_CONTINUATION_MAX_BYTES,
                ffi.new("size_t*", _CONTINUATION_MAX),
            ),
            "set continuation",
        )
        # Growing the window must not pull rows back from history: the visible screen is all there is
        # (a keyframe holds no history, so pulling would make a seek differ from playing through).
        _check(
            lib.ghostty_terminal_set(
                self._t, lib.GHOSTTY_TERMINAL_OPT_RESIZE_PULL_SCROLLBACK, ffi.new("bool*", False)
            ),
            "set resize_pull_scrollback",
        )
        rs = ffi.new("GhosttyRenderState*")
        _check(lib.ghostty_render_state_new(ffi.NULL, rs), "render_state_new")
        self._rs = rs[0]
        it = ffi.new("GhosttyRenderStateRowIterator*")
        _check(lib.ghostty_render_state_row_iterator_new(ffi.NULL, it), "row_iterator_new")
        self._it_p = it
        cells = ffi.new("GhosttyRenderStateRowCells*")
        _check(lib.ghostty_render_state_row_cells_new(ffi.NULL, cells), "row_cells_new")
        self._cells_p = cells
        self._free = weakref.finalize(self, _free_native, self._t, self._rs, it[0], cells[0])
        self._dec = _Decoder()
        self._u16 = ffi.new("uint16_t*")
        self._u32 = ffi.new("uint32_t*")
        self._bool = ffi.new("bool*")
        self._false = ffi.new("bool*", False)
        self._dirty_false = ffi.new("GhosttyRenderStateDirty*", lib.GHOSTTY_RENDER_STATE_DIRTY_FALSE)
        self._cols, self._rows = self._query_size()
        self._grid: list[list[tuple[str, CellStyle]]] = []
        self._fed = True  # the render state must be pulled before the next read
        self._dirty: set[int] = set(range(self._rows))
        self._pending = ""  # an OSC 133 mark cut by a chunk boundary, waiting for its end
        self._force_full = False

    # --- input --- #

    def feed(self, data: str | bytes) -> None:
        if not isinstance(data, str):
            data = data.decode("utf-8", "surrogateescape")
        with self._lock:
            if self._pending:
                data = self._pending + data
                self._pending = ""
            if "\x1b]133;" in data:
                data = _OSC133.sub("", data)
            if "\x1b" in data[-_MARKER_MAX:]:
                data, self._pending = _hold_marker_tail(data)
            if (
                data
                and not data.isascii()
                and (unicodedata.category(data[0]) in _JOINERS or _JOINER_RE.search(data) is not None)
            ):
                # A mark joining a character printed earlier (by a previous chunk, or before an escape
                # sequence) changes a cell libghostty-vt's render state does not report dirty.
                self._force_full = True
            try:
                raw = data.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:  # a lone surrogate: becomes U+FFFD, never an exception
                raw = data.encode("utf-8", "replace")
            lib.ghostty_terminal_vt_write(self._t, raw, len(raw))
            self._fed = True

    def resize(self, cols: int, rows: int) -> None:
        if cols < 1 or rows < 1:
            raise ValueError(f"screen size must be positive, got {cols}x{rows}")
        with self._lock:
            _check(lib.ghostty_terminal_resize(self._t, cols, rows, 8, 16), "resize")
            self._cols, self._rows = cols, rows
            self._fed = True
            self._dirty = set(range(rows))

    # --- native state --- #

    def _query_size(self) -> tuple[int, int]:
        lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_COLS, self._u16)
        cols = self._u16[0]
        lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_ROWS, self._u16)
        return cols, self._u16[0]

    def _sync(self) -> None:
        """Pulls what changed since the last read into the row cache (caller holds the lock)."""
        if not self._fed:
            return
        self._fed = False
        if self._force_full:
            # The render state copies only rows the terminal marked dirty, and joining a mark onto a
            # cell printed earlier marks nothing: a fresh render state copies every row.
            fresh = ffi.new("GhosttyRenderState*")
            _check(lib.ghostty_render_state_new(ffi.NULL, fresh), "render_state_new")
            lib.ghostty_render_state_free(self._rs)
            self._rs = fresh[0]
            self._free.detach()
            self._free = weakref.finalize(
                self, _free_native, self._t, self._rs, self._it_p[0], self._cells_p[0]
            )
        rs, cells_p, it_p = self._rs, self._cells_p, self._it_p
        _check(lib.ghostty_render_state_update(rs, self._t), "render_state_update")
        state = ffi.new("GhosttyRenderStateDirty*")
        lib.ghostty_render_state_get(rs, lib.GHOSTTY_RENDER_STATE_DATA_DIRTY, state)
        full = (
            state[0] == lib.GHOSTTY_RENDER_STATE_DIRTY_FULL
            or len(self._grid) != self._rows
            or self._force_full
        )
        self._force_full = False
        if len(self._grid) != self._rows:
            self._grid = [[] for _ in range(self._rows)]
        _check(lib.ghostty_render_state_get(rs, lib.GHOSTTY_RENDER_STATE_DATA_ROW_ITERATOR, it_p), "rows")
        it = it_p[0]
        flag = self._bool
        y = 0
        grid, dirty, dec = self._grid, self._dirty, self._dec
        while lib.ghostty_render_state_row_iterator_next(it) and y < len(grid):
            lib.ghostty_render_state_row_get(it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_DIRTY, flag)
            if full or flag[0]:
                row = dec.row(it, cells_p)
                if full or row != grid[y]:
                    grid[y] = row
                    dirty.add(y)
                lib.ghostty_render_state_row_set(it, lib.GHOSTTY_RENDER_STATE_ROW_OPTION_DIRTY, self._false)
            y += 1
        lib.ghostty_render_state_set(rs, lib.GHOSTTY_RENDER_STATE_OPTION_DIRTY, self._dirty_false)

    # --- reading --- #

    @property
    def cols(self) -> int:
        return self._cols

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def alternate_screen(self) -> bool:
        with self._lock:
            lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_ACTIVE_SCREEN, self._u32)
            return self._u32[0] == lib.GHOSTTY_TERMINAL_SCREEN_ALTERNATE

    def lines(self) -> list[str]:
        with self._lock:
            self._sync()
            return ["".join(ch for ch, _ in row).rstrip() for row in self._grid]

    def text(self) -> str:
        return "\n".join(self.lines()).rstrip("\n")

    def cursor(self) -> tuple[int, int]:
        """Clamped to the grid: after writing the last column the real cursor sits one past it."""
        with self._lock:
            lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_CURSOR_X, self._u16)
            x = self._u16[0]
            lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_CURSOR_Y, self._u16)
            y = self._u16[0]
            return (min(max(x, 0), self._cols - 1), min(max(y, 0), self._rows - 1))

    def cursor_visible(self) -> bool:
        """Whether the program shows its cursor (DECTCEM, ``ESC[?25l`` hides it)."""
        with self._lock:
            lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_CURSOR_VISIBLE, self._bool)
            return bool(self._bool[0])

    def styled_rows(self) -> list[list[Cell]]:
        with self._lock:
            self._sync()
            cc = _CELL_COLOUR
            return [
                [
                    Cell(
                        ch,
                        cc.get(st.fg, st.fg),
                        cc.get(st.bg, st.bg),
                        st.bold,
                        st.italic,
                        st.underline,
                        st.reverse,
                    )  # type: ignore[arg-type]
                    for ch, st in row
                ]
                for row in self._grid
            ]

    def row_cells(self, y: int) -> list[tuple[str, CellStyle]]:
        """Row ``y`` as ``[(char, style)]``, one entry per column (a copy; ``""`` for a wide tail)."""
        with self._lock:
            self._sync()
            return list(self._grid[y]) if 0 <= y < len(self._grid) else []

    def styled_runs(self, y: int, start: int, end: int, mark: int = -1) -> list[tuple[str, Any]]:
        """``[(text, style), ...]`` for columns ``[start, end)`` of row ``y``: what a widget paints.

        The cell at column ``mark`` (the cursor) comes as its own run with style ``("cursor", style)``. A
        wide character cut by either edge becomes a blank, so the runs always span ``end - start`` cells.
        """
        with self._lock:
            self._sync()
            if not 0 <= y < len(self._grid):
                return []
            full = self._grid[y]
            cells = full[start:end]
            cut_tail = end < len(full) and full[end][0] == ""
        if not cells:
            return []
        if cells[0][0] == "":
            cells[0] = (" ", cells[0][1])
        if cut_tail:
            cells[-1] = (" ", cells[-1][1])
        out: list[tuple[str, Any]] = []
        chars: list[str] = []
        current: Any = None
        mark -= start
        for x, (ch, style) in enumerate(cells):
            if x == mark:
                if chars:
                    out.append(("".join(chars), current))
                out.append((ch or " ", ("cursor", style)))
                chars, current = [], None
            elif style is current or style == current:
                chars.append(ch)
            else:
                if chars:
                    out.append(("".join(chars), current))
                chars, current = [ch], style
        if chars:
            out.append(("".join(chars), current))
        return out

    # --- dirty tracking --- #

    @property
    def dirty(self) -> set[int]:
        """Rows changed since :meth:`clear_dirty`; every row after a resize or an alt-screen switch."""
        with self._lock:
            self._sync()
            return set(self._dirty)

    def clear_dirty(self) -> None:
        with self._lock:
            self._sync()
            self._dirty = set()

    # --- keyframes --- #

    def snapshot(self) -> ScreenSnapshot:
        with self._lock:
            n = ffi.new("size_t*")
            lib.ghostty_snapshot_encode_buf(self._t, ffi.NULL, 0, n)
            buf = ffi.new("uint8_t[]", max(n[0], 1))
            res = lib.ghostty_snapshot_encode_buf(self._t, buf, n[0], n)
            if res:
                raise SnapshotError(f"libghostty-vt cannot encode this screen state (code {res})")
            return ScreenSnapshot(ffi.buffer(buf, n[0])[:], self._cols, self._rows, self._pending)

    @classmethod
    def restore(cls, snap: ScreenSnapshot) -> Screen:
        """A new, independent screen in exactly the snapshot's state."""
        screen = cls.from_snapshot_bytes(snap.data, snap.cols, snap.rows)
        screen._pending = snap.pending
        return screen

    @classmethod
    def from_snapshot_bytes(cls, data: bytes, cols: int, rows: int) -> Screen:
        dec = ffi.new("GhosttySnapshotDecoder*")
        _check(lib.ghostty_snapshot_decoder_new_buf(ffi.NULL, dec, data, len(data)), "snapshot_decoder")
        try:
            t = ffi.new("GhosttyTerminal*")
            _check(lib.ghostty_snapshot_decoder_decode(dec[0], t), "snapshot_decode")
        finally:
            lib.ghostty_snapshot_decoder_free(dec[0])
        return cls(cols, rows, _terminal=t[0])


def _free_native(t: Any, rs: Any, it: Any, cells: Any) -> None:
    lib.ghostty_render_state_row_cells_free(cells)
    lib.ghostty_render_state_row_iterator_free(it)
    lib.ghostty_render_state_free(rs)
    lib.ghostty_terminal_free(t)
