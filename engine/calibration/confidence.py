"""Band decisions with a stated confidence: an interval for a task's pass rate that stays honest however
the episodes were collected, and the decision it supports.

**The interval.** Each episode of a model on a task version is a Bernoulli trial with an unknown per-sample
pass rate ``p``; pass@k of the model is ``1 - (1 - p)^k``, monotone in ``p``, so an interval on ``p`` maps
edge for edge to one on pass@k. A fixed-n interval (Clopper–Pearson, or the Jeffreys posterior's quantiles)
promises its confidence for *one* look at a sample size chosen in advance. Calibration never works like
that: a curator looks at the report, runs more episodes, looks again, and the adaptive sampler looks after
every round and stops a task the moment it is decided. Checking a fixed-n interval after every round and
stopping when it clears an edge wrongly decides a task at an edge far more often than promised (the
optional-stopping problem; ``bench/bench_adaptive.py`` measures it). So the interval used here is a
*confidence sequence*: Robbins' mixture of likelihoods over a mixing distribution ``pi`` for the rate,

    CS_n = { p : m(c, n) / (p^c (1-p)^(n-c)) < 1/alpha },   m(c, n) = E_{q ~ pi} [ q^c (1-q)^(n-c) ],

the pass rates at which the ``pi``-averaged likelihood of the episodes seen is less than ``1/alpha`` times
their likelihood at ``p``. For the true ``p`` that ratio is a nonnegative martingale with mean 1, so by
Ville's inequality the probability that it *ever* reaches ``1/alpha`` — at any n, after any number of
looks, under any rule for when to sample or stop — is at most ``alpha = 1 - confidence``. The set is an
interval (the log-likelihood is concave in ``p``); its ends are found by bisection, rounded outward.

**The mixing distribution.** Any ``pi`` fixed in advance keeps that guarantee; the choice only moves where
the sequence is sharpest, because ``m(c, n)`` is large for the outcomes ``pi`` expects. Most tasks a
checkpoint is calibrated on are never or always solved, so ``pi`` puts 5% of its weight on p = 0, 9% on
p = 1 and the rest on the Jeffreys prior Beta(1/2, 1/2) (whose part of ``m`` is the beta-binomial
``B(1/2 + c, 1/2 + n - c) / B(1/2, 1/2)``). With the default band (pass@2 in [0.1, 0.9]) at 90% that makes
the smallest samples decisive where the Jeffreys prior alone falls just short: one pass shows "not below
0.1" (``m(1, 1)`` must reach 0.513; Jeffreys gives 0.5) and three failures show "not above 0.9"
(``m(0, 3)`` must reach 0.316; Jeffreys gives 0.3125), which is what lets the adaptive sampler stop a task
never solved after three episodes and one always solved after one for that edge. The weights are the
smallest that do both with some margin, so that the Jeffreys part keeps 86% and a task in the middle of
the band pays at most an episode on a boundary (4 of 13 was "in" with Jeffreys alone, 4 of 14 still is);
``bench/bench_adaptive.py --mixture 0,0`` measures the Jeffreys prior alone.

**The decision.** With band ``[lo, hi]`` on pass@k (both edges inclusive), each edge is decided on its own
(``edges``): "not below lo", "below lo", "not above hi", "above hi", or open. The edges are decided by
tests on the same mixture likelihood ratio, but with thresholds calibrated exactly (``boundary.py``) rather
than set at ``1/alpha`` by Ville's inequality, which is loose here: the interval alone would decide a task
sitting on an edge wrongly 1–3% of the time where 10% is allowed. The calibrated tests spend the 10%, so
the same promise takes fewer episodes (a task never solved is shown below 0.1 after 51 episodes rather
than 88; 3 passes of 10 are ``in``, where the interval alone needed 4 of 14). A task is ``below`` when
"below lo", ``above`` when "above hi", ``in`` when "not below lo" and "not above hi", and ``undecided``
otherwise; the adaptive sampler counts the half-decisions. Whenever and however often anyone looks, each
task is decided on the wrong side of an edge with probability at most ``1 - confidence`` (``boundary.py``
says why).

The interval reported with a decision is the confidence sequence's, made to agree with it: cut at an edge
a test has settled, and reaching an edge that is still open, so that reading the interval against the band
gives the decision. (Without the calibrated tests, ``CALIBRATED = False``, the interval alone decides: the
rule before 2026-12-05, which ``bench/bench_adaptive.py --ville`` measures.)

The interval needs no more than ``math``: the log-gamma function, a continued fraction for the incomplete
beta function (used only for the fixed-n Jeffreys interval the benchmark contrasts) and bisection; the
calibrated tests use numpy.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, Literal

from ..core.config import BandConfig
from ..core.errors import InvalidInput
from . import boundary

Status = Literal["in", "below", "above", "undecided"]
Side = boundary.Side

DEFAULT_CONFIDENCE = BandConfig.confidence
#: The mixing distribution of the confidence sequence (module docstring): weight on p = 0, weight on p = 1,
#: and the rest on the Jeffreys prior.
ATOM_0, ATOM_1 = 0.05, 0.09
#: Edges decided by the exactly calibrated tests (``boundary.py``); False: by the interval and Ville's bound
#: alone, the rule before 2026-12-05 (``bench/bench_adaptive.py --ville`` measures it).
CALIBRATED = True
#: Jeffreys prior Beta(1/2, 1/2): the fixed-n interval the benchmark contrasts, and the planner's forecast.
JEFFREYS = 0.5
#: Edges are compared with this slack, so that a value equal to an edge in exact arithmetic (0.1) is on it.
EPS = 1e-12
_BISECT_STEPS = 64


def check_confidence(confidence: float) -> float:
    """``confidence`` if it is a probability strictly between 0 and 1; else the one-line error to show."""
    if not (isinstance(confidence, int | float) and math.isfinite(confidence) and 0 < confidence < 1):
        raise InvalidInput(f"--confidence: expected a number strictly between 0 and 1, got {confidence}")
    return float(confidence)


def log_beta(a: float, b: float) -> float:
    return math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b)


def _loglik(c: int, n: int, p: float) -> float:
    """log of p^c (1-p)^(n-c), with 0·log 0 = 0 at the ends."""
    out = 0.0
    if c:
        out += c * math.log(p) if p > 0 else -math.inf
    if n - c:
        out += (n - c) * math.log1p(-p) if p < 1 else -math.inf
    return out


def log_mixture(c: int, n: int) -> float:
    """log m(c, n): the mixing distribution's average likelihood of one particular sequence of ``n``
    episodes with ``c`` passes (module docstring)."""
    jeffreys = (1.0 - ATOM_0 - ATOM_1) * math.exp(
        log_beta(JEFFREYS + c, JEFFREYS + n - c) - log_beta(JEFFREYS, JEFFREYS)
    )
    return math.log(jeffreys + ATOM_0 * (c == 0) + ATOM_1 * (c == n))


@lru_cache(maxsize=65536)
def rate_interval(c: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The anytime-valid interval (module docstring) for the per-sample pass rate after ``c`` of ``n``.

    ``n == 0`` is ``(0, 1)``. The ends are rounded outward (a bisection end that is known to lie outside
    the set), so floating point never makes the interval narrower than the maths says.
    """
    if not 0 <= c <= n:
        raise ValueError(f"need 0 <= c <= n, got c={c} n={n}")
    alpha = 1.0 - check_confidence(confidence)
    if n == 0:
        return 0.0, 1.0
    # p is inside the set when loglik(p) > log m(c, n) + log alpha.
    threshold = log_mixture(c, n) + math.log(alpha)
    mode = c / n
    lo = 0.0
    if c > 0:
        out, inside = 0.0, mode
        for _ in range(_BISECT_STEPS):
            mid = (out + inside) / 2
            if _loglik(c, n, mid) > threshold:
                inside = mid
            else:
                out = mid
        lo = out
    hi = 1.0
    if c < n:
        inside, out = mode, 1.0
        for _ in range(_BISECT_STEPS):
            mid = (inside + out) / 2
            if _loglik(c, n, mid) > threshold:
                inside = mid
            else:
                out = mid
        hi = out
    return lo, hi


