"""FeedPump: one thread that parses terminal output for every live pane.

Why: parsing is pure Python and holds the GIL. Measured with 8 panes at 100 KB/s each, parsing in the 8
publishing threads made the UI thread queue behind 8 runnable threads for the GIL: key-press-to-repaint
went from ~3 ms to a median of ~330 ms (p95 1.3 s). With one pump thread the UI competes with a single
thread, and bytes that arrive while the pump is busy are joined and parsed in one call (fewer, larger
feeds parse faster). Publishers only append to a list under a lock, so a terminal reader is never
slowed down by a pane.
"""

from __future__ import annotations

import contextlib
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

Callback = Callable[[], None]


class FeedPump:
    """Parses queued text into screens on its own daemon thread; calls each screen's callback after."""

    #: Longest text parsed in one go per screen, so one flooding pane cannot starve the others.
    SLICE = 256 * 1024
    #: Text parsed between voluntary GIL releases (about a millisecond of parsing).
    STEP = 4096
    #: Interpreter switch interval while the pump runs (Python's default is 5 ms).
    SWITCH_INTERVAL_S = 0.001

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: dict[int, tuple[Any, list[str], list[Callback]]] = {}
        self._thread: threading.Thread | None = None

    def submit(self, screen: Any, text: str, callback: Callback | None = None) -> None:
        """Queues ``text`` for ``screen`` (anything with ``feed(str)``). Safe from any thread."""
        with self._cond:
            entry = self._queue.get(id(screen))
            if entry is None:
                entry = self._queue[id(screen)] = (screen, [], [])
            entry[1].append(text)
            if callback is not None and callback not in entry[2]:
                entry[2].append(callback)
            if self._thread is None or not self._thread.is_alive():
                # A CPU-bound thread keeps the GIL for a whole switch interval whenever the UI thread
                # wants it back, and handling one key takes many such hand-overs: at the default 5 ms
                # that alone is tens of ms per key press. 1 ms keeps the UI snappy at a small
                # throughput cost. Process-wide, set once, never raised.
                if sys.getswitchinterval() > self.SWITCH_INTERVAL_S:
                    sys.setswitchinterval(self.SWITCH_INTERVAL_S)
                self._thread = threading.Thread(target=self._run, name="bandpass-feed-pump", daemon=True)
                self._thread.start()
            self._cond.notify()

    def pending(self) -> int:
        with self._cond:
            return sum(len(t) for _, texts, _ in self._queue.values() for t in texts)

    def drain(self, timeout: float = 5.0) -> bool:
        """Waits until everything queued so far is parsed (tests, benchmarks). True when drained."""
        done = threading.Event()
        marker = _Marker(done)
        self.submit(marker, "")
        return done.wait(timeout)

    def _run(self) -> None:
        while True:
            with self._cond:
                while not self._queue:
                    self._cond.wait()
                work = self._queue
                self._queue = {}
            for screen, texts, callbacks in work.values():
                text = "".join(texts)
                if len(text) > self.SLICE:  # parse the head now, requeue the tail behind the others
                    with self._cond:
                        entry = self._queue.setdefault(id(screen), (screen, [], []))
                        entry[1].insert(0, text[self.SLICE :])
                        entry[2].extend(c for c in callbacks if c not in entry[2])
                    text = text[: self.SLICE]
                try:
                    for i in range(0, max(len(text), 1), self.STEP):
                        screen.feed(text[i : i + self.STEP])
                        time.sleep(0)  # hand the GIL to the UI thread if it is waiting
                except Exception:  # noqa: BLE001 - one broken stream must not stop every pane
                    continue
                for cb in callbacks:
                    with contextlib.suppress(Exception):
                        cb()


class _Marker:
    def __init__(self, done: threading.Event) -> None:
        self.done = done

    def feed(self, _: str) -> None:
        self.done.set()


#: The process-wide pump every TerminalView and the live registry share.
pump = FeedPump()
