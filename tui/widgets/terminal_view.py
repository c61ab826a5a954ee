"""TerminalView: a Line-API widget that paints an :class:`engine.sandbox.emulator.Screen`.

Why a Line-API widget and not a ``Static`` re-rendered with a Rich ``Text``: a live pane receives output
many times a second, and most of it touches one or two rows (a prompt, a progress bar). A Line-API widget
lets Textual ask for exactly the rows we invalidate (region refreshes), and we keep a per-row cache of
ready-made :class:`~textual.strip.Strip` objects, so an unchanged row costs a dict lookup per frame.

Threading model (the reason ``feed`` needs no ``call_from_thread``): the emulator ``Screen`` has its own
lock, so any thread may feed it. Feeding only *requests* a paint; the request reaches the UI thread as
one call per frame at most (:class:`~tui.widgets.threadsafe.UiCaller`, safe from any thread), and the
paint happens on a timer so a pane never repaints more than ``max_fps`` times a second however fast
bytes arrive. A worker that pushes 100 KB/s therefore costs the UI thread at most ``max_fps`` short
paints a second, never one call per chunk.

Safety: the emulator parses and drops OSC 52 (clipboard), OSC 0/2 (title), OSC 8 (hyperlinks) and device
queries; this widget additionally never turns a cell's hyperlink into a Rich link and replaces any C0/C1
control character left in a cell, so nothing a task prints can reach the curator's real terminal.

API (kept stable: the replay screen uses it too): ``feed(text)``, ``set_screen(screen)``, ``emulator``,
``request_paint()``, ``max_fps``, ``follow_cursor``, ``show_cursor``, ``paint_count``.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any, ClassVar

from rich.segment import Segment
from rich.style import Style as RichStyle
from textual.app import ComposeResult
from textual.events import Resize
from textual.geometry import Region
from textual.strip import Strip
from textual.timer import Timer
from textual.widget import Widget

from engine.sandbox.emulator import DEFAULT_STYLE, CellStyle, Screen
from tui.widgets.feed_pump import pump
from tui.widgets.threadsafe import UiCaller

#: C0 and C1 controls (and DEL) must never reach the real terminal through a cell's text.
_CONTROLS = {c: "\N{REPLACEMENT CHARACTER}" for c in (*range(0x00, 0x20), *range(0x7F, 0xA0))}


def _convert_style(style: CellStyle) -> RichStyle:
    """One emulator cell style as a Rich style. Hyperlinks are deliberately dropped (OSC 8 neutralised)."""
    return RichStyle(
        color=style.fg,
        bgcolor=style.bg,
        bold=style.bold or None,
        dim=style.dim or None,
        italic=style.italic or None,
        underline=style.underline or None,
        reverse=style.reverse or None,
        strike=style.strike or None,
        conceal=style.conceal or None,
    )


CURSOR = "cursor"


class _RowReader:
    """Reads one emulator row as styled runs (``Screen.styled_runs``), under the screen's own lock."""

    def __init__(self, screen: Screen) -> None:
        self.screen = screen

    def lock(self) -> Any:
        return self.screen._lock

    def runs(self, y: int, start: int, end: int, mark: int = -1) -> list[tuple[str, Any]]:
        """``[(text, style_key), ...]`` for columns ``[start, end)`` of row ``y``; the cursor cell at
        column ``mark`` comes as its own run with key ``(CURSOR, key)``."""
        return self.screen.styled_runs(y, start, end, mark)

    def cursor_visible(self) -> bool:
        return self.screen.cursor_visible()


