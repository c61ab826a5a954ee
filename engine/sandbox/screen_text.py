"""Text of a screen as a search index needs it: whole logical lines, and the lines that scrolled away.

:class:`engine.sandbox.emulator.Screen` keeps no scroll-back on purpose (the policy and the pane see the
screen, and a keyframe must hold the whole state). Search needs more: a line a command printed and
scrolled off between two step markers was on the curator's screen and must be findable. ``TextScreen``
is that same screen (same parser, same OSC 133 handling, so its rows are the rows Replay paints) with
libghostty-vt's history turned on, read and emptied after every write: what scrolled away during one
write comes back as text once, and the history never grows past one write's worth.

Why libghostty-vt's own formatter and not the row cache: the formatter joins soft-wrapped rows into the
line the program printed (``unwrap``) in one native call, so a phrase wrapped at column 160 is still one
phrase; the row cache would cost a Python decode of every cell per write.

This module reaches into the native handles :mod:`engine.sandbox.emulator` owns (``_t``) and the library
(``engine.sandbox.ghostty``, loaded with the first screen): swapping the backend means rewriting that
module and this one.
"""

from __future__ import annotations

from typing import Any

from .emulator import Screen
from .ghostty import native, union_fn

#: History kept between two reads: far more than one write can scroll (a 64 KiB read of short lines is
#: ~10k rows); when it overflows, the oldest rows of that one write are the ones lost.
_HISTORY_BYTES = 64 * 1024 * 1024

ffi: Any = None
lib: Any = None
_grid_ref: Any = None
_ACTIVE = _HISTORY = 0


def _setup() -> None:
    """The library, on the first TextScreen (importing this module loads nothing)."""
    global ffi, lib, _grid_ref, _ACTIVE, _HISTORY
    if _grid_ref is None:
        ffi, lib = native()
        _ACTIVE, _HISTORY = lib.GHOSTTY_POINT_TAG_ACTIVE, lib.GHOSTTY_POINT_TAG_HISTORY
        _grid_ref = union_fn(
            "ghostty_terminal_grid_ref", "GhosttyResult(*)(GhosttyTerminal, GhosttyPointS, GhosttyGridRef*)"
        )


