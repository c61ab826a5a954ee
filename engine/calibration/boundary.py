"""Band-edge tests calibrated exactly, so that the confidence a curator asks for is the error they get.

The confidence sequence (``confidence.py``) clears an edge when the mixture likelihood ratio against the
edge's pass rate reaches ``1/alpha``; Ville's inequality bounds the chance of that ever happening by
``alpha``, for any way of looking. The bound is loose: at the default band a task sitting on an edge is
decided wrongly 1–3% of the time where 10% is allowed, and the unspent 7–9% is paid for in episodes.
Here the same statistic decides each edge in each direction at the *lowest* threshold whose chance of
ever being reached within ``horizon`` episodes — looked at after every single one, the most often anyone
can look — at the edge's own rate fits that direction's share of ``alpha``. The chance is computed
exactly by dynamic programming over (passes, episodes), absorbing the paths that have been decided.

**Why this keeps the per-task promise.** A task below the band can only be decided wrongly by "not
below lo" and one above it only by "not above hi", so those two directions get ``(1 - TAIL) * alpha``
each. Each rejection region is an upper set of passes (going up) or a lower set (going down) at every n,
so a true rate further from the edge is decided wrongly less often than one on it (coupling), and the
regions are nested ("above hi" implies "not below lo"), so no task pays twice. A task inside the band can
be decided wrongly by "below lo" or by "above hi", and the two share its budget — but not by halves: the
first is only likely near ``lo`` and the second only near ``hi``. ``inside_budgets`` splits the band at a
rate ``m`` and bounds the chance of either for a task in ``[lo, m]`` by "below lo"'s own budget plus
"above hi"'s chance at ``m`` (a monotone bound, computed exactly), and the same on ``[m, hi]``; at the
default band that chance is ~1e-5, so each direction gets 99.9% of the budget rather than half (a task
never solved is shown below 0.1 after 51 episodes rather than 64, one always solved above 0.9 after 8
rather than 10). Looking less often than after every episode can only miss crossings, and choosing which
task gets the next episode from all the tasks' results does not change the sequence of any one task's
outcomes, so neither the curator's looks nor the adaptive sampler weaken it.

**Past the horizon** the recursion has nothing left to spend, so the remaining ``TAIL * alpha`` is kept
for Ville's bound: beyond ``horizon`` episodes the decision is the confidence sequence's at confidence
``1 - TAIL * alpha`` (wider; a task that stayed undecided for that long is at an edge anyway). That
sequence excludes the true rate at *any* time with probability at most ``TAIL * alpha``, so the two parts
together stay within ``alpha``.
"""

from __future__ import annotations

import math
from functools import lru_cache
from typing import Literal

import numpy as np

Side = Literal["below", "above"]

#: Episodes of one (task version, model) up to which the edge tests are calibrated exactly.
HORIZON = 500
#: The share of ``alpha`` kept for Ville's bound past the horizon.
TAIL = 0.1
#: "below lo" and "above hi" share a task's budget by ``inside_budgets``; False: by halves, the rule before
#: 2026-12-05 afternoon (``bench/bench_adaptive.py --halves`` measures it).
SPLIT_INSIDE = True
_BISECT_STEPS = 40
_JEFFREYS = 0.5


@lru_cache(maxsize=8)
def _log_mixture_table(horizon: int, atom_0: float, atom_1: float) -> np.ndarray:
    """log m(c, n) for every 0 <= c <= n <= horizon (``-inf`` where c > n): the same mixture as
    ``confidence.log_mixture``, in bulk (log-gamma by running sums, since numpy has none)."""
    m = np.arange(horizon + 1)
    half = np.concatenate(
        ([math.lgamma(_JEFFREYS)], math.lgamma(_JEFFREYS) + np.cumsum(np.log(m[:-1] + _JEFFREYS)))
    )
    fact = np.concatenate(([0.0], np.cumsum(np.log(m[1:]))))  # log n!
    n, c = m[:, None], m[None, :]
    valid = c <= n
    rest = np.where(valid, n - c, 0)
    log_beta_prior = 2 * math.lgamma(_JEFFREYS) - math.lgamma(2 * _JEFFREYS)
    # B(1/2 + c, 1/2 + n - c) / B(1/2, 1/2), where c <= n
    jeffreys = np.exp(
        np.where(valid, half[np.minimum(c, n)] + half[rest] - fact[n] - log_beta_prior, -np.inf)
    )
    total = (1 - atom_0 - atom_1) * jeffreys + atom_0 * (c == 0) + atom_1 * (c == n)
    with np.errstate(divide="ignore"):
        return np.where(valid, np.log(total), -np.inf)


def _crossing(rate: float, cut: np.ndarray, up: bool) -> float:
    """The chance that a task of pass rate ``rate``, looked at after every episode, ever enters the region
    (``c >= cut[n]`` going up, ``c <= cut[n]`` going down) within ``len(cut) - 1`` episodes."""
    horizon = len(cut) - 1
    alive = np.zeros(horizon + 2)
    alive[0] = 1.0
    total = 0.0
    for n in range(1, horizon + 1):
        nxt = np.zeros(horizon + 2)
        nxt[: n + 1] = alive[: n + 1] * (1 - rate)
        nxt[1 : n + 1] += alive[:n] * rate
        k = int(cut[n])
        if up and k <= n:
            total += float(nxt[k : n + 1].sum())
            nxt[k : n + 1] = 0.0
        elif not up and k >= 0:
            total += float(nxt[: k + 1].sum())
            nxt[: k + 1] = 0.0
        alive = nxt
    return total


