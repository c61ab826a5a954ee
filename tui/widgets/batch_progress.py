"""BatchProgressBar: the Runs screen's progress bar, still while nothing moves.

Why not Textual's ``ProgressBar`` as is: it re-reads its ETA once a second for as long as it is mounted,
and with no total its bar animates 15 times a second — hidden or not. Runs mounts its bar hidden and
shows it when a batch reports progress, so an app that never ran a batch paid for both all day (bench
``bench/bench_idle.py``). This bar shows no ETA, so that clock has nothing to do and never runs; and it
starts with a total (it stays hidden until the first progress sets the batch's own), so it never animates.
What it shows is unchanged: the bar and the percentage.
"""

from __future__ import annotations

from textual.timer import Timer, TimerCallback
from textual.widgets import ProgressBar


class BatchProgressBar(ProgressBar):
    def __init__(self, *, id: str | None = None) -> None:
        self._still_timers: list[Timer] = []
        super().__init__(total=1, show_eta=False, id=id)

    def set_interval(
        self,
        interval: float,
        callback: TimerCallback | None = None,
        *,
        name: str | None = None,
        repeat: int = 0,
        pause: bool = False,
    ) -> Timer:
        """``ProgressBar``'s only interval refreshes the ETA, which this bar does not show: it starts
        paused and is never resumed. Kept here: a paused timer nothing refers to is collected mid-wait
        ("Task was destroyed but it is pending!")."""
        timer = super().set_interval(interval, callback, name=name, repeat=repeat, pause=True)
        self._still_timers.append(timer)
        return timer
