"""TerminalView: a Line-API widget that paints an :class:`engine.sandbox.emulator.Screen`.

Why a Line-API widget and not a ``Static`` re-rendered with a Rich ``Text``: a live pane receives output
many times a second, and most of it touches one or two rows (a prompt, a progress bar). A Line-API widget
lets Textual ask for exactly the rows we invalidate (region refreshes), and we keep a ready-made
:class:`~textual.strip.Strip` per visible row, keyed by the row's version in the emulator, so an
unchanged row costs nothing and a changed row is decoded once.

Threading model: output is parsed on the shared feed-pump thread (``feed_pump``), and the *frame* (sync
the native screen, decode the visible rows that changed, build their strips) is built on the shared
frame-clock thread (``frame_clock``) at most ``max_fps`` times a second per pane. The UI thread only
receives a finished frame, swaps the strips in and refreshes the changed lines; ``render_line`` returns a
cached strip. Measured: bench/bench_panes.py (docs/guide/tui.md). A pane that is not visible (another screen
is shown, it is scrolled away or hidden) builds no frames at all; it is marked behind and catches up
with one frame when it is shown again. Changes made on the UI thread itself (replay playback, a seek, a
pan) are painted on the UI thread at the next frame, so what a replay shows never waits on a thread.

Safety: the emulator parses and drops OSC 52 (clipboard), OSC 0/2 (title), OSC 8 (hyperlinks) and device
queries; this widget additionally never turns a cell's hyperlink into a Rich link and replaces any C0/C1
control character left in a cell, so nothing a task prints can reach the curator's real terminal.

API (kept stable: the replay screen uses it too): ``feed(text)``, ``set_screen(screen)``, ``emulator``,
``request_paint()``, ``max_fps``, ``follow_cursor``, ``show_cursor``, ``paint_count``, ``last_paint_at``,
``pan(delta)``, ``pan_left``, ``hidden_columns()``, ``set_highlights(spans)`` and ``highlights`` (search
matches: marked until their rows change or another screen is set), ``up_to_date()``, ``frames_built``.
"""

from __future__ import annotations

import itertools
import threading
import time
from dataclasses import dataclass, field
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

from ...engine.app.terminal import DEFAULT_STYLE, CellStyle, Screen
from .feed_pump import pump
from .frame_clock import clock
from .threadsafe import UiCaller

#: C0 and C1 controls (and DEL) must never reach the real terminal through a cell's text.
_CONTROLS = {c: "\N{REPLACEMENT CHARACTER}" for c in (*range(0x00, 0x20), *range(0x7F, 0xA0))}

CURSOR = "cursor"

_geometry_ids = itertools.count(1)
_frame_ids = itertools.count(1)


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


@dataclass(frozen=True, eq=False)
class _Geometry:
    """What a frame depends on besides the screen: set on the UI thread, read by the frame thread. A new
    object (new ``gen``) whenever any of it changes, so frames built for an old one are dropped."""

    gen: int
    width: int
    height: int
    pan_left: int | None
    follow_cursor: bool
    show_cursor: bool
    base: RichStyle
    cursor_style: RichStyle
    match_style: RichStyle
    #: cell style key -> Rich style with the base applied (filled as rows are built)
    styles: dict[Any, RichStyle] = field(default_factory=dict)

    def style(self, key: Any) -> RichStyle:
        style = self.styles.get(key)
        if style is None:
            if isinstance(key, tuple) and key[:1] == (CURSOR,):
                style = self.style(key[1]) + self.cursor_style
            elif key is None or key is DEFAULT_STYLE:
                style = self.base
            else:
                style = self.base + _convert_style(key)
            self.styles[key] = style
        return style


#: What a row's strip was built for: (row version, cursor column, first column, end column, marks).
RowKey = tuple[int, int, int, int, tuple[tuple[int, int], ...]]


@dataclass(eq=False)
class _Frame:
    """A finished frame: strips of the visible rows that changed, keyed by emulator row."""

    seq: int
    screen: Screen
    geometry: _Geometry
    origin: tuple[int, int]
    strips: dict[int, tuple[RowKey, Strip]]
    versions: list[int]  # every row's version when the frame was built


