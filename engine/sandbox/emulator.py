"""Terminal emulation: the one module that knows which library turns a byte stream into a screen.

The policy's observation, the curator's live pane and the replay must all show the same state, so they
all read it through :class:`Screen`. The backend is libghostty-vt (Ghostty's emulator, native code) through
its raw C API (``engine.sandbox.ghostty``, pyghostty's bundled library): measured 90-440x faster than pyte
and 63-147x faster than bittty on our streams (bench/BENCHMARKS.md), cell-for-cell equal to bittty on every
sample recording (tests/engine/sandbox/test_emulator_differential.py), and it keeps a real alternate screen,
so a policy that quits ``vim`` sees the shell again. Swapping the backend means rewriting this file only.

How a read works, and why it is cheap. Feeding only parses (native). A read first *syncs*: the native
render state is updated and, for each row it reports dirty, the row's raw cells (one 64-bit value per
cell) are copied out in one call and compared with the last copy; a row whose bytes changed gets a new
*version* and loses its decoded form. Nothing is decoded then. A row is decoded only when something asks
for it (``lines``, ``styled_runs`` of the rows a pane shows), all asked rows at once and vectorised with
numpy (text, wide-character tails and style runs straight from the raw values, whose layout
``tests/engine/sandbox/test_emulator.py`` pins against the C accessors); only the first cell of each style in
a row and grapheme clusters go back through the FFI. So a replay seek that restores a keyframe and paints a
15-row pane decodes 15 rows, not 40, and a pane's widget can cache what it drew per row version.

Grapheme clusters are the native core's: libghostty-vt joins combining marks, joiners and modifiers to
the cell before them. Its render state does not mark a row dirty when a mark joins a cell printed before
the last read, so after non-ASCII input a sync also refreshes every row from a fresh render state (native
work, ~0.2 ms) and compares bytes; no per-chunk scan of the text in Python.

Keyframes are ghostty's own snapshot encoding (the full terminal state, modes, alternate screen and any
escape sequence cut in half included): a few KB of bytes, so a replay index can be kept on disk.

Nothing a task prints reaches the curator's real terminal or the host: no pty-reply, clipboard, title,
bell or query callback is ever attached, so OSC 52 (clipboard), OSC 0/2 (title), OSC 8 (hyperlinks) and
device queries are parsed and dropped; only cells are rendered.
"""

from __future__ import annotations

import itertools
import re
import threading
import weakref
import zlib
from dataclasses import dataclass
from typing import Any

