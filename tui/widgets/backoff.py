"""Backoff: how long a poller waits before its next look — short while things change, longer while not.

Why: the Runs screen's batch table and the episode follower poll what other processes write (the store,
their recordings). Polling at the rate a live batch needs costs CPU all day in an app left open beside a
quiet workspace; backing off while nothing changes, and snapping back at the first change, keeps a live
batch live and an idle app idle (``bench/bench_idle.py``).
"""

from __future__ import annotations


class Backoff:
    """``floor`` seconds after a change, doubling with every look that found nothing, up to ``ceiling``."""

    def __init__(self, floor: float, ceiling: float) -> None:
        if not 0 < floor <= ceiling:
            raise ValueError(f"Backoff needs 0 < floor <= ceiling, got {floor} and {ceiling}")
        self.floor, self.ceiling = floor, ceiling
        self.delay = floor

    def after(self, changed: bool) -> float:
        """The wait before the next look, given whether this look found a change."""
        self.delay = self.floor if changed else min(self.delay * 2, self.ceiling)
        return self.delay

    def reset(self) -> None:
        self.delay = self.floor