def _marked(strip: Strip, marks: tuple[tuple[int, int], ...], left: int, style: RichStyle) -> Strip:
    """``strip`` (columns from ``left``) with the cells of each ``(first, end)`` mark in ``style``, on top
    of the cell's own colours."""
    width = strip.cell_length
    cuts = sorted({min(max(c - left, 0), width) for a, b in marks for c in (a, b)} | {width})
    parts, start = [], 0
    for part, end in zip(strip.divide(cuts), cuts, strict=False):
        inside = any(a <= start + left and end + left <= b for a, b in marks) and end > start
        if inside:  # post_style: over the cell's colours (apply_style would put it underneath)
            part = Strip(Segment.apply_style(part, post_style=style), part.cell_length)
        parts.append(part)
        start = end
    return Strip.join(parts)


def viewport(geom: _Geometry, cols: int, rows: int, cx: int, cy: int) -> tuple[int, int]:
    """(left, top) of the visible part: a pane smaller than the screen follows the cursor, so a grid
    cell shows the prompt and the latest output rather than the first rows."""
    w, h = geom.width, geom.height
    if geom.pan_left is not None:
        left = max(0, min(geom.pan_left, cols - w))
        top = 0 if rows <= h or cy < h or not geom.follow_cursor else min(cy - h + 1, rows - h)
        return (left, max(top, 0))
    if not geom.follow_cursor:
        return (0, 0)
    left = 0 if cols <= w or cx < w else min(cx - w + 1, cols - w)
    top = 0 if rows <= h or cy < h else min(cy - h + 1, rows - h)
    return (max(left, 0), max(top, 0))