from .ghostty import native

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
_CELL_COLOUR: dict[str | None, str | None] = {f"color({n})": _PALETTE[n] for n in range(16, 256)}


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
    interned process-wide, so equal styles are usually the same object)."""

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

#: OSC 133 (FinalTerm shell-integration marks). The harness's own prompt emits them to detect command
#: completion; libghostty-vt would act on ``A`` with a "fresh line" (a newline when the cursor is not in
#: column 0), which no xterm-like terminal does and which would shift what the policy sees after every
#: command whose output lacks a final newline. They are metadata, never screen content: cut them out.
_OSC133 = re.compile(r"\x1b\]133;[^\x07\x1b]*(?:\x07|\x1b\\)")
_MARK = "\x1b]133;"
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


# --- the raw cell value (libghostty-vt's packed 64-bit cell) --------------------------------------------
# bits 0-1 content tag (0 codepoint, 1 codepoint + grapheme, 2 palette background, 3 RGB background),
# 2-25 content (a 21-bit codepoint, or the colour of a colour-only cell), 26-41 style id (0: default),
# 42-43 wide (0 narrow, 1 wide, 2 spacer tail, 3 spacer head). Pinned against ghostty_cell_get by
# tests/engine/sandbox/test_emulator.py::test_raw_cell_layout_matches_the_c_accessors.
_TAG_MASK = 0x3
_CP_SHIFT, _CP_MASK = 2, 0x1FFFFF
_CONTENT_MASK = 0x3FFFFFF  # tag and content: names a colour-only cell's colour
_SID_SHIFT, _SID_MASK = 26, 0xFFFF
_WIDE_SHIFT, _WIDE_MASK = 42, 0x3
_TAG_GRAPHEME, _TAG_BG_PALETTE, _TAG_BG_RGB = 1, 2, 3
_WIDE_TAIL = 2
#: Style key of a colour-only cell: its tag and content, above every 16-bit style id.
_COLOUR_KEY = 1 << 40

#: Per-row versions, unique in the process, so a cache keyed by (row, version) never confuses screens.
_versions = itertools.count(1)

_ffi: Any = None
_lib: Any = None
_np: Any = None


def _setup() -> None:
    """Loads libghostty-vt and numpy on the first screen of the process (never at import: a command that
    shows no screen pays neither)."""
    global _ffi, _lib, _np
    if _lib is None:
        import numpy

        _np = numpy
        _ffi, _lib = native()


def _check(res: int, what: str) -> None:
    if res:
        raise RuntimeError(f"libghostty-vt: {what} failed (code {res})")


def _style_colour(c: Any) -> str | None:
    if c.tag == _lib.GHOSTTY_STYLE_COLOR_PALETTE:
        index: int = c.value.palette
        return _STYLE_PALETTE[index]
    if c.tag == _lib.GHOSTTY_STYLE_COLOR_RGB:
        v = c.value.rgb
        return f"#{v.r:02x}{v.g:02x}{v.b:02x}"
    return None


#: GhosttyStyle bytes -> interned CellStyle (pure: shared by every screen).
_style_cache: dict[bytes, CellStyle] = {}
#: Style key of a colour-only cell -> CellStyle(bg=...).
_colour_cache: dict[int, CellStyle] = {}


def _colour_style(key: int) -> CellStyle:
    st = _colour_cache.get(key)
    if st is None:
        tag, content = key & _TAG_MASK, (key >> _CP_SHIFT) & 0xFFFFFF
        if tag == _TAG_BG_PALETTE:
            bg = _STYLE_PALETTE[content & 0xFF]
        else:
            bg = f"#{content & 0xFF:02x}{(content >> 8) & 0xFF:02x}{content >> 16:02x}"
        st = _colour_cache[key] = CellStyle(bg=bg)
    return st


class _Row:
    """One decoded row. ``chars`` is the row's text with one entry per column: a ``str`` when every
    column holds exactly one character (the common case: slicing it is all a run costs), else a list
    (``""`` for a wide character's right half, several code points for a grapheme cluster). ``runs``
    are ``(first column, style)``, each run lasting until the next one starts."""

    __slots__ = ("chars", "runs", "_text")

    def __init__(self, chars: str | list[str], runs: list[tuple[int, CellStyle]]) -> None:
        self.chars = chars
        self.runs = runs
        self._text: str | None = chars if isinstance(chars, str) else None

    @property
    def text(self) -> str:
        if self._text is None:
            self._text = "".join(self.chars)
        return self._text

    def styles(self) -> list[CellStyle]:
        """The style of every column."""
        out: list[CellStyle] = []
        n = len(self.chars)
        for i, (start, st) in enumerate(self.runs):
            end = self.runs[i + 1][0] if i + 1 < len(self.runs) else n
            out.extend([st] * (end - start))
        return out


_blank_rows: dict[int, _Row] = {}


def _blank(cols: int) -> _Row:
    row = _blank_rows.get(cols)
    if row is None:
        row = _blank_rows[cols] = _Row(" " * cols, [(0, DEFAULT_STYLE)])
    return row


class SnapshotError(RuntimeError):
    """The native encoder refused this state (seen after a resize cuts a wide character in two). A replay
    index then simply takes no keyframe there: seeking stays exact, just a little slower."""


@dataclass(frozen=True)
class ScreenSnapshot:
    """An immutable keyframe for replay; restore it any number of times. ``data`` is libghostty-vt's
    snapshot encoding (bytes), so a keyframe can be written to disk and read back; ``compressed``: the
    encoding zlib-compressed (:meth:`packed`: ~5x smaller, ~0.1 ms to restore; a replay index holds
    hundreds)."""

    data: bytes
    cols: int
    rows: int
    pending: str = ""  # an OSC 133 mark cut at the keyframe, held back (see Screen.feed)
    compressed: bool = False

    def packed(self) -> ScreenSnapshot:
        """The same keyframe, compressed (what a replay index keeps)."""
        if self.compressed:
            return self
        return ScreenSnapshot(
            zlib.compress(self.data, 1), self.cols, self.rows, self.pending, compressed=True
        )

    def encoding(self) -> bytes:
        """libghostty-vt's snapshot encoding, uncompressed."""
        return zlib.decompress(self.data) if self.compressed else self.data


class Screen:
    """A thread-safe emulated screen: the reader thread feeds it while the UI and the policy read it."""

    def __init__(self, cols: int = 120, rows: int = 40, *, _terminal: Any = None) -> None:
        if cols < 1 or rows < 1:
            raise ValueError(f"screen size must be positive, got {cols}x{rows}")
        _setup()
        ffi, lib = _ffi, _lib
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
        self._u16 = ffi.new("uint16_t*")
        self._u32 = ffi.new("uint32_t*")
        self._bool = ffi.new("bool*")
        self._false = ffi.new("bool*", False)
        self._dirty_state = ffi.new("GhosttyRenderStateDirty*")
        self._dirty_false = ffi.new("GhosttyRenderStateDirty*", lib.GHOSTTY_RENDER_STATE_DIRTY_FALSE)
        self._view = ffi.new("GhosttyCellsView*")
        self._row_raw = ffi.new("GhosttyRow*")
        self._style = ffi.new("GhosttyStyle*")
        self._style.size = ffi.sizeof("GhosttyStyle")
        self._style_buf = ffi.buffer(self._style)
        self._glen = ffi.new("uint32_t*")
        self._gbuf = ffi.new("uint32_t[]", 64)
        self._cols, self._rows = self._query_size()
        self._raw: list[bytes] = [b""] * self._rows  # each row's raw cells at the last sync
        self._decoded: list[_Row | None] = [None] * self._rows  # None: not decoded since it changed
        self._version: list[int] = [next(_versions) for _ in range(self._rows)]
        self._fed = True  # the render state must be pulled before the next read
        self._dirty: set[int] = set(range(self._rows))
        self._pending = ""  # an OSC 133 mark cut by a chunk boundary, waiting for its end
        self._recheck = False  # non-ASCII input since the last sync: a mark may have joined an old cell
        self._resized = False

    # --- input --- #

    def feed(self, data: str | bytes) -> None:
        if not isinstance(data, str):
            data = data.decode("utf-8", "surrogateescape")
        with self._lock:
            if self._pending:
                data = self._pending + data
                self._pending = ""
            if _MARK in data:
                data = _OSC133.sub("", data)
            if "\x1b" in data[-_MARKER_MAX:]:
                data, self._pending = _hold_marker_tail(data)
            if not data.isascii():
                self._recheck = True
            try:
                raw = data.encode("utf-8", "surrogateescape")
            except UnicodeEncodeError:  # a lone surrogate: becomes U+FFFD, never an exception
                raw = data.encode("utf-8", "replace")
            _lib.ghostty_terminal_vt_write(self._t, raw, len(raw))
            self._fed = True

    def resize(self, cols: int, rows: int) -> None:
        if cols < 1 or rows < 1:
            raise ValueError(f"screen size must be positive, got {cols}x{rows}")
        with self._lock:
            _check(_lib.ghostty_terminal_resize(self._t, cols, rows, 8, 16), "resize")
            self._cols, self._rows = cols, rows
            self._fed = True
            self._resized = True
            self._dirty = set()  # every row is dirty after the next sync

    # --- native state --- #

    def _query_size(self) -> tuple[int, int]:
        _lib.ghostty_terminal_get(self._t, _lib.GHOSTTY_TERMINAL_DATA_COLS, self._u16)
        cols = self._u16[0]
        _lib.ghostty_terminal_get(self._t, _lib.GHOSTTY_TERMINAL_DATA_ROWS, self._u16)
        return cols, self._u16[0]

    def _changed(self, y: int) -> None:
        self._decoded[y] = None
        self._version[y] = next(_versions)
        self._dirty.add(y)

    def _row_may_differ(self, it: Any, *, styles: bool) -> bool:
        """Whether a row whose raw bytes did not change may still look different: a grapheme cluster
        can grow without changing its cell's value, and (``styles``) a style id is only meaningful
        within its page, which a row that moved may have changed."""
        lib, flag = _lib, self._bool
        if lib.ghostty_render_state_row_get(it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_RAW, self._row_raw):
            return True
        row = self._row_raw[0]
        lib.ghostty_row_get(row, lib.GHOSTTY_ROW_DATA_GRAPHEME, flag)
        if flag[0]:
            return True
        if styles:
            lib.ghostty_row_get(row, lib.GHOSTTY_ROW_DATA_STYLED, flag)
            return bool(flag[0])
        return False

    def _sync(self) -> None:
        """Pulls what changed since the last read: new raw bytes and a new version for each changed row
        (caller holds the lock). Decodes nothing."""
        if not self._fed:
            return
        self._fed = False
        ffi, lib = _ffi, _lib
        rows = self._rows
        resized = self._resized or len(self._raw) != rows
        self._resized = False
        if resized:
            self._raw = [b""] * rows
            self._decoded = [None] * rows
            self._version = [0] * rows
        rs, it_p, view, flag = self._rs, self._it_p, self._view, self._bool
        _check(lib.ghostty_render_state_update(rs, self._t), "render_state_update")
        lib.ghostty_render_state_get(rs, lib.GHOSTTY_RENDER_STATE_DATA_DIRTY, self._dirty_state)
        full = resized or self._dirty_state[0] == lib.GHOSTTY_RENDER_STATE_DIRTY_FULL
        _check(lib.ghostty_render_state_get(rs, lib.GHOSTTY_RENDER_STATE_DATA_ROW_ITERATOR, it_p), "rows")
        it = it_p[0]
        raws = self._raw
        seen = [False] * rows  # rows read in this pass (for the grapheme re-check below)
        y = 0
        while y < rows and lib.ghostty_render_state_row_iterator_next(it):
            if not full:
                lib.ghostty_render_state_row_get(it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_DIRTY, flag)
                if not flag[0]:
                    y += 1
                    continue
            lib.ghostty_render_state_row_get(it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_CELLS_RAW, view)
            raw = ffi.buffer(view.ptr, view.len * 8)[:]
            if full or raw != raws[y] or self._row_may_differ(it, styles=True):
                raws[y] = raw
                self._changed(y)
            lib.ghostty_render_state_row_set(it, lib.GHOSTTY_RENDER_STATE_ROW_OPTION_DIRTY, self._false)
            seen[y] = True
            y += 1
        lib.ghostty_render_state_set(rs, lib.GHOSTTY_RENDER_STATE_OPTION_DIRTY, self._dirty_false)
        if self._recheck:
            self._recheck = False
            if not full:
                self._recheck_graphemes(seen)

    def _recheck_graphemes(self, seen: list[bool]) -> None:
        """A combining mark, joiner or modifier joined to a cell printed before the last read changes a
        row the render state does not report dirty. A fresh render state copies every row; rows not
        already read above are compared by bytes (their styles cannot have moved: nothing else touched
        them), and a row holding a grapheme cluster counts as changed (its cell value stays the same
        when a cluster grows). Then the fresh state replaces the old one."""
        ffi, lib = _ffi, _lib
        fresh_p = ffi.new("GhosttyRenderState*")
        _check(lib.ghostty_render_state_new(ffi.NULL, fresh_p), "render_state_new")
        fresh = fresh_p[0]
        _check(lib.ghostty_render_state_update(fresh, self._t), "render_state_update")
        it_p, view = self._it_p, self._view
        _check(lib.ghostty_render_state_get(fresh, lib.GHOSTTY_RENDER_STATE_DATA_ROW_ITERATOR, it_p), "rows")
        it = it_p[0]
        raws = self._raw
        y = 0
        while y < self._rows and lib.ghostty_render_state_row_iterator_next(it):
            if not seen[y]:
                lib.ghostty_render_state_row_get(it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_CELLS_RAW, view)
                raw = ffi.buffer(view.ptr, view.len * 8)[:]
                if raw != raws[y] or self._row_may_differ(it, styles=False):
                    raws[y] = raw
                    self._changed(y)
            lib.ghostty_render_state_row_set(it, lib.GHOSTTY_RENDER_STATE_ROW_OPTION_DIRTY, self._false)
            y += 1
        lib.ghostty_render_state_set(fresh, lib.GHOSTTY_RENDER_STATE_OPTION_DIRTY, self._dirty_false)
        old = self._rs
        self._rs = fresh
        self._free.detach()
        self._free = weakref.finalize(self, _free_native, self._t, fresh, it_p[0], self._cells_p[0])
        lib.ghostty_render_state_free(old)

    # --- decoding --- #

    def _rows_at(self, ys: list[int]) -> list[_Row]:
        """Decoded rows ``ys`` (caller holds the lock and has synced); decodes the stale ones at once."""
        decoded = self._decoded
        stale = sorted({y for y in ys if decoded[y] is None})
        if stale:
            self._decode(stale)
        return [decoded[y] for y in ys]  # type: ignore[misc]  # every stale row was decoded just above

    def _decode(self, ys: list[int]) -> None:
        """Decodes rows ``ys`` (sorted) from their raw cells, vectorised over all of them.

        Text: code points straight out of the raw values (blank and colour-only cells are spaces), one
        UTF-32 decode for every row. Style runs: a run starts where the style key (style id, or the
        colour of a colour-only cell) changes; each run's style is looked up once. Only the first cell
        of each style id in a row (ids are per page; a row lives in one page) and grapheme clusters
        (stored beside their cell) need the native render state, walked once, top to bottom."""
        np = _np
        cols = self._cols
        width = cols * 8
        raws = self._raw
        blob = b"".join(
            r if len(r) == width else r[:width].ljust(width, b"\0") for r in (raws[y] for y in ys)
        )
        a = np.frombuffer(blob, dtype=np.uint64).reshape(len(ys), cols)
        tag = a & _TAG_MASK
        cp = (a >> _CP_SHIFT) & _CP_MASK
        colour = tag >= _TAG_BG_PALETTE
        text = np.where(colour | (cp == 0), 32, cp).astype("<u4").tobytes().decode("utf-32-le", "replace")
        key = np.where(colour, (a & _CONTENT_MASK) | _COLOUR_KEY, (a >> _SID_SHIFT) & _SID_MASK)
        special = (((a >> _WIDE_SHIFT) & _WIDE_MASK) == _WIDE_TAIL) | (tag == _TAG_GRAPHEME)
        used = a.any(axis=1).tolist()
        has_special = special.any(axis=1).tolist()
        first_keys = key[:, 0].tolist()
        bi, bx = np.nonzero(key[:, 1:] != key[:, :-1])
        bx = bx + 1
        bounds = list(zip(bi.tolist(), bx.tolist(), key[bi, bx].tolist(), strict=True))
        nb, k = len(bounds), 0
        walker = _RowWalker(self)
        decoded = self._decoded
        for i, y in enumerate(ys):
            if not used[i]:
                decoded[y] = _blank(cols)
                while k < nb and bounds[k][0] == i:  # an all-zero row has no boundaries, but be sure
                    k += 1
                continue
            chars: str | list[str] = text[i * cols : (i + 1) * cols]
            if has_special[i]:
                chars = list(chars)
                row_raw = a[i]
                for x in np.flatnonzero(special[i]).tolist():
                    r = int(row_raw[x])
                    if (r >> _WIDE_SHIFT) & _WIDE_MASK == _WIDE_TAIL:
                        chars[x] = ""
                    else:
                        chars[x] = walker.grapheme(y, x) or chars[x]
            runs: list[tuple[int, CellStyle]] = []
            sids: dict[int, CellStyle] = {}
            start, kv = 0, first_keys[i]
            while True:
                if kv == 0:
                    st = DEFAULT_STYLE
                elif kv >= _COLOUR_KEY:
                    st = _colour_style(kv)
                else:
                    cached = sids.get(kv)
                    if cached is None:
                        cached = sids[kv] = walker.style(y, start)
                    st = cached
                if not runs or runs[-1][1] is not st:
                    runs.append((start, st))
                if k < nb and bounds[k][0] == i:
                    _, start, kv = bounds[k]
                    k += 1
                else:
                    break
            decoded[y] = _Row(chars, runs)

    # --- reading --- #

    @property
    def cols(self) -> int:
        return self._cols

    @property
    def rows(self) -> int:
        return self._rows

    @property
    def lock(self) -> threading.RLock:
        """Held by every read and feed; a reader that needs several reads to agree (a widget painting a
        frame: cursor, versions and rows) holds it around them."""
        return self._lock

    @property
    def alternate_screen(self) -> bool:
        with self._lock:
            _lib.ghostty_terminal_get(self._t, _lib.GHOSTTY_TERMINAL_DATA_ACTIVE_SCREEN, self._u32)
            screen: int = self._u32[0]
            alternate: int = _lib.GHOSTTY_TERMINAL_SCREEN_ALTERNATE
            return screen == alternate

    def lines(self) -> list[str]:
        with self._lock:
            self._sync()
            return [row.text.rstrip() for row in self._rows_at(list(range(self._rows)))]

    def text(self) -> str:
        return "\n".join(self.lines()).rstrip("\n")

    def cursor(self) -> tuple[int, int]:
        """Clamped to the grid: after writing the last column the real cursor sits one past it."""
        with self._lock:
            _lib.ghostty_terminal_get(self._t, _lib.GHOSTTY_TERMINAL_DATA_CURSOR_X, self._u16)
            x = self._u16[0]
            _lib.ghostty_terminal_get(self._t, _lib.GHOSTTY_TERMINAL_DATA_CURSOR_Y, self._u16)
            y = self._u16[0]
            return (min(max(x, 0), self._cols - 1), min(max(y, 0), self._rows - 1))

    def cursor_visible(self) -> bool:
        """Whether the program shows its cursor (DECTCEM, ``ESC[?25l`` hides it)."""
        with self._lock:
            _lib.ghostty_terminal_get(self._t, _lib.GHOSTTY_TERMINAL_DATA_CURSOR_VISIBLE, self._bool)
            return bool(self._bool[0])

    def row_versions(self) -> list[int]:
        """Each row's version: it changes whenever the row's content does (a new value, unique in the
        process), so a widget can cache what it drew per (row, version)."""
        with self._lock:
            self._sync()
            return list(self._version)

    def styled_rows(self) -> list[list[Cell]]:
        with self._lock:
            self._sync()
            decoded = self._rows_at(list(range(self._rows)))
        cc = _CELL_COLOUR
        out = []
        for row in decoded:
            cells = []
            for ch, st in zip(row.chars, row.styles(), strict=True):
                cells.append(
                    Cell(
                        ch,
                        cc.get(st.fg, st.fg),
                        cc.get(st.bg, st.bg),
                        st.bold,
                        st.italic,
                        st.underline,
                        st.reverse,
                    )
                )
            out.append(cells)
        return out

    def row_cells(self, y: int) -> list[tuple[str, CellStyle]]:
        """Row ``y`` as ``[(char, style)]``, one entry per column (``""`` for a wide tail)."""
        with self._lock:
            self._sync()
            if not 0 <= y < self._rows:
                return []
            (row,) = self._rows_at([y])
        return list(zip(row.chars, row.styles(), strict=True))

    def styled_runs(self, y: int, start: int, end: int, mark: int = -1) -> list[tuple[str, Any]]:
        """``[(text, style), ...]`` for columns ``[start, end)`` of row ``y``: what a widget paints.

        The cell at column ``mark`` (the cursor) comes as its own run with style ``("cursor", style)``. A
        wide character cut by either edge becomes a blank, so the runs always span ``end - start`` cells.
        """
        with self._lock:
            self._sync()
            if not 0 <= y < self._rows:
                return []
            # Readers of one row usually read the next ones too: decode every stale row now, together
            # (a pane's repaint, which reads only what it shows, uses styled_runs_many).
            self._rows_at(list(range(self._rows)))
            row = self._decoded[y]
        return runs_of(row, start, end, mark)  # type: ignore[arg-type]  # decoded just above: not None

    def styled_runs_many(
        self, wanted: list[tuple[int, int]], start: int, end: int
    ) -> list[list[tuple[str, Any]]]:
        """:meth:`styled_runs` of several rows at once, ``wanted`` being ``(row, mark)`` pairs: the rows a
        pane shows are decoded together (one vectorised pass instead of one per row)."""
        with self._lock:
            self._sync()
            ys = [y for y, _ in wanted if 0 <= y < self._rows]
            rows = dict(zip(ys, self._rows_at(ys), strict=True))
        return [runs_of(rows[y], start, end, mark) if y in rows else [] for y, mark in wanted]

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
            ffi, lib = _ffi, _lib
            n = ffi.new("size_t*")
            lib.ghostty_snapshot_encode_buf(self._t, ffi.NULL, 0, n)
            buf = ffi.new("uint8_t[]", max(n[0], 1))
            res = lib.ghostty_snapshot_encode_buf(self._t, buf, n[0], n)
            if res:
                raise SnapshotError(f"libghostty-vt cannot encode this screen state (code {res})")
            return ScreenSnapshot(ffi.buffer(buf, n[0])[:], self._cols, self._rows, self._pending)

    @classmethod
    def restore(cls, snap: ScreenSnapshot) -> Screen:
        """A new, independent screen in exactly the snapshot's state. Nothing is decoded until read."""
        screen = cls.from_snapshot_bytes(snap.encoding(), snap.cols, snap.rows)
        screen._pending = snap.pending
        return screen

    @classmethod
    def from_snapshot_bytes(cls, data: bytes, cols: int, rows: int) -> Screen:
        _setup()
        ffi, lib = _ffi, _lib
        dec = ffi.new("GhosttySnapshotDecoder*")
        _check(lib.ghostty_snapshot_decoder_new_buf(ffi.NULL, dec, data, len(data)), "snapshot_decoder")
        try:
            t = ffi.new("GhosttyTerminal*")
            _check(lib.ghostty_snapshot_decoder_decode(dec[0], t), "snapshot_decode")
        finally:
            lib.ghostty_snapshot_decoder_free(dec[0])
        return cls(cols, rows, _terminal=t[0])


def _free_native(t: Any, rs: Any, it: Any, cells: Any) -> None:
    _lib.ghostty_render_state_row_cells_free(cells)
    _lib.ghostty_render_state_row_iterator_free(it)
    _lib.ghostty_render_state_free(rs)
    _lib.ghostty_terminal_free(t)


def runs_of(row: _Row, start: int, end: int, mark: int = -1) -> list[tuple[str, Any]]:
    """The styled runs of columns ``[start, end)`` of a decoded row (see :meth:`Screen.styled_runs`)."""
    chars = row.chars
    n = len(chars)
    start, end = max(start, 0), min(end, n)
    if start >= end:
        return []
    if isinstance(chars, str):
        seg: str | list[str] = chars
    else:  # wide characters: a half cut by either edge shows as a blank
        seg = chars
        if chars[start] == "" or (end < n and chars[end] == ""):
            seg = list(chars)
            if seg[start] == "":
                seg[start] = " "
            if end < n and chars[end] == "":
                seg[end - 1] = " "

    def piece(a: int, b: int) -> str:
        return seg[a:b] if isinstance(seg, str) else "".join(seg[a:b])

    out: list[tuple[str, Any]] = []
    runs = row.runs
    last = len(runs) - 1
    for i, (run_start, style) in enumerate(runs):
        run_end = runs[i + 1][0] if i < last else n
        a, b = max(run_start, start), min(run_end, end)
        if a >= b:
            if run_start >= end:
                break
            continue
        if a <= mark < b:
            if a < mark:
                out.append((piece(a, mark), style))
            out.append((seg[mark] or " ", ("cursor", style)))
            if mark + 1 < b:
                out.append((piece(mark + 1, b), style))
        else:
            out.append((piece(a, b), style))
    return out


class _RowWalker:
    """Positions the render state's row iterator on the rows being decoded (top to bottom, once) to read
    what raw cell values do not hold: a style id's style and a grapheme cluster's code points."""

    def __init__(self, screen: Screen) -> None:
        self.s = screen
        self.y = -1
        self.it: Any = None
        self.cells: Any = None

    def _row(self, y: int) -> Any:
        lib, s = _lib, self.s
        if self.it is None or y < self.y:
            _check(
                lib.ghostty_render_state_get(s._rs, lib.GHOSTTY_RENDER_STATE_DATA_ROW_ITERATOR, s._it_p),
                "rows",
            )
            self.it, self.y = s._it_p[0], -1
        while self.y < y:
            if not lib.ghostty_render_state_row_iterator_next(self.it):
                raise RuntimeError(f"libghostty-vt: render state has no row {y}")
            self.y += 1
            self.cells = None
        if self.cells is None:
            _check(
                lib.ghostty_render_state_row_get(
                    self.it, lib.GHOSTTY_RENDER_STATE_ROW_DATA_CELLS, s._cells_p
                ),
                "row cells",
            )
            self.cells = s._cells_p[0]
        return self.cells

    def style(self, y: int, x: int) -> CellStyle:
        lib, s = _lib, self.s
        cells = self._row(y)
        lib.ghostty_render_state_row_cells_select(cells, x)
        lib.ghostty_render_state_row_cells_get(cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_STYLE, s._style)
        key = s._style_buf[:]
        st = _style_cache.get(key)
        if st is None:
            v = s._style
            st = CellStyle(
                fg=_style_colour(v.fg_color),
                bg=_style_colour(v.bg_color),
                bold=bool(v.bold),
                italic=bool(v.italic),
                underline=bool(v.underline),
                reverse=bool(v.inverse),
                dim=bool(v.faint),
                strike=bool(v.strikethrough),
                conceal=bool(v.invisible),
            )
            if st == DEFAULT_STYLE:
                st = DEFAULT_STYLE
            _style_cache[key] = st
        return st

    def grapheme(self, y: int, x: int) -> str:
        lib, s = _lib, self.s
        cells = self._row(y)
        lib.ghostty_render_state_row_cells_select(cells, x)
        lib.ghostty_render_state_row_cells_get(
            cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_GRAPHEMES_LEN, s._glen
        )
        n = s._glen[0]
        if n == 0:
            return ""
        if n > len(s._gbuf):
            s._gbuf = _ffi.new("uint32_t[]", n * 2)
        lib.ghostty_render_state_row_cells_get(
            cells, lib.GHOSTTY_RENDER_STATE_ROW_CELLS_DATA_GRAPHEMES_BUF, s._gbuf
        )
        return "".join(map(chr, s._gbuf[0:n]))