class TextScreen(Screen):
    """A :class:`Screen` whose text can be read as logical lines, plus the lines that scrolled away."""

    def __init__(self, cols: int = 120, rows: int = 40, *, _terminal: Any = None) -> None:
        super().__init__(cols, rows, _terminal=_terminal)
        _setup()
        self._cap = ffi.new("size_t*", _HISTORY_BYTES)
        self._none = ffi.new("size_t*", 0)
        lib.ghostty_terminal_set(self._t, lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, self._cap)
        self._point = ffi.new("GhosttyPointS*")
        sel = ffi.new("GhosttySelection*")
        sel.size = ffi.sizeof("GhosttySelection")
        sel.start.size = sel.end.size = ffi.sizeof("GhosttyGridRef")
        self._sel = sel
        opts = ffi.new("GhosttyTerminalSelectionFormatOptions*")
        opts.size = ffi.sizeof("GhosttyTerminalSelectionFormatOptions")
        opts.emit = lib.GHOSTTY_FORMATTER_FORMAT_PLAIN
        opts.unwrap = True
        opts.trim = True
        opts.selection = sel
        self._opts = opts
        self._written = ffi.new("size_t*")
        self._buf = ffi.new("uint8_t[]", 1 << 16)
        self._ref = ffi.new("GhosttyGridRef*")
        self._ref.size = ffi.sizeof("GhosttyGridRef")
        self._row = ffi.new("GhosttyRow*")
        self._flag = ffi.new("bool*")
        self._count = ffi.new("size_t*")

    # --- native reads (caller holds the lock) --- #

    def _point_ref(self, out: Any, x: int, y: int, tag: int) -> None:
        self._point.tag = tag
        self._point.value.x = x
        self._point.value.y = y
        res = _grid_ref(self._t, self._point[0], out)
        if res:
            raise RuntimeError(f"libghostty-vt: grid_ref ({x}, {y}) failed (code {res})")

    def _format(self, first: int, last: int, tag: int) -> list[str]:
        """Rows ``first..last`` (inclusive) of ``tag``'s coordinates as logical lines (wraps joined)."""
        self._point_ref(ffi.addressof(self._sel, "start"), 0, first, tag)
        self._point_ref(ffi.addressof(self._sel, "end"), self._cols - 1, last, tag)
        opts, buf = self._opts[0], self._buf
        res = lib.ghostty_terminal_selection_format_buf(self._t, opts, buf, len(buf), self._written)
        if res:  # too small: the call said how much it needs
            self._buf = buf = ffi.new("uint8_t[]", self._written[0] + 1024)
            res = lib.ghostty_terminal_selection_format_buf(self._t, opts, buf, len(buf), self._written)
            if res:
                raise RuntimeError(f"libghostty-vt: selection format failed (code {res})")
        text: bytes = ffi.buffer(buf, self._written[0])[:]
        return text.decode("utf-8", "replace").split("\n")

    def _row_flag(self, y: int, tag: int, flag: int) -> bool:
        self._point_ref(self._ref, 0, y, tag)
        lib.ghostty_grid_ref_row(self._ref, self._row)
        lib.ghostty_row_get(self._row[0], flag, self._flag)
        return bool(self._flag[0])

    def _history_rows(self) -> int:
        lib.ghostty_terminal_get(self._t, lib.GHOSTTY_TERMINAL_DATA_SCROLLBACK_ROWS, self._count)
        return int(self._count[0])

    # --- reading --- #

    def take_scrolled(self, *, force: bool = False) -> list[str]:
        """The logical lines that scrolled off the top since the last call, oldest first; forgets them.

        A line whose start scrolled away while its end is still on screen (a soft wrap across the top
        edge) is left for a later call, so it comes back whole — unless ``force`` (at the end of a cast),
        when its scrolled part is returned as it is."""
        with self._lock:
            rows = self._history_rows()
            if rows == 0:
                return []
            if not force and self._row_flag(rows - 1, _HISTORY, lib.GHOSTTY_ROW_DATA_WRAP):
                return []
            lines = self._format(0, rows - 1, _HISTORY)
            lib.ghostty_terminal_set(self._t, lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, self._none)
            lib.ghostty_terminal_set(self._t, lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, self._cap)
            return lines

    def logical_lines(self, *, settled: bool = False) -> list[str]:
        """The screen's logical lines, top to bottom (blank ones included, trailing blanks trimmed).

        A top line whose beginning is still held in the history is left out: :meth:`take_scrolled`
        returns it whole later. ``settled`` also leaves out the line holding the cursor, which may still
        be growing (a command being typed, output cut by a read boundary)."""
        with self._lock:
            rows = self._rows
            held = self._history_rows() > 0
            cy = self.cursor()[1] if settled else rows
            out: list[str] = []
            if cy > 0:
                top = self._format(0, min(cy, rows) - 1, _ACTIVE)
                if settled and self._row_flag(cy - 1, _ACTIVE, lib.GHOSTTY_ROW_DATA_WRAP):
                    top.pop()  # it continues on the cursor's row
                if top and held and self._row_flag(0, _ACTIVE, lib.GHOSTTY_ROW_DATA_WRAP_CONTINUATION):
                    top.pop(0)
                out.extend(top)
            if settled and cy < rows - 1:
                bottom = self._format(cy + 1, rows - 1, _ACTIVE)
                if bottom and self._row_flag(cy, _ACTIVE, lib.GHOSTTY_ROW_DATA_WRAP):
                    bottom.pop(0)  # the rest of the cursor's line
                out.extend(bottom)
            return out