def pass_at_k_of_rate(p: float, k: int) -> float:
    """pass@k of a model whose episodes pass independently with probability ``p``."""
    return 1.0 - (1.0 - p) ** k


def rate_of_pass_at_k(q: float, k: int) -> float:
    """The per-sample pass rate whose pass@k is ``q`` (the inverse of ``pass_at_k_of_rate``)."""
    kth_root: float = (1.0 - q) ** (1.0 / k)  # a real root: 1 - q is never negative
    return 1.0 - kth_root


@dataclass(frozen=True)
class BandDecision:
    """Where one task stands for one model: the decision, its interval, and the evidence behind it."""

    status: Status
    confidence: float
    n: int
    c: int
    rate: tuple[float, float]  # interval on the per-sample pass rate
    pass_at_k: tuple[float, float]  # the same interval mapped to pass@k
    lo_side: Side | None  # the side of the band's lower edge the task is decided on, if it is
    hi_side: Side | None  # the side of the upper edge

    @property
    def decided(self) -> bool:
        return self.status != "undecided"

    @property
    def open_edges(self) -> int:
        """Band edges still undecided (0, 1 or 2): what more episodes could settle."""
        return (self.lo_side is None) + (self.hi_side is None)

    def as_dict(self) -> dict[str, Any]:
        return {
            "decision": self.status,
            "confidence": self.confidence,
            "interval": [self.pass_at_k[0], self.pass_at_k[1]],
            "rate_interval": [self.rate[0], self.rate[1]],
            "edges": {"lo": self.lo_side, "hi": self.hi_side},
        }