class TerminalView(Widget, can_focus=True):
    """Paints an emulated terminal screen; repaints only changed rows, at most ``max_fps`` a second."""

    DEFAULT_CSS = (Path(__file__).with_suffix(".tcss")).read_text(encoding="utf-8")
    COMPONENT_CLASSES = {"terminal-view--cursor"}
    ALLOW_MAXIMIZE = True
    #: Paints per second shared by all panes that are busy at once (see ``_frame_interval``).
    FRAME_BUDGET = 40.0
    #: However many panes are busy, each repaints at least this often.
    MIN_FPS = 4.0
    #: id(view) -> time of its last paint, across all views: how many are busy right now.
    _busy: ClassVar[dict[int, float]] = {}

    def __init__(
        self,
        screen: Screen | None = None,
        *,
        cols: int = 160,
        rows: int = 40,
        max_fps: float = 60.0,
        follow_cursor: bool = True,
        show_cursor: bool = True,
        name: str | None = None,
        id: str | None = None,  # noqa: A002 - Textual's keyword
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._emulator = screen if screen is not None else Screen(cols, rows)
        self._reader = _RowReader(self._emulator)
        self.max_fps = max_fps
        self.follow_cursor = follow_cursor
        self.show_cursor = show_cursor
        self._pending = False
        self._pending_lock = threading.Lock()
        self._timer: Timer | None = None
        self._caller: UiCaller | None = None  # set on mount: schedules paints from any thread
        self._last_flush = 0.0
        self._rows: dict[int, Strip] = {}  # emulator row -> full-width strip (without cursor)
        self._styles: dict[Any, RichStyle] = {}
        self._base: RichStyle = RichStyle()
        self._cursor_style: RichStyle = RichStyle(reverse=True)
        self._cursor: tuple[int, int] = (-1, -1)
        self._origin: tuple[int, int] = (0, 0)  # (left column, top row) of the viewport
        #: Left column fixed by the viewer (replay panning a wide recording); None follows the cursor.
        self.pan_left: int | None = None
        #: Number of flushes that repainted something: benchmarks and tests read it.
        self.paint_count = 0
        #: ``time.perf_counter()`` of the last flush that repainted something.
        self.last_paint_at = 0.0

    def compose(self) -> ComposeResult:
        yield from ()

    # --- public API --- #

    @property
    def emulator(self) -> Screen:
        """The screen being shown (named so as not to shadow ``Widget.screen``)."""
        return self._emulator

    def feed(self, text: str) -> None:
        """Feeds terminal output; the repaint follows within one frame. Safe from any thread.

        On the UI thread (replay playback) the text is parsed before this returns. From any other thread
        it is handed to the shared :data:`~tui.widgets.feed_pump.pump` thread, so publishers never hold
        the GIL for parsing while the UI waits (see ``feed_pump``'s measurements).
        """
        caller = self._caller
        if caller is not None and threading.get_ident() == caller.thread:
            self._emulator.feed(text)
            self.request_paint()
        else:
            pump.submit(self._emulator, text, self.request_paint)

    def set_screen(self, screen: Screen) -> None:
        """Shows another screen (replay swaps restored keyframes in). Call on the UI thread."""
        self._emulator = screen
        self._reader = _RowReader(screen)
        self._rows.clear()
        self._cursor = (-1, -1)
        self.request_paint()
        self.refresh()

    def hidden_columns(self) -> tuple[int, int, int]:
        """(first visible column, last visible column, screen columns), 1-based: a viewer says when a
        wide recording does not fit instead of cutting it silently."""
        left = max(self._origin[0], 0)
        return (left + 1, min(left + self.size.width, self._emulator.cols), self._emulator.cols)

    def pan(self, delta: int) -> None:
        """Moves the viewport ``delta`` columns sideways (fixing it: it no longer follows the cursor)."""
        w, cols = self.size.width, self._emulator.cols
        start = self._origin[0] if self.pan_left is None else self.pan_left
        self.pan_left = max(0, min(max(start, 0) + delta, max(cols - w, 0)))
        self._origin = (-1, -1)
        self._rows.clear()
        self.request_paint()

    def request_paint(self) -> None:
        """Asks for a repaint of whatever changed. Safe from any thread; coalesced to one per frame."""
        with self._pending_lock:
            if self._pending:
                return
            self._pending = True
        caller = self._caller
        if caller is not None:
            caller.call(self._wake)

    # --- frame scheduling --- #

    def _wake(self) -> None:
        if not self.is_attached:
            with self._pending_lock:
                self._pending = False
            return
        if self._timer is not None:
            return
        delay = self._last_flush + self._frame_interval() - time.perf_counter()
        if delay <= 0:
            self._flush()
        else:
            self._timer = self.set_timer(delay, self._flush)

    def on_mount(self) -> None:
        self._caller = UiCaller()
        self._update_base_styles()
        with self._pending_lock:
            self._pending = False
        self.request_paint()

    def on_resize(self, _: Resize) -> None:
        self._origin = (-1, -1)  # recompute, repaint all
        self._rows.clear()
        self.request_paint()

    def on_unmount(self) -> None:
        TerminalView._busy.pop(id(self), None)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self._update_base_styles()

    def _update_base_styles(self) -> None:
        """Default colours come from CSS (so the theme switch applies); cell styles are cached on top."""
        base = self.rich_style
        base = RichStyle(color=base.color, bgcolor=base.bgcolor)
        cursor = self.get_component_rich_style("terminal-view--cursor", partial=True)
        if base != self._base or cursor != self._cursor_style:
            self._base, self._cursor_style = base, cursor
            self._styles.clear()
            self._rows.clear()
            self.refresh()

    def _frame_interval(self) -> float:
        """Seconds between paints: ``1/max_fps``, stretched when many panes are busy at once.

        All busy panes share :attr:`FRAME_BUDGET` paints a second (the focused pane is exempt), so eight
        scrolling thumbnails cost the UI thread what two full-rate panes would, and a key press is not
        queued behind a wall of repaints. Each pane still repaints at least :attr:`MIN_FPS` times a second.
        """
        fps = max(self.max_fps, 1.0)
        if not self.has_focus:
            now = time.perf_counter()
            busy = sum(1 for t in TerminalView._busy.values() if now - t < 0.5)
            if busy > 1:
                fps = min(fps, max(self.FRAME_BUDGET / busy, self.MIN_FPS))
        return 1.0 / fps

    def _flush(self) -> None:
        """Repaints the rows that changed since the last flush. Runs on the UI thread."""
        self._timer = None
        with self._pending_lock:
            self._pending = False
        self._last_flush = time.perf_counter()
        emu = self._emulator
        with self._reader.lock():  # dirty + clear must be atomic, or a row written between them is lost
            dirty = emu.dirty
            emu.clear_dirty()
            cx, cy = emu.cursor()
            cursor_on = self.show_cursor and self._reader.cursor_visible()
        cursor = (cx, cy) if cursor_on else (-1, -1)
        if cursor != self._cursor:
            dirty.update(y for _, y in (cursor, self._cursor) if y >= 0)
            self._cursor = cursor
        for y in dirty:
            self._rows.pop(y, None)
        origin = self._viewport(cx, cy)
        if origin != self._origin:
            self._origin = origin
            self._rows.clear()
            self.refresh()
        elif dirty:
            self.refresh(*self._line_regions(dirty, origin[1]))
        else:
            return
        self.paint_count += 1
        self.last_paint_at = self._last_flush
        TerminalView._busy[id(self)] = self._last_flush

    def _line_regions(self, rows: set[int], top: int) -> list[Region]:
        """Widget-relative regions covering the visible ``rows``, consecutive rows merged."""
        width, height = self.size.width, self.size.height
        regions: list[Region] = []
        start = prev = None
        for y in sorted(r - top for r in rows if top <= r < top + height):
            if prev is not None and y == prev + 1:
                prev = y
                continue
            if start is not None:
                regions.append(Region(0, start, width, prev - start + 1))  # type: ignore[operator]
            start = prev = y
        if start is not None:
            regions.append(Region(0, start, width, prev - start + 1))  # type: ignore[operator]
        return regions

    def _viewport(self, cx: int, cy: int) -> tuple[int, int]:
        """(left, top) of the visible part: a pane smaller than the screen follows the cursor, so a grid
        cell shows the prompt and the latest output rather than the first rows."""
        w, h = self.size.width, self.size.height
        cols, rows = self._emulator.cols, self._emulator.rows
        if self.pan_left is not None:
            left = max(0, min(self.pan_left, cols - w))
            top = 0 if rows <= h or cy < h or not self.follow_cursor else min(cy - h + 1, rows - h)
            return (left, max(top, 0))
        if not self.follow_cursor:
            return (0, 0)
        left = 0 if cols <= w or cx < w else min(cx - w + 1, cols - w)
        top = 0 if rows <= h or cy < h else min(cy - h + 1, rows - h)
        return (max(left, 0), max(top, 0))

    # --- rendering --- #

    def _style(self, key: Any) -> RichStyle:
        style = self._styles.get(key)
        if style is None:
            if isinstance(key, tuple) and key[:1] == (CURSOR,):
                style = self._style(key[1]) + self._cursor_style
            elif key is None or key is DEFAULT_STYLE:
                style = self._base
            else:
                style = self._base + _convert_style(key)
            self._styles[key] = style
        return style

    def _row_strip(self, y: int) -> Strip:
        """Row ``y`` as exactly the visible cells (viewport-cropped, cursor inline), cached until dirty."""
        strip = self._rows.get(y)
        if strip is None:
            width = self.size.width
            left = max(self._origin[0], 0)
            end = min(left + width, self._emulator.cols)
            cx, cy = self._cursor
            segments = [
                Segment(text.translate(_CONTROLS), self._style(key))
                for text, key in self._reader.runs(y, left, end, cx if cy == y else -1)
                if text
            ]
            used = end - left
            if used < width:
                segments.append(Segment(" " * (width - used), self._base))
            strip = Strip(segments, width)
            self._rows[y] = strip
        return strip

    def render_line(self, y: int) -> Strip:
        top = max(self._origin[1], 0)
        row = top + y
        if row >= self._emulator.rows:
            return Strip.blank(self.size.width, self._base)
        return self._row_strip(row)
