"""Where an audit's time goes: its phases, timed, and its cost in oracle-episode equivalents.

An audit moves through ``static`` (checks that read files), ``build`` (the image, and what it already
contains), ``footprint`` (where the verifier runs), ``probes`` (oracle reruns, nop, cheats, harness
probes: the bulk) and ``verdict``. Each phase's seconds land in ``checks.phases`` of the audit's record
(``bandpass show``, ``bandpass tasks --json``), and ``on_phase`` hears each phase as it starts, so a runner
can say live which task is in which phase (the CLI's progress lines, the Tasks screen).

The cost is said in *oracle-episode equivalents*: the seconds of every episode the audit ran, divided by
one oracle episode's seconds on the same task and machine. It is the unit a curator can compare with a
rollout (an oracle episode is about what one policy attempt at the task costs, minus the model). The unit
is an oracle episode that verified once, as a rollout does: the audit's first oracle also reruns its
verifier four times, and counting that one in the unit made the unit larger and the cost smaller the fewer
oracle episodes there were (``--reruns 1``: the unit was 2–3x an attempt and the cost a third of the truth).
"""

from __future__ import annotations

import contextlib
import statistics
import time
from collections.abc import Callable
from typing import Any

from ..core import probes

__all__ = ["PHASES", "PhaseClock", "cost"]

PHASES = ("static", "build", "footprint", "probes", "verdict")


class PhaseClock:
    """Times consecutive phases; ``on_phase`` is told each one as it starts (its errors are ignored: a
    broken progress display must not fail an audit)."""

    def __init__(self, on_phase: Callable[[str], None] | None = None) -> None:
        self.on_phase = on_phase
        self.seconds: dict[str, float] = {}
        self._current: str | None = None
        self._since = time.monotonic()

    def enter(self, phase: str) -> None:
        self._close()
        self._current, self._since = phase, time.monotonic()
        if self.on_phase is not None:
            with contextlib.suppress(Exception):  # progress only
                self.on_phase(phase)

    def _close(self) -> None:
        if self._current is not None:
            spent = time.monotonic() - self._since
            self.seconds[self._current] = round(self.seconds.get(self._current, 0.0) + spent, 2)
            self._current = None

    def finish(self) -> dict[str, float]:
        self._close()
        return dict(self.seconds)


def cost(episodes: list[dict[str, Any]]) -> dict[str, Any]:
    """The audit's cost from its episodes (``{"agent", "outcome", "seconds", "verifier_reruns"}`` each):
    how many, their seconds, one oracle episode's seconds and the ratio. The unit is the median of the
    passing oracle episodes that ran their verifier once (those with reruns only when there is no other).
    ``oracle_equivalents`` is None when no oracle passed (nothing to measure by)."""
    seconds = [e["seconds"] for e in episodes if e.get("seconds") is not None]
    passed = [
        e
        for e in episodes
        if e.get("agent") == probes.ORACLE and e.get("outcome") == "passed" and e.get("seconds") is not None
    ]
    once = [e["seconds"] for e in passed if not e.get("verifier_reruns")]
    oracle = once or [e["seconds"] for e in passed]
    unit = statistics.median(oracle) if oracle else None
    total = round(sum(seconds), 2)
    return {
        "episodes": len(episodes),
        "episode_seconds": total,
        "oracle_episode_seconds": round(unit, 2) if unit else None,
        "oracle_equivalents": round(total / unit, 2) if unit else None,
    }
