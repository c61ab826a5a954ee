"""Adaptive sampling against fixed k, and whether the stated confidence holds under optional stopping.

Run: .venv/bin/python bench/bench_adaptive.py [--tasks 200] [--seeds 100] [--worst 4000] [--max-k 64]
     [--mixture W0,W1] [--first N] [--step N]   (``--mixture 0,0 --first 2 --step 2``: the Jeffreys
     mixture and the 2-episode rounds this replaced)
     [--population Z,O]   (shares of tasks never and always solved; default 0.45,0.15)
     [--one-sided W[,A]]  (a measured alternative, not the product's rule: per-edge one-sided mixtures)
     [--ville]            (the rule before 2026-12-05: edges decided by the interval and Ville's bound)
     [--halves]           (the calibrated rule before the split: "below" and "above" get half each)
     [--ks 4,8,16,32]     (the fixed k compared)

A simulation (no Docker, no model): every task has a known true per-sample pass rate drawn like a real
checkpoint — 45% never solved (p = 0), 15% always solved (p = 1), 40% spread uniformly in between — and an
episode is a Bernoulli draw. The band is bandpass.toml's default, pass@2 in [0.1, 0.9], decided at 90%
confidence. Both arms use the product's own code: decisions from ``engine.calibration.confidence.decide``,
rounds from ``engine.calibration.adaptive.plan_round`` with the product's defaults (first round 1 per
task, then 8 tasks × 1 episode per round; each round's results are in before the next is planned, where
the real loop plans as soon as the queue drains, leaving out tasks with episodes in flight).

1. **Fixed k vs adaptive.** For k = 4, 8, 16, 32 episodes per task: the share of (task, band edge) pairs
   *decided on the right side* of the edge — the decision is the product's placement; an undecided edge
   is not placed — the share decided on the wrong side, and the share of tasks whose whole decision is
   right. Adaptive: the same at equal budget (k × tasks episodes), and the episodes it needed to reach
   fixed k's share on the same tasks (per seed, then averaged; the goal is at most half).
2. **Misclassification over many seeds.** In those runs: wrong decisions per decided edge and per task.
3. **Worst case for optional stopping.** Tasks whose true pass@2 sits exactly on a band edge (where a
   wrong decision is likeliest), sampled one episode at a time, looked at after every one and stopped at
   the first decision (up to ``--worst-max`` episodes): the share ever decided on the wrong side of that
   edge, with the product's decision rule and with a fixed-n Jeffreys 90% interval looked at the
   same way. Promised: at most 10%.
4. **What a decision costs.** For tasks of known true pass@2, the episodes (one at a time, looked at
   after each) until the band is decided: median and 90th percentile, up to ``--cost-max``
   (docs/guide/calibration-and-export.md, "How to choose a budget").

Prints tables; asserts nothing. Pure Python, about a minute per 100 seeds on one core.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bandpass.engine.calibration import boundary, confidence  # noqa: E402 - imported after the sys.path set-up above
from bandpass.engine.calibration.adaptive import AdaptiveSettings, TaskState, plan_round  # noqa: E402 - imported after the sys.path set-up above
from bandpass.engine.calibration.confidence import (  # noqa: E402 - imported after the sys.path set-up above
    decide,
    jeffreys_interval,
    pass_at_k_of_rate,
    rate_of_pass_at_k,
    sides,
)

LO, HI, K, CONFIDENCE = 0.1, 0.9, 2, 0.9
FIXED_KS = (4, 8, 16, 32)


NEVER, ALWAYS = 0.45, 0.15


def population(n: int, rng: random.Random) -> list[float]:
    """True per-sample pass rates: many at 0, some at 1, a spread between."""
    out = []
    for _ in range(n):
        u = rng.random()
        out.append(0.0 if u < NEVER else 1.0 if u < NEVER + ALWAYS else rng.random())
    return out


def one_sided(weight: float, alpha: float) -> Callable[[int, int, float], tuple[float, float]]:
    """The alternative ``--one-sided`` measures: each end of the interval from its own one-sided test.

    The lower end rejects a rate ``r`` when a mixture over rates above ``r`` only (``weight`` on p = 1, the
    rest the Jeffreys prior truncated to (r, 1]) makes the episodes ``1/alpha`` times likelier than ``r``
    does; the upper end mirrors it (``weight`` on p = 0, Jeffreys truncated to [0, r)). Each end is then an
    anytime-valid one-sided bound at ``1 - alpha``, so each *edge* is decided wrongly with probability at
    most ``alpha`` — but a task inside the band may be decided wrongly at either edge, so the product's
    per-task promise needs ``alpha`` split between the ends (``--one-sided W,0.05``).
    """

    def log_mixture(c: int, n: int, r: float, above: bool) -> float:
        a, b = confidence.JEFFREYS + c, confidence.JEFFREYS + n - c
        half = confidence.JEFFREYS
        if above:
            num, den = 1 - confidence.betainc(a, b, r), 1 - confidence.betainc(half, half, r)
        else:
            num, den = confidence.betainc(a, b, r), confidence.betainc(half, half, r)
        jeffreys = (
            math.exp(confidence.log_beta(a, b) - confidence.log_beta(half, half)) * num / den
            if den > 0
            else 0.0
        )
        atom = (c == n) if above else (c == 0)
        total = (1 - weight) * jeffreys + weight * atom
        return math.log(total) if total > 0 else -math.inf

    def rejects(c: int, n: int, r: float, above: bool) -> bool:
        return log_mixture(c, n, r, above) - confidence._loglik(c, n, r) >= math.log(1 / alpha)

    cache: dict[tuple[int, int], tuple[float, float]] = {}

    def interval(c: int, n: int, confidence_: float = CONFIDENCE) -> tuple[float, float]:
        if (c, n) in cache:
            return cache[(c, n)]
        lo, hi = 0.0, 1.0
        if n and c > 0:
            out, inside = 0.0, c / n
            for _ in range(48):
                mid = (out + inside) / 2
                out, inside = (mid, inside) if rejects(c, n, mid, True) else (out, mid)
            lo = out
        if n and c < n:
            inside, out = c / n, 1.0
            for _ in range(48):
                mid = (inside + out) / 2
                inside, out = (inside, mid) if rejects(c, n, mid, False) else (mid, out)
            hi = out
        cache[(c, n)] = (lo, hi)
        return lo, hi

    return interval


def truth(p: float) -> tuple[str, str]:
    """The true side of each edge (the band includes its edges)."""
    q = pass_at_k_of_rate(p, K)
    lo_side, hi_side = sides(q, q, LO, HI)
    assert lo_side is not None and hi_side is not None
    return lo_side, hi_side


def score(ps: list[float], n: list[int], c: list[int]) -> tuple[float, float, float]:
    """(edges decided right, edges decided wrong) per edge, and tasks whose whole decision is right."""
    right = wrong = whole = 0
    for p, ni, ci in zip(ps, n, c, strict=True):
        d = decide(ci, ni, LO, HI, K, CONFIDENCE)
        t = truth(p)
        ok = 0
        for got, want in ((d.lo_side, t[0]), (d.hi_side, t[1])):
            if got is None:
                continue
            if got == want:
                right += 1
                ok += 1
            else:
                wrong += 1
        whole += ok == 2
    edges = 2 * len(ps)
    return right / edges, wrong / edges, whole / len(ps)


def fixed(ps: list[float], k: int, rng: random.Random) -> tuple[float, float, float]:
    c = [sum(rng.random() < p for _ in range(k)) for p in ps]
    return score(ps, [k] * len(ps), c)


def adaptive(
    ps: list[float], settings: AdaptiveSettings, rng: random.Random, budget: int
) -> tuple[list[tuple[int, tuple[float, float, float]]], list[int], list[int]]:
    """Runs rounds until the sampler stops or ``budget`` episodes are spent: the curve (spent, score) and
    the final valid samples and passes per task."""
    n = [0] * len(ps)
    c = [0] * len(ps)
    a = [0] * len(ps)
    spent = 0
    curve = [(0, score(ps, n, c))]
    while spent < budget:
        plan = plan_round([TaskState(i, n[i], c[i], a[i]) for i in range(len(ps))], settings, spent)
        if not plan.attempts:
            break
        for i, m in plan.attempts.items():
            for _ in range(m):
                c[i] += rng.random() < ps[i]
                n[i] += 1
                a[i] += 1
                spent += 1
        curve.append((spent, score(ps, n, c)))
    return curve, n, c


def at_budget(curve: list[tuple[int, tuple[float, float, float]]], budget: int) -> tuple[float, float, float]:
    """The score once ``budget`` episodes are spent (the last round that fits)."""
    best = curve[0][1]
    for spent, sc in curve:
        if spent > budget:
            break
        best = sc
    return best


def needed(curve: list[tuple[int, tuple[float, float, float]]], target: float) -> int | None:
    for spent, sc in curve:
        if sc[0] >= target - 1e-12:
            return spent
    return None


def worst_case(
    p: float,
    edge: str,
    tasks: int,
    max_n: int,
    rng: random.Random,
    side_of: Callable[[int, int], tuple[str | None, str | None]],
) -> float:
    """Share of tasks at true rate ``p`` ever decided on the wrong side of ``edge`` when looked at after
    every episode and stopped at the first decision of that edge."""
    want = truth(p)[0 if edge == "lo" else 1]
    wrong = 0
    for _ in range(tasks):
        c = n = 0
        while n < max_n:
            c += rng.random() < p
            n += 1
            got = side_of(c, n)[0 if edge == "lo" else 1]
            if got is not None:
                wrong += got != want
                break
    return wrong / tasks


def episodes_to_decide(p: float, tasks: int, cap: int, rng: random.Random) -> list[int | None]:
    """Per simulated task at true rate ``p``: episodes until decided (None: not within ``cap``)."""
    out: list[int | None] = []
    for _ in range(tasks):
        c = n = 0
        got: int | None = None
        while n < cap:
            c += rng.random() < p
            n += 1
            if decide(c, n, LO, HI, K, CONFIDENCE).decided:
                got = n
                break
        out.append(got)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=200)
    ap.add_argument("--seeds", type=int, default=100)
    ap.add_argument("--max-k", type=int, default=64, help="the adaptive arm's --max-k")
    ap.add_argument("--round-tasks", type=int, default=8)
    ap.add_argument("--worst", type=int, default=4000, help="simulated tasks per worst-case rate")
    ap.add_argument("--worst-max", type=int, default=200, help="most episodes per worst-case task")
    ap.add_argument("--cost-max", type=int, default=400, help="most episodes per task in the cost table")
    ap.add_argument("--mixture", help="W0,W1: the mixture's weights at p = 0 and 1 (default: the product's)")
    ap.add_argument("--first", type=int, help="the adaptive arm's first round (default: the product's)")
    ap.add_argument("--step", type=int, help="the adaptive arm's step (default: the product's)")
    ap.add_argument("--population", help="Z,O: shares of tasks never and always solved (default 0.45,0.15)")
    ap.add_argument(
        "--one-sided",
        help="W[,A]: per-edge one-sided mixtures, weight W on the far end, each "
        "end at level A (default 1 - confidence); not the product's rule",
    )
    ap.add_argument(
        "--ville",
        action="store_true",
        help="decide edges by the interval and Ville's bound (the rule before)",
    )
    ap.add_argument(
        "--halves",
        action="store_true",
        help='"below lo" and "above hi" get half the budget each (the calibrated rule before the split)',
    )
    ap.add_argument("--ks", help="K,K,...: the fixed k compared (default 4,8,16,32)")
    args = ap.parse_args()
    global NEVER, ALWAYS, FIXED_KS
    if args.ks:
        FIXED_KS = tuple(int(x) for x in args.ks.split(","))
    if args.population:
        NEVER, ALWAYS = (float(x) for x in args.population.split(","))
    t0 = time.monotonic()
    print(
        f"load {os.getloadavg()[0]:.1f}; {args.tasks} tasks × {args.seeds} seeds "
        f"({NEVER:.0%} never solved, {ALWAYS:.0%} always); band pass@{K} in [{LO}, {HI}]"
    )
    if args.mixture:
        # the confidence sequence reads its mixing distribution from these module settings at call time
        confidence.ATOM_0, confidence.ATOM_1 = (float(x) for x in args.mixture.split(","))
    if args.one_sided:
        w, _, a = args.one_sided.partition(",")
        # decide() reads the interval from the module at call time, so both arms and every table use it
        confidence.rate_interval = one_sided(float(w), float(a) if a else 1 - CONFIDENCE)  # type: ignore[assignment]
        confidence.CALIBRATED = False  # edges from this interval
        print(
            f"ALTERNATIVE RULE: one-sided per-edge mixtures, weight {w} on the far end, each end at "
            f"{float(a) if a else 1 - CONFIDENCE:g}"
        )
    if args.ville:
        confidence.CALIBRATED = False
        print("RULE BEFORE 2026-12-05: edges decided by the interval and Ville's bound")
    if args.halves:
        boundary.SPLIT_INSIDE = False
        print('RULE BEFORE THE SPLIT: "below lo" and "above hi" get half of the budget each')
    settings = AdaptiveSettings(
        lo=LO,
        hi=HI,
        k=K,
        confidence=CONFIDENCE,
        max_k=args.max_k,
        round_tasks=args.round_tasks,
        **{name: v for name, v in (("first", args.first), ("step", args.step)) if v is not None},
    )
    print(
        f"confidence {CONFIDENCE}, mixture {confidence.ATOM_0} at 0, {confidence.ATOM_1} at 1, rest "
        f"Jeffreys; adaptive: first {settings.first}, step {settings.step}, {args.round_tasks} tasks/round, "
        f"max-k {args.max_k}"
    )
    rows: dict[int, dict[str, list[float]]] = {k: {} for k in FIXED_KS}
    decided_edges = wrong_edges = tasks_wrong = tasks_decided = 0
    spent_to_stop: list[int] = []
    for seed in range(args.seeds):
        ps = population(args.tasks, random.Random(seed))
        curve, n, c = adaptive(ps, settings, random.Random(10_000 + seed), budget=10**9)
        spent_to_stop.append(curve[-1][0])
        for k in FIXED_KS:
            f = fixed(ps, k, random.Random(20_000 + 97 * k + seed))
            a = at_budget(curve, k * args.tasks)
            r = rows[k]
            for name, v in (
                ("fixed_right", f[0]),
                ("fixed_wrong", f[1]),
                ("fixed_whole", f[2]),
                ("adapt_right", a[0]),
                ("adapt_wrong", a[1]),
                ("adapt_whole", a[2]),
            ):
                r.setdefault(name, []).append(v)
            need = needed(curve, f[0])
            r.setdefault("reached", []).append(need is not None)
            if need is not None:
                r.setdefault("ratio", []).append(need / (k * args.tasks))
        # misclassification where the sampler stopped: every edge it decided, every task it touched
        for p, ni, ci in zip(ps, n, c, strict=True):
            d = decide(ci, ni, LO, HI, K, CONFIDENCE)
            t = truth(p)
            bad = [got != want for got, want in ((d.lo_side, t[0]), (d.hi_side, t[1])) if got is not None]
            decided_edges += len(bad)
            wrong_edges += sum(bad)
            tasks_decided += bool(bad)
            tasks_wrong += any(bad)
    print()
    print("share of (task, edge) pairs decided on the right side [wrong side]; whole task right")
    print(
        f"{'k':>3}  {'fixed k':>22}  {'adaptive, same budget':>24}  "
        f"{'adaptive episodes to reach fixed k':>36}"
    )
    for k in FIXED_KS:
        r = rows[k]
        m = {name: statistics.fmean(v) for name, v in r.items() if name not in ("reached", "ratio")}
        reached = sum(r["reached"])
        ratio = statistics.fmean(r["ratio"]) if r.get("ratio") else float("nan")
        print(
            f"{k:>3}  {m['fixed_right']:.3f} [{m['fixed_wrong']:.4f}] {m['fixed_whole']:.3f}"
            f"  {m['adapt_right']:>10.3f} [{m['adapt_wrong']:.4f}] {m['adapt_whole']:.3f}"
            f"  {ratio:>14.2f}x of {k}×tasks (reached in {reached}/{args.seeds} seeds)"
        )
    print()
    print(
        f"adaptive stopped on its own after {statistics.fmean(spent_to_stop) / args.tasks:.1f} episodes/task "
        f"(mean over seeds; max-k {args.max_k})"
    )
    print(
        f"misclassification where it stopped: {wrong_edges} wrong of {decided_edges} decided edges "
        f"({wrong_edges / max(decided_edges, 1):.3%}); {tasks_wrong} of {tasks_decided} tasks with a decided "
        f"edge had one wrong ({tasks_wrong / max(tasks_decided, 1):.3%}); promised per task: at most "
        f"{1 - CONFIDENCE:.0%}"
    )
    print()
    print(f"worst case: true pass@{K} on an edge, looked at after every episode, up to {args.worst_max}")
    print(f"{'true pass@2':>12}  {'edge':>4}  {'product rule':>17}  {'fixed-n Jeffreys':>17}")
    rng = random.Random(7)

    def anytime(c: int, n: int) -> tuple[str | None, str | None]:
        d = decide(c, n, LO, HI, K, CONFIDENCE)
        return d.lo_side, d.hi_side

    def naive(c: int, n: int) -> tuple[str | None, str | None]:
        lo, hi = jeffreys_interval(c, n, CONFIDENCE)
        return sides(pass_at_k_of_rate(lo, K), pass_at_k_of_rate(hi, K), LO, HI)

    for q, edge in ((LO, "lo"), (HI, "hi")):
        p = rate_of_pass_at_k(q, K)
        a = worst_case(p, edge, args.worst, args.worst_max, rng, anytime)
        b = worst_case(p, edge, args.worst, args.worst_max, rng, naive)
        print(f"{q:>12g}  {edge:>4}  {a:>16.2%}  {b:>16.2%}")
    print()
    print(f"episodes until decided (one at a time, up to {args.cost_max}; {args.worst // 4} tasks per row)")
    print(f"{'true pass@2':>12}  {'decision':>9}  {'median':>7}  {'p90':>7}  {'undecided at cap':>16}")
    for q in (0.0, 0.05, 0.2, 0.35, 0.5, 0.65, 0.8, 0.95, 1.0):
        p = rate_of_pass_at_k(q, K)
        cost = episodes_to_decide(p, args.worst // 4, args.cost_max, rng)
        ranked = sorted(cost, key=lambda n: math.inf if n is None else n)  # undecided: beyond the cap
        want = "below" if q < LO else "above" if q > HI else "in"
        mid, p90 = ranked[len(ranked) // 2], ranked[int(0.9 * len(ranked))]
        print(
            f"{q:>12g}  {want:>9}  {mid or f'>{args.cost_max}':>7}  {p90 or f'>{args.cost_max}':>7}  "
            f"{sum(n is None for n in cost) / len(cost):>15.0%}"
        )
    print(f"\nwall {time.monotonic() - t0:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
