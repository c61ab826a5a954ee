"""FrameClock: one thread that prepares the frames of every live terminal pane, off the UI thread.

Why: turning an emulated screen into what Textual paints (syncing the native screen, decoding the rows
that changed, building a :class:`~textual.strip.Strip` per row) was measured at 76% of the UI thread's
time with 16 panes at 100 KB/s each, and a key press queued behind it for seconds (issue 31). Here a
pane asks for a frame from any thread (``request``); the clock waits until that pane is due (its own
frame interval since its last frame), lets the pane build the frame on this thread, and hands the
finished frame to the UI thread, which only swaps strips in and refreshes the changed lines.

One thread for all panes, not one per pane: the work is Python (it holds the GIL), so more threads
would only queue for it, and the UI thread competes with one runnable thread instead of sixteen. A pane
that is not visible builds nothing (see ``TerminalView``); the clock then only remembers that it is
behind.
"""

from __future__ import annotations

import contextlib
import threading
import time
from typing import Any, Protocol


class Framed(Protocol):
    def next_frame_at(self) -> float:
        """``time.perf_counter()`` at which the pane may render again."""
        ...

    def render_frame(self) -> None:
        """Builds and hands over one frame (called on the clock's thread)."""
        ...


class FrameClock:
    """Schedules ``render_frame`` calls, at most one pending per pane, each at its due time."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._due: dict[Any, float] = {}
        self._thread: threading.Thread | None = None
        self.frames = 0  # frames rendered: benchmarks read it

    def request(self, pane: Framed, at: float | None = None) -> None:
        """Asks for a frame of ``pane`` at its next due time (or ``at``). Safe from any thread; a pane
        already waiting keeps its place."""
        due = pane.next_frame_at() if at is None else at
        with self._cond:
            if pane in self._due:
                return
            self._due[pane] = due
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._run, name="bandpass-frames", daemon=True)
                self._thread.start()
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return len(self._due)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._due:
                    self._cond.wait()
                now = time.perf_counter()
                first = min(self._due.values())
                if first > now:
                    self._cond.wait(first - now)
                    continue
                ready = [p for p, t in self._due.items() if t <= now]
                for p in ready:
                    del self._due[p]
            for pane in sorted(ready, key=id):
                with contextlib.suppress(Exception):  # one broken pane must not stop every other pane
                    pane.render_frame()
                self.frames += 1
                time.sleep(0)  # hand the GIL to the UI thread between panes if it is waiting


#: The process-wide clock every TerminalView shares.
clock = FrameClock()