class TerminalView(Widget, can_focus=True):
    """Paints an emulated terminal screen; repaints only changed rows, at most ``max_fps`` a second."""

    DEFAULT_CSS = (Path(__file__).with_suffix(".tcss")).read_text(encoding="utf-8")
    COMPONENT_CLASSES = {"terminal-view--cursor", "terminal-view--match"}
    ALLOW_MAXIMIZE = True
    #: Lines per second that all panes busy at once share (see ``_frame_interval``): what the UI thread's
    #: share of a repaint (Textual compositing the changed lines) is proportional to.
    LINE_BUDGET = 3000.0
    #: However many panes are busy, each repaints at least this often.
    MIN_FPS = 12.0
    #: id(view) -> (time of its last paint, lines it shows), across all views: who is busy right now.
    _busy: ClassVar[dict[int, tuple[float, int]]] = {}

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
        id: str | None = None,  # Textual's keyword
        classes: str | None = None,
    ) -> None:
        super().__init__(name=name, id=id, classes=classes)
        self._emulator = screen if screen is not None else Screen(cols, rows)
        self.max_fps = max_fps
        self._follow_cursor = follow_cursor
        self._show_cursor = show_cursor
        #: Left column fixed by the viewer (replay panning a wide recording); None follows the cursor.
        self._pan_left: int | None = None
        self._base: RichStyle = RichStyle()
        self._cursor_style: RichStyle = RichStyle(reverse=True)
        self._match_style: RichStyle = RichStyle(reverse=True, bold=True)
        #: Search matches to mark: emulator row -> [(first column, end column)] (see set_highlights).
        self.highlights: dict[int, list[tuple[int, int]]] = {}
        self._marks_at: dict[int, int] = {}  # row -> its version when marked: a mark lasts while it holds
        self._geom: _Geometry | None = None  # None until the widget has a size
        self._caller: UiCaller | None = None  # set on mount: hands frames to the UI thread
        #: emulator row -> (key it was built for, strip); see RowKey
        self._strips: dict[int, tuple[RowKey, Strip]] = {}
        self._strips_gen = 0  # the geometry the strips were built for
        self._origin: tuple[int, int] = (0, 0)  # (left column, top row) of the viewport
        self._presented = 0  # seq of the last frame presented
        self._pending = False  # a UI-thread paint is scheduled
        self._pending_lock = threading.Lock()
        self._timer: Timer | None = None
        self._last_flush = 0.0
        self._last_frame = 0.0  # when the frame thread last rendered this pane
        self._focused = False
        #: False while the pane is not on the screen the curator sees: no frames are built then.
        self._visible = True
        #: A frame was skipped while not visible: catch up when shown.
        self._behind = False
        self._skipped = 0  # seq at the last skipped frame
        self._mounted = False
        #: Number of frames that repainted something: benchmarks and tests read it.
        self.paint_count = 0
        #: Number of frames built (on any thread), painted or not: what hidden panes must not spend.
        self.frames_built = 0
        #: ``time.perf_counter()`` of the last frame that repainted something.
        self.last_paint_at = 0.0

    def compose(self) -> ComposeResult:
        yield from ()

    # --- public API --- #

    @property
    def emulator(self) -> Screen:
        """The screen being shown (named so as not to shadow ``Widget.screen``)."""
        return self._emulator

    @property
    def follow_cursor(self) -> bool:
        return self._follow_cursor

    @follow_cursor.setter
    def follow_cursor(self, value: bool) -> None:
        self._follow_cursor = value
        self._geometry_changed()

    @property
    def show_cursor(self) -> bool:
        return self._show_cursor

    @show_cursor.setter
    def show_cursor(self, value: bool) -> None:
        self._show_cursor = value
        self._geometry_changed()

    @property
    def pan_left(self) -> int | None:
        return self._pan_left

    @pan_left.setter
    def pan_left(self, value: int | None) -> None:
        self._pan_left = value
        self._geometry_changed()

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
        """Shows another screen (replay swaps restored keyframes in). Call on the UI thread; the next
        paint decodes only the rows that are visible. Marks (set_highlights) are dropped."""
        self._emulator = screen
        self.highlights, self._marks_at = {}, {}
        self._geometry_changed()

    def set_highlights(self, spans: list[tuple[int, int, int]]) -> None:
        """Marks ``[(row, first column, end column)]`` of the current screen (search matches). A mark
        lasts until its row changes (playback moves on) or another screen is set. Call on the UI thread,
        after ``set_screen`` when both change."""
        marks: dict[int, list[tuple[int, int]]] = {}
        for y, a, b in spans:
            marks.setdefault(y, []).append((a, b))
        versions = self._emulator.row_versions()
        self.highlights = marks
        self._marks_at = {y: versions[y] for y in marks if 0 <= y < len(versions)}
        self.request_paint()

    def hidden_columns(self) -> tuple[int, int, int]:
        """(first visible column, last visible column, screen columns), 1-based: a viewer says when a
        wide recording does not fit instead of cutting it silently."""
        left = max(self._origin[0], 0)
        return (left + 1, min(left + self.size.width, self._emulator.cols), self._emulator.cols)

    def pan(self, delta: int) -> None:
        """Moves the viewport ``delta`` columns sideways (fixing it: it no longer follows the cursor)."""
        w, cols = self.size.width, self._emulator.cols
        start = self._origin[0] if self._pan_left is None else self._pan_left
        self.pan_left = max(0, min(max(start, 0) + delta, max(cols - w, 0)))

    def request_paint(self) -> None:
        """Asks for a repaint of whatever changed. Safe from any thread; coalesced to one per frame.

        From the UI thread the frame is built there, at the next frame time; from any other thread it is
        built on the frame-clock thread and only handed to the UI thread finished."""
        caller = self._caller
        if caller is None:
            return  # not mounted yet: mounting paints
        if threading.get_ident() == caller.thread:
            with self._pending_lock:
                if self._pending:
                    return
                self._pending = True
            self._wake()
        else:
            clock.request(self)

    # --- geometry --- #

    def _geometry_changed(self) -> None:
        """Something a frame depends on changed (size, styles, screen, pan): publish a new geometry for
        the frame thread, drop the strips, repaint everything. UI thread."""
        if not self._mounted:
            return
        w, h = self.size.width, self.size.height
        self._geom = (
            _Geometry(
                next(_geometry_ids),
                w,
                h,
                self._pan_left,
                self._follow_cursor,
                self._show_cursor,
                self._base,
                self._cursor_style,
                self._match_style,
            )
            if w > 0 and h > 0
            else None
        )
        self._strips = {}
        self._origin = (-1, -1)
        self._behind = True  # the next render_line builds a frame here, at once
        self.refresh()

    def _is_visible(self) -> bool:
        """On the screen the curator sees right now (UI thread)."""
        if not self.is_attached or not self.display:
            return False
        try:
            screen = self.screen
            if not screen.is_current:
                return False
            stack = self.app.screen_stack
            if any(above.styles.background.a == 1 for above in stack[stack.index(screen) + 1 :]):
                return False  # an opaque screen covers this one (a modal over it leaves it visible)
            return self in screen._compositor.visible_widgets
        except Exception:  # noqa: BLE001 - Textual internals moved: assume visible (paint, never hide)
            return True

    def _check_visible(self, *_: Any) -> None:
        """Re-evaluates visibility after the layout or the current screen changed (UI thread)."""
        visible = self._is_visible()
        self._visible = visible
        if visible and self._behind:
            self._behind = False
            self.request_paint()

    # --- frame scheduling --- #

    def _frame_interval(self) -> float:
        """Seconds between paints: ``1/max_fps``, stretched when many lines are busy at once.

        All busy panes repaint at one rate such that together they refresh at most :attr:`LINE_BUDGET`
        lines a second (the focused pane is exempt), so a wall of scrolling panes costs the UI thread a
        bounded amount whatever their number and size, and a key press is not queued behind it: sixteen
        14-line thumbnails and eight 29-line panes both repaint ~13 times a second. Each pane still
        repaints at least :attr:`MIN_FPS` times a second.
        """
        fps = max(self.max_fps, 1.0)
        if not self._focused:
            now = time.perf_counter()
            lines = sum(h for t, h in list(TerminalView._busy.values()) if now - t < 0.5)
            if lines:
                fps = min(fps, max(self.LINE_BUDGET / lines, self.MIN_FPS))
        return 1.0 / fps

    def next_frame_at(self) -> float:
        return max(self._last_frame, self._last_flush) + self._frame_interval()

    def render_frame(self) -> None:
        """The frame clock's turn (its thread): build the frame and hand it to the UI thread."""
        caller = self._caller
        if caller is None or not self._mounted:
            return
        if not self._visible:
            self._skipped = next(_frame_ids)  # frames built before this no longer cover everything
            self._behind = True  # shown again later: _check_visible or render_line catch up
            return
        self._last_frame = time.perf_counter()
        frame = self._build_frame()
        if frame is not None and (frame.strips or frame.origin != self._origin):
            caller.call(self._present, frame)

    def _wake(self) -> None:
        if not self.is_attached:
            with self._pending_lock:
                self._pending = False
            return
        if self._timer is not None:
            return
        delay = max(self._last_flush, self._last_frame) + self._frame_interval() - time.perf_counter()
        if delay <= 0:
            self._flush()
        else:
            self._timer = self.set_timer(delay, self._flush)

    def _flush(self) -> None:
        """A frame built and presented on the UI thread (changes made there: replay, pan)."""
        self._timer = None
        with self._pending_lock:
            self._pending = False
        self._last_flush = time.perf_counter()
        frame = self._build_frame()
        if frame is not None:
            self._present(frame)

    # --- building (any thread) and presenting (UI thread) --- #

    def _plan(
        self, geom: _Geometry, have: dict[int, Any]
    ) -> tuple[tuple[int, int], int, list[tuple[int, RowKey, int]], list[int]]:
        """(origin, last column, rows to build as (row, key, cursor column), every row's version): the
        visible rows whose key (version, cursor column, viewport columns, marks) differs from the strip in
        ``have``. Caller holds the screen's lock."""
        emu = self._emulator
        versions = emu.row_versions()
        highlights, marks_at = self.highlights, self._marks_at
        cx, cy = emu.cursor()
        cursor_on = geom.show_cursor and emu.cursor_visible()
        cols, rows = emu.cols, emu.rows
        left, top = viewport(geom, cols, rows, cx, cy)
        end = min(left + geom.width, cols)
        todo: list[tuple[int, RowKey, int]] = []
        for y in range(top, min(top + geom.height, rows)):
            mark = cx if cursor_on and cy == y else -1
            marks = tuple(highlights.get(y, ())) if marks_at.get(y) == versions[y] else ()
            key = (versions[y], mark, left, end, marks)
            got = have.get(y)
            if got is None or got[0] != key:
                todo.append((y, key, mark))
        return (left, top), end, todo, versions

    def _build_frame(self) -> _Frame | None:
        """Strips for the visible rows whose content, cursor or viewport changed since they were built."""
        geom = self._geom
        if geom is None:
            return None
        seq = next(_frame_ids)
        self.frames_built += 1
        emu = self._emulator
        have = self._strips if self._strips_gen == geom.gen else {}
        with emu.lock:
            origin, end, todo, versions = self._plan(geom, have)
            left = origin[0]
            runs = emu.styled_runs_many([(y, mark) for y, _, mark in todo], left, end) if todo else []
        strips = {}
        width = geom.width
        style = geom.style
        used = end - left
        pad = [Segment(" " * (width - used), geom.base)] if used < width else []
        for (y, key, _), row_runs in zip(todo, runs, strict=True):
            segments = [Segment(text.translate(_CONTROLS), style(k)) for text, k in row_runs if text]
            strip = Strip(segments + pad if pad else segments, width)
            if key[4]:
                strip = _marked(strip, key[4], left, geom.match_style)
            strips[y] = (key, strip)
        return _Frame(seq, emu, geom, origin, strips, versions)

    def up_to_date(self) -> bool:
        """Whether the painted strips show the screen's current state (UI thread): tests and benchmarks
        wait on it instead of on time."""
        geom = self._geom
        if geom is None or self._strips_gen != geom.gen or self._behind:
            return False
        with self._emulator.lock:
            origin, _, todo, _ = self._plan(geom, self._strips)
        return origin == self._origin and not todo

    def _present(self, frame: _Frame) -> None:
        """Swaps a finished frame's strips in and refreshes their lines (UI thread)."""
        if frame.screen is not self._emulator or frame.geometry is not self._geom:
            if self._geom is not None:
                self.request_paint()  # built for a screen or size that is gone: build again
            return
        if frame.seq < self._presented:
            return  # an older frame finished after a newer one
        self._presented = frame.seq
        if self._strips_gen != frame.geometry.gen:
            self._strips, self._strips_gen = {}, frame.geometry.gen
        self._strips.update(frame.strips)
        if frame.seq > self._skipped:
            self._behind = False  # every visible row is current for this geometry now
        if self._marks_at:  # a mark lasts while its row does: rows that changed lose theirs
            versions = frame.versions
            # versions only grow: a frame built before the marks were set (older versions) drops none
            kept = {y: v for y, v in self._marks_at.items() if y < len(versions) and versions[y] <= v}
            if len(kept) != len(self._marks_at):
                self._marks_at = kept
                self.highlights = {y: m for y, m in self.highlights.items() if y in kept}
        left, top = frame.origin
        if frame.origin != self._origin:
            self._origin = frame.origin
            self.refresh()
            height = frame.geometry.height
            if len(self._strips) > 2 * height:  # rows scrolled out of the viewport: drop their strips
                self._strips = {y: s for y, s in self._strips.items() if top <= y < top + height}
        elif frame.strips:
            self.refresh(*self._line_regions(frame.strips, top))
        else:
            return
        now = time.perf_counter()
        self.paint_count += 1
        self.last_paint_at = now
        TerminalView._busy[id(self)] = (now, frame.geometry.height)
        if not self._is_visible():
            self._visible = False

    def _line_regions(self, rows: Any, top: int) -> list[Region]:
        """Widget-relative regions covering the visible ``rows``, consecutive rows merged."""
        width, height = self.size.width, self.size.height
        regions: list[Region] = []
        start = prev = None
        for y in sorted(r - top for r in rows if top <= r < top + height):
            if prev is not None and y == prev + 1:
                prev = y
                continue
            if start is not None:
                regions.append(Region(0, start, width, prev - start + 1))
            start = prev = y
        if start is not None:
            regions.append(Region(0, start, width, prev - start + 1))
        return regions

    # --- Textual events --- #

    def on_mount(self) -> None:
        self._caller = UiCaller()
        self._mounted = True
        self._update_base_styles(force=True)
        # Visibility changes without an event to this widget when another screen is shown or the grid
        # scrolls: both signals fire then, and a pane that fell behind catches up.
        self.app.screen_change_signal.subscribe(self, lambda _: self.call_after_refresh(self._check_visible))
        self.screen.screen_layout_refresh_signal.subscribe(self, self._check_visible)

    def on_resize(self, _: Resize) -> None:
        self._geometry_changed()

    def on_focus(self) -> None:
        self._focused = True

    def on_blur(self) -> None:
        self._focused = False

    def on_show(self) -> None:
        self._check_visible()

    def on_hide(self) -> None:
        self._visible = False

    def on_unmount(self) -> None:
        self._mounted = False
        TerminalView._busy.pop(id(self), None)

    def notify_style_update(self) -> None:
        super().notify_style_update()
        if self.is_mounted:
            self._update_base_styles()

    def _update_base_styles(self, *, force: bool = False) -> None:
        """Default colours come from CSS (so the theme switch applies); cell styles are cached on top."""
        base = self.rich_style
        base = RichStyle(color=base.color, bgcolor=base.bgcolor)
        cursor = self.get_component_rich_style("terminal-view--cursor", partial=True)
        match = self.get_component_rich_style("terminal-view--match", partial=True)
        if force or base != self._base or cursor != self._cursor_style or match != self._match_style:
            self._base, self._cursor_style, self._match_style = base, cursor, match
            self._geometry_changed()

    # --- rendering (UI thread) --- #

    def _plain(self) -> bool:
        """No border, padding, outline, tint, hatch or opacity: the strips we build are exactly the lines
        Textual would produce, so ``render_lines`` can hand them over as they are."""
        st = self.styles
        return (
            not st.gutter
            and not any(
                side[0] for side in (st.outline_top, st.outline_right, st.outline_bottom, st.outline_left)
            )
            and not st.tint.a
            and not (st.has_rule("hatch") and st.hatch != "none")
            and st.text_opacity == 1.0
            and self.opacity == 1.0
        )

    def render_lines(self, crop: Region) -> list[Strip]:
        """Textual's per-line styling pass (padding, borders, tint: a new Strip per line) is skipped when
        the widget has none of it, so a repaint costs the UI thread a dict lookup per changed line; the
        app's line filters are still applied. With a border (the verifier's pane) Textual does it all."""
        if not self._plain():
            return super().render_lines(crop)
        strips = [self.render_line(y) for y in crop.line_range]
        filters = self.get_line_filters()
        if filters:
            background = self.background_colors[1]
            for f in filters:
                strips = [strip.apply_filter(f, background) for strip in strips]
        x1, x2 = crop.column_span
        if (x1, x2) != (0, self.size.width):
            strips = [strip.crop(x1, x2) for strip in strips]
        return strips

    def render_line(self, y: int) -> Strip:
        geom = self._geom
        if geom is None:
            return Strip.blank(self.size.width, self._base)
        self._visible = True  # Textual asks for our lines: we are on screen
        if self._behind or self._strips_gen != geom.gen:
            # First paint, a new screen or size, or shown again after frames were skipped: build here,
            # now, so what appears is never an older frame.
            self._behind = False
            frame = self._build_frame()
            if frame is not None:
                self._present(frame)
        top = max(self._origin[1], 0)
        row = top + y
        if row >= self._emulator.rows:
            return Strip.blank(geom.width, geom.base)
        got = self._strips.get(row)
        if got is None:
            return Strip.blank(geom.width, geom.base)
        return got[1]