def sides(pass_lo: float, pass_hi: float, lo: float, hi: float) -> tuple[Side | None, Side | None]:
    """Each band edge's side given a pass@k interval; None where the interval straddles the edge.

    The band includes its edges: "above" ``lo`` means pass@k >= lo, "below" ``hi`` means pass@k <= hi.
    """
    lo_side: Side | None = "above" if pass_lo >= lo - EPS else ("below" if pass_hi < lo - EPS else None)
    hi_side: Side | None = "below" if pass_hi <= hi + EPS else ("above" if pass_lo > hi + EPS else None)
    return lo_side, hi_side


def status_of(lo_side: Side | None, hi_side: Side | None) -> Status:
    if lo_side == "below":
        return "below"
    if hi_side == "above":
        return "above"
    if lo_side == "above" and hi_side == "below":
        return "in"
    return "undecided"


def decide(
    c: int,
    n: int,
    lo: float,
    hi: float,
    k: int,
    confidence: float = DEFAULT_CONFIDENCE,
    min_samples: int = 1,
) -> BandDecision:
    """The band decision for ``c`` passes in ``n`` valid samples (module docstring).

    Fewer than ``min_samples`` valid samples is ``undecided`` whatever the interval says (the interval is
    still reported): a floor a workspace may keep on top of the confidence rule.
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    rate = rate_interval(c, n, confidence)
    pk = (pass_at_k_of_rate(rate[0], k), pass_at_k_of_rate(rate[1], k))
    lo_side: Side | None
    hi_side: Side | None
    if n < max(1, min_samples):
        lo_side, hi_side = None, None
    elif not CALIBRATED:
        lo_side, hi_side = sides(pk[0], pk[1], lo, hi)
    elif n <= boundary.HORIZON:
        lo_side, hi_side = boundary.edge_sides(
            c,
            n,
            rate_of_pass_at_k(lo, k) if lo > EPS else None,
            rate_of_pass_at_k(hi, k) if hi < 1 - EPS else None,
            1.0 - confidence,
            ATOM_0,
            ATOM_1,
        )
    else:  # past the horizon: Ville's bound on the share of the error kept for it
        wide = rate_interval(c, n, 1.0 - boundary.TAIL * (1.0 - confidence))
        lo_side, hi_side = sides(pass_at_k_of_rate(wide[0], k), pass_at_k_of_rate(wide[1], k), lo, hi)
    # the interval shown agrees with the decision: cut at an edge that is settled (the edge tests are
    # sharper than the interval's own bound, so they settle edges it still straddles) and reaching an edge
    # that is not
    p_lo, p_hi = pk
    for edge, side in ((lo, lo_side), (hi, hi_side)):
        if side == "above":
            p_lo = max(p_lo, edge)
        elif side == "below":
            p_hi = min(p_hi, edge)
        elif n >= max(1, min_samples):  # undecided: the interval reaches the edge
            p_lo, p_hi = min(p_lo, edge), max(p_hi, edge)
    if (p_lo, p_hi) != pk:
        pk = (p_lo, p_hi)
        rate = (rate_of_pass_at_k(p_lo, k), rate_of_pass_at_k(p_hi, k))
    return BandDecision(status_of(lo_side, hi_side), confidence, n, c, rate, pk, lo_side, hi_side)


# --- the fixed-n Jeffreys interval: what NOT to look at after every round --------------------------------


def betainc(a: float, b: float, x: float) -> float:
    """The regularised incomplete beta function I_x(a, b) (the Beta(a, b) CDF at ``x``).

    Lentz's continued fraction, evaluated on the side where it converges fast. For integer ``a, b`` it
    equals a binomial tail exactly (``I_p(c, n-c+1) = P(Binomial(n, p) >= c)``), which the tests check.
    """
    if a <= 0 or b <= 0:
        raise ValueError(f"betainc: need a, b > 0, got a={a} b={b}")
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    front = math.exp(a * math.log(x) + b * math.log1p(-x) - log_beta(a, b))
    if x < (a + 1) / (a + b + 2):
        return front * _betacf(a, b, x) / a
    return 1.0 - math.exp(b * math.log1p(-x) + a * math.log(x) - log_beta(a, b)) * _betacf(b, a, 1 - x) / b


def _betacf(a: float, b: float, x: float) -> float:
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 500):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-15:
            break
    return h


def beta_quantile(q: float, a: float, b: float) -> float:
    """The ``q`` quantile of Beta(a, b), by bisection on ``betainc``."""
    lo, hi = 0.0, 1.0
    for _ in range(_BISECT_STEPS):
        mid = (lo + hi) / 2
        if betainc(a, b, mid) < q:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@lru_cache(maxsize=65536)
def jeffreys_interval(c: int, n: int, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
    """The equal-tailed Jeffreys posterior interval for ``p``: right for one look at a fixed n, wrong to
    check after every round (``bench/bench_adaptive.py`` shows how wrong). Not used for decisions."""
    alpha = 1.0 - check_confidence(confidence)
    lo = 0.0 if c == 0 else beta_quantile(alpha / 2, JEFFREYS + c, JEFFREYS + n - c)
    hi = 1.0 if c == n else beta_quantile(1 - alpha / 2, JEFFREYS + c, JEFFREYS + n - c)
    return lo, hi
