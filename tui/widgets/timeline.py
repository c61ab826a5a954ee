"""Timeline: a one-line, clickable scrub bar with step markers for the Replay screen.

Why its own widget: the bar is painted from three facts (position, duration, marker times) and a click
must become a *time*, not a cell; keeping that arithmetic here lets the screen deal only in seconds.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.events import Click
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget

from ..errors import Guarded


def fmt_time(t: float) -> str:
    t = max(0.0, t)
    h, rem = divmod(int(t), 3600)
    m, s = divmod(rem, 60)
    return f"{h}:{m:02d}:{s:02d}" if h else f"{m:02d}:{s:02d}"


class Timeline(Guarded, Widget):
    """``position``/``duration`` in cast seconds; ``markers`` are the times of step markers."""

    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")
    COMPONENT_CLASSES = {"timeline--played", "timeline--rest", "timeline--marker", "timeline--head"}

    position: reactive[float] = reactive(0.0)
    duration: reactive[float] = reactive(0.0)
    indexed: reactive[float] = reactive(1.0)  # fraction of the cast the keyframe index covers

    class Seek(Message):
        """The curator clicked the bar: seek to ``time``."""

        def __init__(self, time: float) -> None:
            super().__init__()
            self.time = time

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.markers: list[float] = []

    def set_markers(self, times: list[float]) -> None:
        self.markers = list(times)
        self.refresh()

    def _cell_of(self, t: float, width: int) -> int:
        if self.duration <= 0 or width <= 1:
            return 0
        return min(width - 1, max(0, round(t / self.duration * (width - 1))))

    def time_at(self, x: int) -> float:
        width = self.size.width
        if width <= 1 or self.duration <= 0:
            return 0.0
        return max(0.0, min(self.duration, x / (width - 1) * self.duration))

    def render(self) -> Text:
        width = max(self.size.width, 1)
        head = self._cell_of(self.position, width)
        played = self.get_component_rich_style("timeline--played", partial=True)
        rest = self.get_component_rich_style("timeline--rest", partial=True)
        marker = self.get_component_rich_style("timeline--marker", partial=True)
        head_style = self.get_component_rich_style("timeline--head", partial=True)
        ticks = {self._cell_of(t, width) for t in self.markers}
        text = Text(no_wrap=True, overflow="crop")
        for x in range(width):
            if x == head:
                text.append("●", head_style)
            elif x in ticks:
                text.append("┃", marker + (played if x < head else rest))
            else:
                text.append("━" if x < head else "─", played if x < head else rest)
        return text

    def watch_position(self) -> None:
        self.refresh()

    def watch_duration(self) -> None:
        self.refresh()

    def on_click(self, event: Click) -> None:
        event.stop()
        self.post_message(self.Seek(self.time_at(event.x)))