def _calibrated_cut(log_m: np.ndarray, rate: float, up: bool, budget: float) -> np.ndarray:
    """The region of the lowest threshold on the mixture likelihood ratio that stays within ``budget``."""
    horizon = log_m.shape[0] - 1
    m = np.arange(horizon + 1)
    n, c = m[:, None], m[None, :]
    with np.errstate(invalid="ignore"):
        ratio = log_m - (c * math.log(rate) + (n - c) * math.log1p(-rate))
    side = (c > rate * n) if up else (c < rate * n)
    eligible = (c <= n) & side

    def cut(threshold: float) -> np.ndarray:
        hit = eligible & (ratio >= threshold)
        if up:  # the fewest passes that decide, and everything above it
            return np.where(hit.any(axis=1), np.argmax(hit, axis=1), m + 1)
        last = horizon - np.argmax(hit[:, ::-1], axis=1)
        return np.where(hit.any(axis=1), last, -1)

    low, high = -10.0, math.log(1 / budget)  # Ville: the chance of ever reaching 1/budget is <= budget
    if _crossing(rate, cut(low), up) <= budget:
        return cut(low)
    for _ in range(_BISECT_STEPS):
        mid = (low + high) / 2
        if _crossing(rate, cut(mid), up) <= budget:
            high = mid
        else:
            low = mid
    return cut(high)


@lru_cache(maxsize=256)
def region(
    rate: float, up: bool, budget: float, atom_0: float, atom_1: float, horizon: int = HORIZON
) -> tuple[int, ...]:
    """One calibrated test: for every n up to ``horizon``, the fewest passes that reject ``rate`` going up
    (``n + 1``: none) or the most that reject it going down (``-1``: none), within ``budget``."""
    cut = _calibrated_cut(_log_mixture_table(horizon, atom_0, atom_1), rate, up, budget)
    return tuple(int(x) for x in cut)


@lru_cache(maxsize=64)
def inside_budgets(
    lo_rate: float | None, hi_rate: float | None, spend: float, atom_0: float, atom_1: float
) -> tuple[float, float]:
    """The budgets of "below lo" and "above hi", the two wrong calls for a task inside the band, which
    together must stay within ``spend`` at every rate in ``[lo_rate, hi_rate]`` (module docstring).

    For a split rate ``m``: on ``[lo, m]`` "below lo" is likeliest at ``lo`` (its budget) and "above hi" at
    ``m``, and the other way round on ``[m, hi]``; so budgets ``spend - P_m(above hi)`` and ``spend -
    P_m(below lo)`` keep the sum within ``spend`` everywhere. The chances at ``m`` are taken for the regions
    at the whole ``spend`` (which contain the final, smaller ones), ``m`` the interior rate that leaves the
    most, and the result checked on the final regions; halves where that is not better (a band too narrow
    for its edges to be told apart), and the whole ``spend`` for an edge at 0 or 1, which no task can be
    on the wrong side of.
    """
    if lo_rate is None or hi_rate is None:
        return spend, spend
    half = (spend / 2, spend / 2)
    above0 = np.array(region(hi_rate, True, spend, atom_0, atom_1))
    below0 = np.array(region(lo_rate, False, spend, atom_0, atom_1))
    best: tuple[float, float, float] | None = None
    for m in np.linspace(lo_rate, hi_rate, 11)[1:-1]:
        b, a = spend - _crossing(float(m), above0, True), spend - _crossing(float(m), below0, False)
        if best is None or min(b, a) > min(best[1], best[2]):
            best = (float(m), b, a)
    if best is None or min(best[1], best[2]) <= spend / 2:
        return half
    m, b, a = best
    below = np.array(region(lo_rate, False, b, atom_0, atom_1))
    above = np.array(region(hi_rate, True, a, atom_0, atom_1))
    if b + _crossing(m, above, True) > spend or a + _crossing(m, below, False) > spend:
        return half
    return b, a


def edge_sides(
    c: int, n: int, lo_rate: float | None, hi_rate: float | None, alpha: float, atom_0: float, atom_1: float
) -> tuple[Side | None, Side | None]:
    """Each band edge's side after ``c`` passes in ``n <= HORIZON`` episodes, at error ``alpha`` per task
    (module docstring). ``lo_rate``/``hi_rate`` None: an edge at pass@k 0 or 1, which every task is on
    the inside of."""
    spend = (1 - TAIL) * alpha
    below_lo, above_hi = (
        inside_budgets(lo_rate, hi_rate, spend, atom_0, atom_1) if SPLIT_INSIDE else (spend / 2, spend / 2)
    )
    lo_up = lo_down = None
    if lo_rate is not None:
        lo_up = c >= region(lo_rate, True, spend, atom_0, atom_1)[n]
        lo_down = c <= region(lo_rate, False, below_lo, atom_0, atom_1)[n]
    hi_up = hi_down = None
    if hi_rate is not None:
        hi_up = c >= region(hi_rate, True, above_hi, atom_0, atom_1)[n]
        hi_down = c <= region(hi_rate, False, spend, atom_0, atom_1)[n]
    # nested: "above hi" only where "not below lo" too, "below lo" only where "not above hi" too (shrinking
    # a region only lowers its chance of being entered, so the budgets still hold)
    lo_side: Side | None = (
        "above" if lo_up is None or lo_up else "below" if lo_down and hi_down is not False else None
    )
    hi_side: Side | None = (
        "below" if hi_down is None or hi_down else "above" if hi_up and lo_up is not False else None
    )
    return lo_side, hi_side
