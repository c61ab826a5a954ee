"""VirtualTable: a read-only, sortable table that renders only the rows on screen (Line API).

Why not ``DataTable``: measured here, ``DataTable.add_rows`` of 10,000 rows takes ~1.9 s on the UI
thread and a re-filter (clear + add) ~1 s, so typing in the search box would freeze the app. This table
keeps rows as plain tuples of strings; filtering and sorting are list operations (milliseconds for 10k),
and painting costs only the visible rows, each cached as a ``Strip``.

Rows are given already formatted (strings); a per-column ``styler`` may colour a cell from its text
(e.g. the audit verdict), resolved through the theme-aware component classes.

Columns are chosen and sized by priority to fit the table's width (``fit_columns``): the columns that
matter (what a row is — its episode, its task — and an episode's outcome, reward, diagnosis, tags and
suggestion marker) stay on screen at 80, 100 and 160 terminal columns while the least important ones
shrink to their ``min_width`` and then drop out; a cell too long for its column is ``shorten``ed
(``agent_error:`` -> ``agent:``) before it is cut with an ellipsis (a ``keep_suffix`` marker survives
the cut). Rows keep every cell:
a hidden column comes back when the table is wide enough again, and sorting, filtering and keys are
unaffected.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.cells import cell_len, set_cell_size
from rich.segment import Segment
from rich.style import Style
from textual.binding import Binding
from textual.events import Click
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ..errors import Guarded


@dataclass
class Column:
    key: str
    label: str
    width: int
    align: str = "left"  # left | right
    #: Maps a cell's text to a component class name ("" for none): colour without losing theme support.
    styler: Callable[[str], str] | None = None
    #: Sort key for a cell's text (numbers sort as numbers, blanks last).
    sort_key: Callable[[str], Any] | None = None
    #: 0: always shown; higher numbers are dropped first when the table is too narrow.
    priority: int = 0
    #: The narrowest this column may get before it is dropped instead (None: its ``width``).
    min_width: int | None = None
    #: A shorter form of a cell's text, used when the text does not fit the column's width.
    shorten: Callable[[str], str] | None = None
    #: A marker a cell may end with that must survive a cut (the tag queue's ``?`` of a suggestion:
    #: cut, ``policy.failed_checks?`` would read as the tag itself): cut before it, keep it.
    keep_suffix: str = ""
    #: Grown back to its ``width`` before the other columns of its tier share what is left: a column
    #: whose cut loses meaning (an outcome code: ``agent:parse_err…``) while its neighbours' cuts do not.
    grow_first: bool = False

    @property
    def narrowest(self) -> int:
        return min(self.width, self.min_width) if self.min_width is not None else self.width


def fit_columns(
    columns: Sequence[Column], width: int, needs: dict[int, int] | None = None
) -> list[tuple[int, int]]:
    """``(index, width)`` of the columns to show in ``width`` cells (one space after each), in the
    columns' order. Tier by tier (``priority`` 0 first): the tier's columns go in at their ``narrowest``
    while they fit (priority 0 always), then the room left grows a ``grow_first`` column back to its
    ``width`` and the others toward theirs evenly, one cell each in turn — so a more important column is
    whole before a less important one appears, and columns of one tier share what is left. A table too
    narrow even for the priority-0 columns shows those, and scrolls sideways. ``needs``: the widest cell a
    ``grow_first`` column holds now (no wider than that: ``passed`` needs no room for a long code)."""
    tiers = sorted({c.priority for c in columns})
    chosen: dict[int, int] = {}
    used = 0
    for tier in tiers:
        members = [i for i, c in enumerate(columns) if c.priority == tier]
        for i in members:
            need = columns[i].narrowest + 1
            if tier == 0 or used + need <= width:
                chosen[i] = columns[i].narrowest
                used += need
        for i in members:
            if i in chosen and columns[i].grow_first:
                target = min(columns[i].width, (needs or {}).get(i, columns[i].width))
                extra = max(0, min(target - chosen[i], width - used))
                chosen[i] += extra
                used += extra
        growing = [i for i in members if i in chosen and chosen[i] < columns[i].width]
        while growing and used < width:
            for i in list(growing):
                if used >= width:
                    break
                chosen[i] += 1
                used += 1
                if chosen[i] >= columns[i].width:
                    growing.remove(i)
    return sorted(chosen.items())


def shorten_outcome(text: str) -> str:
    """``agent_error:verifier_tamper`` -> ``agent:verifier_tamper`` (``infra_error:`` -> ``infra:``)."""
    return text.replace("agent_error:", "agent:", 1).replace("infra_error:", "infra:", 1)


#: Cell texts that mean "no value": sorted after every value, whichever the direction.
BLANKS = frozenset({"", "—", "-"})


def numeric_key(text: str) -> tuple[int, float]:
    """Sorts numbers by value, any non-number after them."""
    try:
        return (0, float(text))
    except ValueError:
        return (1, 0.0)


class VirtualTable(Guarded, ScrollView, can_focus=True):
    """A table of ``rows`` (tuples of str) with a sticky header, a cursor row, and click-to-sort."""

    DEFAULT_CSS = (Path(__file__).with_suffix(".tcss")).read_text(encoding="utf-8")
    COMPONENT_CLASSES = {
        "virtual-table--header",
        "virtual-table--cursor",
        "virtual-table--odd",
        "virtual-table--good",
        "virtual-table--bad",
        "virtual-table--warn",
        "virtual-table--muted",
    }
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
        Binding("home", "jump(0)", "First", show=False),
        Binding("end", "jump(-1)", "Last", show=False),
        Binding("enter", "select", "Open", show=False),
    ]

    cursor_row: reactive[int] = reactive(0, always_update=True)

    class RowHighlighted(Message):
        def __init__(self, table: VirtualTable, key: Any) -> None:
            super().__init__()
            self.table = table
            self.key = key

    class RowSelected(Message):
        def __init__(self, table: VirtualTable, key: Any) -> None:
            super().__init__()
            self.table = table
            self.key = key

    def __init__(
        self,
        columns: Sequence[Column],
        *,
        id: str | None = None,
        classes: str | None = None,
    ) -> None:
        super().__init__(id=id, classes=classes)
        self._columns = list(columns)
        self._all: list[tuple[Any, tuple[str, ...]]] = []
        self._shown: list[tuple[Any, tuple[str, ...]]] = []
        self._predicate: Callable[[tuple[str, ...]], bool] | None = None
        self.sort_column: int | None = None
        self.sort_reverse = False
        self._cache: dict[tuple[Any, ...], Strip] = {}
        #: (column index, width) of the columns shown at the current width (``fit_columns``).
        self._layout: list[tuple[int, int]] = [(i, c.width) for i, c in enumerate(self.columns)]
        self._grow_needs: dict[int, int] = {}  # see _needs: computed when rows or columns change
        #: (width, column count, grow_first needs) it was fitted to
        self._layout_for: tuple[int, int, tuple[tuple[int, int], ...]] | None = None

    # --- data --- #

    @property
    def columns(self) -> list[Column]:
        return self._columns

    @columns.setter
    def columns(self, columns: Sequence[Column]) -> None:
        """Swaps the columns (the tag queue's two views share one table); the layout is fitted again."""
        self._columns = list(columns)
        self._layout = [(i, c.width) for i, c in enumerate(self._columns)]
        self._grow_needs = {}  # the rows still held are the other view's: set_rows measures again
        self._layout_for = None
        self._cache.clear()

    @property
    def row_count(self) -> int:
        return len(self._shown)

    @property
    def total_count(self) -> int:
        return len(self._all)

    @property
    def cursor_key(self) -> Any:
        if 0 <= self.cursor_row < len(self._shown):
            return self._shown[self.cursor_row][0]
        return None

    def shown_rows(self) -> list[tuple[str, ...]]:
        return [r for _, r in self._shown]

    def set_rows(self, rows: Sequence[tuple[Any, tuple[str, ...]]]) -> None:
        """Replaces all rows (``(key, cells)`` pairs), keeping the cursor on the same key when present."""
        key = self.cursor_key
        self._all = list(rows)
        self._grow_needs = self._needs()  # a grow_first column's room follows the widest cell it holds
        self._fit()
        self._apply(keep=key)

    def set_filter(self, predicate: Callable[[tuple[str, ...]], bool] | None) -> None:
        key = self.cursor_key
        self._predicate = predicate
        self._apply(keep=key)

    def sort_by(self, column: int, reverse: bool | None = None) -> None:
        """Sorts by ``column``; sorting the same column again flips the direction."""
        if reverse is None:
            reverse = not self.sort_reverse if self.sort_column == column else False
        self.sort_column, self.sort_reverse = column, reverse
        self._apply(keep=self.cursor_key)

    def _apply(self, keep: Any = None) -> None:
        rows = self._all if self._predicate is None else [r for r in self._all if self._predicate(r[1])]
        if self.sort_column is not None:
            col = self.columns[self.sort_column]
            i = self.sort_column
            key = col.sort_key or str.lower
            blank = [r for r in rows if r[1][i] in BLANKS]  # unknowns stay last in either direction
            rows = sorted(
                (r for r in rows if r[1][i] not in BLANKS),
                key=lambda r: key(r[1][i]),
                reverse=self.sort_reverse,
            )
            rows.extend(blank)
        self._shown = rows
        self._cache.clear()
        self.virtual_size = Size(self._width, len(rows) + 1)
        target = 0
        if keep is not None:
            for n, (k, _) in enumerate(rows):
                if k == keep:
                    target = n
                    break
        self.cursor_row = min(target, max(len(rows) - 1, 0))
        self.refresh()

    @property
    def _width(self) -> int:
        return sum(w + 1 for _, w in self._layout)

    @property
    def shown_columns(self) -> list[Column]:
        """The columns on screen now, in order (the others did not fit: see ``fit_columns``)."""
        return [self.columns[i] for i, _ in self._layout]

    def _needs(self) -> dict[int, int]:
        """The widest cell of each ``grow_first`` column among all rows, in its short form where it has
        one (``agent:turn_limit`` names the code as well as ``agent_error:turn_limit``, and leaves the
        task its room), and never narrower than its header."""
        out: dict[int, int] = {}
        for i, c in enumerate(self.columns):
            if c.grow_first:
                cells = {r[1][i] for r in self._all}
                out[i] = max(
                    [cell_len(c.label)] + [cell_len(x if c.shorten is None else c.shorten(x)) for x in cells]
                )
        return out

    def _fit(self) -> None:
        """Chooses the columns for the current width (cheap; redone when the width or columns change)."""
        avail = max(self.scrollable_content_region.width, 1) if self.is_mounted else 0
        needs = self._grow_needs
        key = (avail, len(self._columns), tuple(sorted(needs.items())))
        if key == self._layout_for:
            return
        self._layout_for = key
        self._layout = (
            fit_columns(self.columns, avail, needs)
            if avail > 1
            else [(i, c.width) for i, c in enumerate(self.columns)]
        )
        self._cache.clear()
        self.virtual_size = Size(self._width, len(self._shown) + 1)

    # --- cursor --- #

    def watch_cursor_row(self, old: int, new: int) -> None:
        self._scroll_cursor_into_view()
        self.refresh()
        self.post_message(self.RowHighlighted(self, self.cursor_key))

    def _scroll_cursor_into_view(self) -> None:
        body = max(self.size.height - 1, 1)
        top = int(self.scroll_offset.y)
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + body:
            self.scroll_to(y=self.cursor_row - body + 1, animate=False)

    def action_cursor(self, delta: int) -> None:
        if self._shown:
            self.cursor_row = max(0, min(len(self._shown) - 1, self.cursor_row + delta))

    def action_page(self, direction: int) -> None:
        self.action_cursor(direction * max(self.size.height - 2, 1))

    def action_jump(self, where: int) -> None:
        if self._shown:
            self.cursor_row = len(self._shown) - 1 if where < 0 else 0

    def action_select(self) -> None:
        if self.cursor_key is not None:
            self.post_message(self.RowSelected(self, self.cursor_key))

    def on_click(self, event: Click) -> None:
        x = event.x + int(self.scroll_offset.x)
        if event.y == 0:
            edge = 0
            for i, width in self._layout:
                edge += width + 1
                if x < edge:
                    self.sort_by(i)
                    return
            return
        row = int(self.scroll_offset.y) + event.y - 1
        if 0 <= row < len(self._shown):
            if row == self.cursor_row and event.chain >= 2:
                self.action_select()
            self.cursor_row = row

    # --- rendering --- #

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    def _cell(self, text: str, col: Column, w: int | None = None) -> str:
        w = col.width if w is None else w
        if text.isascii() and len(text) <= w:
            return text.rjust(w) if col.align == "right" else text.ljust(w)
        if col.shorten is not None and cell_len(text) > w:
            text = col.shorten(text)
            if text.isascii() and len(text) <= w:
                return text.rjust(w) if col.align == "right" else text.ljust(w)
        if cell_len(text) > w:
            suffix = col.keep_suffix if col.keep_suffix and text.endswith(col.keep_suffix) else ""
            body = text[: len(text) - len(suffix)]
            return set_cell_size(body, w - 1 - cell_len(suffix)) + "…" + suffix
        pad = " " * (w - cell_len(text))
        return pad + text if col.align == "right" else text + pad

    def render_line(self, y: int) -> Strip:
        self._fit()
        scroll_x, scroll_y = int(self.scroll_offset.x), int(self.scroll_offset.y)
        width = self.size.width
        base = self.rich_style
        if y == 0:
            key: tuple[Any, ...] = ("header", self.sort_column, self.sort_reverse, scroll_x, width)
            strip = self._cache.get(key)
            if strip is None:
                style = base + self.get_component_rich_style("virtual-table--header")
                labels = []
                for i, w in self._layout:
                    c = self.columns[i]
                    mark = ("▼" if self.sort_reverse else "▲") if i == self.sort_column else ""
                    labels.append(self._cell(c.label + mark, c, w))
                strip = Strip([Segment(" ".join(labels) + " ", style)]).crop_extend(
                    scroll_x, scroll_x + width, style
                )
                self._cache[key] = strip
            return strip
        row = scroll_y + y - 1
        if row >= len(self._shown):
            return Strip.blank(width, base)
        is_cursor = row == self.cursor_row
        key = ("row", row, is_cursor, self.has_focus, scroll_x, width)
        strip = self._cache.get(key)
        if strip is None:
            row_style = base
            if row % 2:
                row_style += self.get_component_rich_style("virtual-table--odd")
            if is_cursor:
                row_style += self.get_component_rich_style("virtual-table--cursor")
            segments: list[Segment] = []
            cells = self._shown[row][1]
            for i, w in self._layout:
                col = self.columns[i]
                text = cells[i] if i < len(cells) else ""
                style = row_style
                if col.styler is not None and not is_cursor:
                    cls = col.styler(text)
                    if cls:
                        style = row_style + self._fg(cls)
                segments.append(Segment(self._cell(text, col, w), style))
                segments.append(Segment(" ", row_style))
            strip = Strip(segments).crop_extend(scroll_x, scroll_x + width, row_style)
            if len(self._cache) > 4096:
                self._cache.clear()
            self._cache[key] = strip
        return strip

    def _fg(self, component: str) -> Style:
        """Only the foreground of a status component: the row's background (zebra, cursor) stays."""
        style = self.get_component_rich_style(component)
        return Style(color=style.color, bold=style.bold)

    def on_focus(self) -> None:
        self._cache.clear()
        self.refresh()

    def on_blur(self) -> None:
        self._cache.clear()
        self.refresh()

    def on_resize(self) -> None:
        self._cache.clear()
        self._fit()
        self._scroll_cursor_into_view()
