"""Everything a terminal showed, as lines: the text the search index holds, and the frame each line is on.

A cast is replayed once through the terminal core (:class:`engine.sandbox.screen_text.TextScreen`, the
emulator Replay paints with) and every line that appeared on the screen is kept once per step, with the
first frame it is visible on:

- after every write, the lines on screen that were not there before (the line holding the cursor waits
  until it is finished, so a half-written ``192.0.2.`` is never kept beside the whole address);
- the lines that scrolled off during that write and were on screen at no frame boundary (a ``cat`` of 400
  lines in one read): their frame is *inside* that write, found again when Replay opens them
  (:func:`frame_of`);
- at every step marker and at the end, the whole screen, the cursor's line included: the screen at the
  step's end, which is what the policy was shown;
- the keys the policy typed (``i`` events), as their own lines.

A line that stays on screen across steps is kept at the step it appeared in; the same text appearing again
in a later step is kept again (a stuck ``>>>`` prompt is found at every step it came back). Text that was
cleared without scrolling (``clear``, a full-screen program) is kept too, since every frame is looked at.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass

from ..sandbox.asciicast import Cast, CastEvent
from ..sandbox.emulator import Screen
from ..sandbox.screen_text import TextScreen
from .replay import KeyframeIndex, apply_events, step_of_label
from .search_query import Matcher

#: Bump when what a transcript holds changes: every indexed episode is then indexed again.
TRANSCRIPT_VERSION = 1

SCREEN, INSIDE, TYPED, OUTPUT = "s", "x", "t", "o"
KINDS = {SCREEN: "screen", INSIDE: "scrolled", TYPED: "typed", OUTPUT: "output"}
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]|\x1b\[[0-9;?]*[ -/]*[@-~]|\x1bO.|\x1b.")
_SIZE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")


@dataclass(frozen=True, slots=True)
class Line:
    """One line a terminal showed (or a line of keys the policy typed).

    ``frame``: the screen after ``events[:frame]`` shows it — or, for ``kind == INSIDE``, it was visible
    only while ``events[frame]`` was being written (see :func:`frame_of`). ``time`` is that frame's cast
    time; ``step`` the step whose marker precedes it (None before the first marker, and in casts
    without step markers, such as the verifier's)."""

    text: str
    step: int | None
    time: float
    frame: int
    kind: str = SCREEN


def _new_lines(lines: list[str], before: Counter[str]) -> list[str]:
    """The occurrences in ``lines`` beyond those ``before`` counted, in screen order (a third traceback
    under two old ones is the bottom one)."""
    seen: Counter[str] = Counter()
    out = []
    for t in lines:
        seen[t] += 1
        if seen[t] > before[t]:
            out.append(t)
    return out


def _typed_lines(data: str) -> list[str]:
    return [t for part in re.split(r"[\r\n]+", data) if (t := _CONTROL.sub("", part).strip())]


class _Collector:
    """Keeps each new line once per (step, kind)."""

    def __init__(self) -> None:
        self.lines: list[Line] = []
        self.seen: set[tuple[int | None, str, str]] = set()

    def add(self, text: str, step: int | None, time: float, frame: int, kind: str) -> None:
        text = text.rstrip()
        if not text.strip():
            return
        key = (step, "t" if kind == TYPED else "s", text)
        if key in self.seen:
            return
        self.seen.add(key)
        self.lines.append(Line(text, step, round(time, 3), frame, kind))


def transcript(cast: Cast) -> list[Line]:
    """Every line the cast's terminal showed, once per step, with its first frame (see the module doc)."""
    screen = TextScreen(cast.cols, cast.rows)
    out = _Collector()
    prev: Counter[str] = Counter()
    step: int | None = None
    now = 0.0
    events = cast.events

    def capture(frame: int, at: float) -> None:
        """The whole screen (the cursor's line too) as the frame ``events[:frame]`` at time ``at``."""
        nonlocal prev
        lines = [t for t in screen.logical_lines() if t.strip()]
        for text in _new_lines(lines, prev):
            out.add(text, step, at, frame, SCREEN)
        prev = Counter(lines)

    for i, ev in enumerate(events):
        shown_since = now  # the time of the frame events[:i]
        now = max(now, ev.time)
        code = ev.code
        if code == "o" or code == "r":
            if code == "o":
                screen.feed(ev.data)
            else:
                m = _SIZE.match(ev.data)
                if not (m and int(m.group(1)) > 0 and int(m.group(2)) > 0):
                    continue
                screen.resize(int(m.group(1)), int(m.group(2)))
            before = prev
            scrolled = screen.take_scrolled()
            lines = [t for t in screen.logical_lines(settled=True) if t.strip()]
            settled = Counter(lines)
            if scrolled:
                # Lines that left during this write but were on screen before it were kept then; the rest
                # lived and died inside this one write.
                departed = before - settled
                for text in scrolled:
                    if departed[text] > 0:
                        departed[text] -= 1
                    else:
                        out.add(text, step, now, i, INSIDE)
            for text in _new_lines(lines, before):
                out.add(text, step, now, i + 1, SCREEN)
            prev = settled
        elif code == "m":
            capture(i, shown_since)  # the screen at the end of the step (what the policy saw)
            label_step = step_of_label(ev.data)
            if label_step is not None:
                step = label_step
        elif code == "i":
            for text in _typed_lines(ev.data):
                out.add(text, step, now, i + 1, TYPED)
    for text in screen.take_scrolled(force=True):
        out.add(text, step, now, len(events), INSIDE)
    capture(len(events), now)
    return out.lines


def output_transcript(text: str) -> list[Line]:
    """Lines of a recorded output without a cast (an imported episode's verifier output): no frames."""
    cast = Cast({"version": 2, "width": 160, "height": 40}, 2, [CastEvent(0.0, "o", text)])
    return [Line(li.text, None, 0.0, -1, OUTPUT) for li in transcript(cast)]


# --- finding the frame again -------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Frame:
    """A moment of a cast as Replay shows it: ``events[:event]`` applied, then the first ``chars``
    characters of ``events[event]`` (0: none — an ordinary frame)."""

    event: int
    chars: int
    time: float


def _visible(screen: Screen, text: str) -> bool:
    """Whether ``text`` (a logical line) is on the screen, wrapped over rows or not."""
    rows = screen.lines()
    if any(text in r for r in rows):
        return True
    joined = "".join(r.ljust(screen.cols) for r in rows)
    return text in joined


def frame_of(index: KeyframeIndex, line: Line) -> Frame | None:
    """The frame on which ``line`` is visible: its recorded frame, or inside the write that scrolled it
    away (the write is replayed newline by newline until the line is on screen). None when the cast no
    longer shows it there (a recording replaced since it was indexed)."""
    events = index.events
    if line.frame < 0:
        return None
    if line.kind != INSIDE:
        n = min(line.frame, len(events))
        return Frame(n, 0, index.time_of(n))
    k = line.frame
    if k >= len(events) or events[k].code != "o":
        return None
    screen = index.screen_at_index(k)
    data = events[k].data
    start = 0
    while start < len(data):
        cut = data.find("\n", start)
        end = len(data) if cut < 0 else cut + 1
        screen.feed(data[start:end])
        if _visible(screen, line.text):
            return Frame(k, end, index.times[k])
        start = end
    return None


def screen_at(index: KeyframeIndex, frame: Frame) -> Screen:
    """A new screen showing ``frame``."""
    screen = index.screen_at_index(frame.event)
    if frame.chars and frame.event < len(index.events):
        screen.feed(index.events[frame.event].data[: frame.chars])
    return screen


def find_frame(index: KeyframeIndex, text: str, start: int = 0) -> Frame | None:
    """The first frame at or after ``events[:start]`` that shows ``text`` (a fallback when a stored frame
    no longer fits the cast): scans write by write, then inside writes."""
    screen = index.screen_at_index(start)
    events = index.events
    for k in range(start, len(events)):
        if _visible(screen, text):
            return Frame(k, 0, index.time_of(k))
        ev = events[k]
        if ev.code == "o" and text[:8] in ev.data:  # it may show only while this write scrolls past
            found = frame_of(index, Line(text, None, 0.0, k, INSIDE))
            if found is not None:
                return found
        apply_events(screen, events, k, k + 1)
    return Frame(len(events), 0, index.duration) if _visible(screen, text) else None


def highlight_spans(screen: Screen, matcher: Matcher) -> list[tuple[int, int, int]]:
    """``[(row, first column, end column)]`` of the query's words on ``screen`` (columns count cells: a
    wide character takes two)."""
    out: list[tuple[int, int, int]] = []
    for y in range(screen.rows):
        cells = screen.row_cells(y)
        chars: list[str] = []
        cols: list[int] = []
        for x, (ch, _style) in enumerate(cells):
            for c in ch:
                chars.append(c)
                cols.append(x)
        text = "".join(chars)
        if not text.strip():
            continue
        for a, b in matcher.spans(text):
            if a < len(cols):
                end = cols[b - 1] + 1 if b - 1 < len(cols) else len(cells)
                out.append((y, cols[a], end))
    return out


def iter_matches(lines: list[Line], matcher: Matcher) -> Iterator[Line]:
    """The lines the whole query holds on; if none does (``a AND b`` printed on different lines), the
    lines holding any of its phrases."""
    found = False
    for li in lines:
        if matcher.matches(li.text):
            found = True
            yield li
    if not found:
        yield from (li for li in lines if matcher.touches(li.text))
