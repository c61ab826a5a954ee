"""Test-only reference emulator: the bittty-backed Screen Bandpass shipped before libghostty-vt.

Kept verbatim (minus snapshots) so tests/engine/sandbox/test_emulator_differential.py can compare the native
core cell for cell against it. Original docstring follows.


The policy's observation, the curator's live pane and the replay must all show the same state, so they
all read it through :class:`Screen`. The backend is bittty (pure Python): measured 2-10x faster than
pyte on our streams (bench/BENCHMARKS.md) and, unlike pyte, it keeps a separate alternate screen, so a
policy that quits ``vim`` or ``less`` sees the shell again instead of the editor's last frame. Swapping
the backend means rewriting this file only.

We never attach a display or a host to the bittty board: OSC 52 (clipboard), OSC 0/2 (title), OSC 8
(hyperlinks) and device queries are parsed and dropped, so nothing a task prints can reach the curator's
real terminal, and only cells are rendered.
"""

from __future__ import annotations

import copy
import functools
import threading
import types
from dataclasses import dataclass
from typing import Any

from bittty import Board
from bittty.style import Color, Style
from bittty.video import Video

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
    out = [""] * 16
    steps = (0, 95, 135, 175, 215, 255)
    for i in range(216):
        r, g, b = steps[i // 36], steps[(i // 6) % 6], steps[i % 6]
        out.append(f"#{r:02x}{g:02x}{b:02x}")
    for i in range(24):
        v = 8 + 10 * i
        out.append(f"#{v:02x}{v:02x}{v:02x}")
    return out


_PALETTE = _xterm_256()


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


def _colour(c: Color | None) -> str | None:
    if c is None or c.mode == "default":
        return None
    if c.mode == "indexed":
        n = int(c.value)
        return ANSI_NAMES[n] if n < 16 else _PALETTE[n] if n < 256 else None
    if c.mode == "rgb":
        r, g, b = c.value
        return f"#{r:02x}{g:02x}{b:02x}"
    return None


def _clone_video(v: Video, memo: dict[int, Any]) -> Video:
    """Copy a page without deep-copying its cells: cells are immutable tuples, rows are the only mutable
    part, so a row-level copy is a full copy at a fraction of ``deepcopy``'s cost."""
    new = copy.copy(v)
    new.grid = []
    for row in v.grid:
        new.grid.append(list(row))
        memo[id(row)] = new.grid[-1]  # other objects (the grapheme writer) hold rows by identity
    new.line_attributes = list(v.line_attributes)
    new.wrapped_lines = list(v.wrapped_lines)
    new.row_gen = list(v.row_gen)
    memo[id(v)] = new
    return new


def _clone_board(src: Board) -> Board:
    """A full, independent copy of a bittty board.

    ``copy.deepcopy(board)`` is not usable: it fails on the board's RLock and, worse, when given one, the
    copy's operation tables are closures still bound to the *original* devices, so the copy silently
    writes nowhere. Instead we build a fresh board (fresh tables) and deep-copy only the data attributes
    of the board, its devices and its parser, mapping every reference to an old device onto the new one.
    """
    dst = Board(width=src.width, height=src.height)
    memo: dict[int, Any] = {id(src): dst, id(src._output_lock): dst._output_lock}
    pairs: list[tuple[Any, Any]] = [(src, dst), (src.parser, dst.parser)]
    for name, dev in src.devices.items():
        pairs.append((dev, dst.devices[name]))
    for name in ("host", "display"):
        memo[id(getattr(src, name))] = getattr(dst, name)
    for old, new in pairs:
        memo[id(old)] = new
    for v in {id(v): v for v in (*src.blitter.pages, src.blitter.alt_page, src.blitter.status_page)}.values():
        if isinstance(v, Video):
            _clone_video(v, memo)
    for old, new in pairs:
        for key, value in vars(old).items():
            if key in _SKIP or "memo" in key or "cache" in key:
                continue
            if isinstance(value, _FUNCTIONS):
                continue  # closures over the old devices: the fresh board has its own (bound methods are
                # deep-copied instead, memo re-binding them to the new devices)
            setattr(new, key, copy.deepcopy(value, memo))
    return dst


_FUNCTIONS = (types.FunctionType, types.BuiltinFunctionType, functools.partial)
#: Attributes a fresh board already has: operation tables, wiring, and parse caches (rebuilt on demand).
_SKIP = frozenset({"handlers", "registry", "_registry", "devices", "host", "display", "parser"})


@dataclass(frozen=True)
class ScreenSnapshot:
    """An immutable keyframe for replay; restore it any number of times."""

    board: Board
    cols: int
    rows: int


class BitttyScreen:
    """A thread-safe emulated screen: the reader thread feeds it while the UI and the policy read it."""

    def __init__(self, cols: int = 120, rows: int = 40) -> None:
        if cols < 1 or rows < 1:
            raise ValueError(f"screen size must be positive, got {cols}x{rows}")
        self._lock = threading.RLock()
        self._board = Board(width=cols, height=rows)
        self._style_cache: dict[Style, tuple[str | None, str | None, bool, bool, bool, bool]] = {}
        self._init_board()

    def _init_board(self) -> None:
        # Grapheme clustering (mode 2027) is what makes "e" + U+0301 one cell; without it bittty gives
        # the combining mark a cell of its own and every later column on the row shifts by one.
        # "Permanently set" so that neither RIS nor a program's DECRST 2027 can turn it off.
        self._board.modes.set_grapheme_capability("permanently-set")
        self._seen_page: Video | None = None
        self._seen_gen = 0
        self._all_dirty = True
        self.clear_dirty()
        self._all_dirty = True

    # --- input --- #

    def feed(self, data: str) -> None:
        with self._lock:
            self._board.parser.feed(data)

    def resize(self, cols: int, rows: int) -> None:
        if cols < 1 or rows < 1:
            raise ValueError(f"screen size must be positive, got {cols}x{rows}")
        with self._lock:
            self._board.resize(cols, rows)
            self._all_dirty = True

    # --- reading --- #

    @property
    def cols(self) -> int:
        width: int = self._board.width
        return width

    @property
    def rows(self) -> int:
        height: int = self._board.height
        return height

    @property
    def alternate_screen(self) -> bool:
        return bool(self._board.blitter.in_alt_screen)

    def lines(self) -> list[str]:
        with self._lock:
            page = self._board.blitter.main_page
            return [page.get_line_text(y).rstrip() for y in range(page.height)]

    def text(self) -> str:
        return "\n".join(self.lines()).rstrip("\n")

    def cursor(self) -> tuple[int, int]:
        """Clamped to the grid: after writing the last column the real cursor sits one past it."""
        with self._lock:
            c = self._board.cursor
            return (min(max(c.x, 0), self.cols - 1), min(max(c.y, 0), self.rows - 1))

    def styled_rows(self) -> list[list[Cell]]:
        with self._lock:
            page = self._board.blitter.main_page
            cache = self._style_cache
            out: list[list[Cell]] = []
            for row in page.grid:
                cells: list[Cell] = []
                for style, ch in row:
                    attrs = cache.get(style)
                    if attrs is None:
                        attrs = (
                            _colour(style.fg),
                            _colour(style.bg),
                            bool(style.bold),
                            bool(style.italic),
                            bool(style.underline),
                            bool(style.reverse),
                        )
                        cache[style] = attrs
                    cells.append(Cell(str(ch), *attrs))
                out.append(cells)
            return out

    # --- dirty tracking --- #

    @property
    def dirty(self) -> set[int]:
        """Rows changed since :meth:`clear_dirty`; every row after a resize or an alt-screen switch."""
        with self._lock:
            page = self._board.blitter.main_page
            if self._all_dirty or page is not self._seen_page:
                return set(range(self.rows))
            assert page is not None  # bittty's main page always exists
            return set(page.dirty_rows(self._seen_gen))

    def clear_dirty(self) -> None:
        with self._lock:
            page = self._board.blitter.main_page
            self._seen_page = page
            self._seen_gen = page.observe()
            self._all_dirty = False

    # --- keyframes --- #

    def snapshot(self) -> ScreenSnapshot:
        with self._lock:
            return ScreenSnapshot(_clone_board(self._board), self.cols, self.rows)

    @classmethod
    def restore(cls, snap: ScreenSnapshot) -> BitttyScreen:
        screen = cls(snap.cols, snap.rows)
        screen._board = _clone_board(snap.board)
        screen._all_dirty = True
        return screen
