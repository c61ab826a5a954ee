"""A lower bound, by linear programming, on the episodes per task that ANY adaptive sampler needs to be as
accurate as fixed k episodes per task, under the product's error guarantee.

Run (needs scipy, the ``bench`` extra, which the product does not: ``.venv/bin/pip install -e '.[bench]'``):

    .venv/bin/python bench/bound_adaptive.py [--grid 300] [--nmax 12 20 30 40] [--target-edges X]
        [--joint-nmax 20 30] [--no-k8] [--no-joint] [--alpha A]

``--alpha``: the error allowed per edge and side (default 1 - confidence = 0.1; the product spends 0.09 of
it on its calibrated tests, keeping 0.01 for looks past 500 episodes).

About 5 minutes on two cores, most of it the (g) rows at N_max 160 (`--hold-nmax 40` for a quick look).
Prints tables; asserts nothing.

**Why.** ``bench/bench_adaptive.py`` measures how many episodes the product's adaptive sampler needs to
place as many (task, band edge) pairs on the right side as fixed k = 4 does; the goal was at most half. This
script asks what *any* procedure could do: it minimises the expected episodes per task over every
sequential sampling-and-decision rule that keeps the stated guarantee and is, on average over the task
population, at least as accurate as fixed k. No implementation can beat the number it prints.

**The problem.** One task: episodes are i.i.d. Bernoulli(p), with p drawn from the population of
``bench_adaptive.py`` (45% p = 0, 15% p = 1, 40% uniform on (0, 1)). The band is pass@2 in [0.1, 0.9], both
edges inclusive, i.e. p in [r_lo, r_hi] with r = 1 - sqrt(1 - q). A rule looks at the outcomes one at a
time, may stop or sample again after each, and may declare the side of each edge once, at any time (one
edge may be declared while sampling goes on for the other). Guarantee, at 90%: for each edge and side and
for every p on the wrong side of that declaration (edge point included, by continuity),
P_p(ever declare it) <= 0.1. Accuracy: the expected number of edges declared on the right side per task,
T; the target is T of the product's own fixed-k rule (``confidence.decide`` at n = k), unless
``--target-edges`` overrides it. A cross-task sampler meets the same per-task constraints with a
randomised single-task rule (the other tasks' outcomes are independent of this one's p), and the LP is
convex, so the single-task bound holds per task of the whole batch.

**The linear program.** Passes c in n episodes is sufficient: every sequence reaching (c, n) has
probability p^c (1-p)^(n-c). A (randomised) rule is relaxed to its share of the C(n, c) sequences at each
state: alive x(c, n), continuing s <= x, and per edge undecided u, declared below/above d_b + d_a <= u and
continuing undecided v <= s, v <= u - d_b - d_a, with x(c, n+1) = c/(n+1) s(c-1, n) + (n+1-c)/(n+1) s(c, n)
(and u from v the same way). Then P_p(declare) = sum d C(n, c) p^c (1-p)^(n-c), so the guarantee is linear,
imposed on ``--grid`` points per wrong-side interval (fewer constraints than the truth: still a lower
bound); the cost sum s(c, n) P_prior(reach (c, n)) is E[N]; accuracy is linear in d.

Sampling is cut at N_max in two ways. *Stop by N_max* forbids more episodes: the bound for rules that
never run more than N_max (it can only fall as N_max grows). *Any length* lets mass continue past N_max,
counts one more episode for it and credits each of its undecided edges as declared right for free, with no
error charged: a relaxation of every longer rule, so a valid lower bound for rules of any length (it can
only rise as N_max grows). Where the two meet, the bound has converged. Each value printed is the LP's dual
bound (weak duality with the solver's multipliers, every variable in [0, 1]), valid however inexact the
solver. Checks printed: the fixed-k rule itself is a feasible point costing exactly k, and the optimum's
worst error on a grid 67 times finer than the LP's.

The rule classes: (a) any rule; (b) no "hi: below" within the first 2 episodes (0 of 2 alone has
probability exactly 0.1 at r_hi, the hi edge's whole error budget: after it no other task could ever be
placed below the top edge); (b1) as (b), and every task gets at least one episode (no task skipped); (d)
declarations only where the product's ``decide(c, n)`` places that edge (any stopping rule, looking after
any episodes); (e), for context, at k = 4: the least share beta of its error budget that a rule with E[N] <=
k / 2 must spend at the edge point on declarations made within its first 3 episodes (per (edge, side); the
LP minimises beta, the largest of the four shares, with E[N] <= 2 a constraint).

**(f) and (g): declarations that hold whatever sampling follows.** (a)-(d) charge a rule only for the
declarations it makes on the sequences it goes on sampling, so an optimum may stop a task once one edge
is declared and never pay for what the other edge's test would have said had sampling gone on. The
product cannot: a curator may run more episodes on any task, and the adaptive sampler goes on with a task
whose other edge is open. (f) charges each declaration rule on the full tree of sequences (every
sequence continues) and credits the sampler only with the declarations it is there to see (shares alive
and undecided, within both the declared and the alive share, and where the two cannot miss each other);
(g) adds to (b1) that from the m-th episode on the rule declares exactly what ``decide(c, n)`` places,
wherever still undecided: the product's later decisions kept, only its first m - 1 episodes' rule open
(randomised declarations allowed). What it finds: (f) changes nothing, the optima of (a) and (b1) already
stop declaring after three episodes; (g) at k = 4, with N_max 160, is 0.532x with m = 4 down to 0.507x
with m = 20 at alpha 0.1 (0.550x to 0.522x at the product's 0.09), and still rising with N_max (what
the kept decisions declare past N_max is not charged): keeping the product's later decisions leaves no
room below half, however the first episodes are redesigned.

**The joint bound.** An adaptive batch is ONE run whose accuracy is read at several budgets, so "half the
rollouts of fixed k" must hold at k = 4 and k = 8 together. One task is then sampled up to nested stopping
times tau1 <= tau2 (the batch's budgets 4 lambda and 8 lambda episodes per task become, by
exchangeability, E[tau1] <= 4 lambda and E[tau2] <= 8 lambda), its edges declared by tau1 count for the
k = 4 accuracy and those declared by tau2 for the k = 8 accuracy, and the guarantee covers all its
declarations together. The LP has two alive flows, phase 2 (A, continuing s2) and phase 1 (B <= A,
continuing s1 <= s2), and per edge phase-1 declarations d1 (counted in both accuracies, undecided mass u1
within B) and phase-2-only declarations d2 (counted at k = 8 only; d1 + d2 within u2, the undecided mass
within A; continuing undecided v1 <= v2). It allows d2 where the true rule would have to count it as d1, a
relaxation. lambda* = min lambda subject to E[tau1] <= 4 lambda, E[tau2] <= 8 lambda, acc1 >= T_4,
acc2 >= T_8: lambda* > 0.5 would say that no rule reaches half at both budgets. The same for (4, 16). The
nested rule "fixed 4, then on to fixed 8" (k = 4's declarations at n = 4 final, k = 8's table at n = 8 for
the edges still undecided) is checked as a feasible point (lambda = 1; with T_8 replaced by the accuracy
it reaches, which is above T_8). "Any length" carries over (both tails credited, one more episode each);
at N_max = 40 its LP stalls the solver, hence the default horizons 20 and 30.

What it finds: lambda* for any rule equals the k = 4 bound alone (0.285). The optimum samples past n = 3
only in phase 2, and buys the extra k = 8 accuracy almost without error: phase 1 leaves ~1e-6 of each
budget, and declarations such as "lo: above" after 5 of 5 (probability r_lo^5 = 3.6e-7 at r_lo) or "hi:
below" after 0 of 11 ((1 - r_hi)^11 = 3.2e-6 at r_hi) cost next to nothing. Restricted to what decide()
places (d), lambda* is 0.518, again the k = 4 value alone.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import numpy as np
from scipy import sparse
from scipy.optimize import linprog
from scipy.special import betainc
from scipy.stats import binom

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bandpass.engine.calibration.confidence import decide  # noqa: E402 - imported after the sys.path set-up above

LO, HI, K, CONFIDENCE = 0.1, 0.9, 2, 0.9
ALPHA = 1.0 - CONFIDENCE
P_ZERO, P_ONE, P_UNIFORM = 0.45, 0.15, 0.40  # the task population of bench_adaptive.py
R_LO = 1.0 - (1.0 - LO) ** (1.0 / K)  # p >= R_LO: above the lo edge
R_HI = 1.0 - (1.0 - HI) ** (1.0 / K)  # p <= R_HI: below the hi edge

Edge = Literal["lo", "hi"]
Side = Literal["below", "above"]
Part = Literal["u", "below", "above", "v"]
EDGES: tuple[Edge, Edge] = ("lo", "hi")
SIDES: tuple[Side, Side] = ("below", "above")
PARTS: tuple[Part, ...] = ("u", "below", "above", "v")
Table = dict[int, dict[Edge, Side]]

# Variable blocks, each one value per state (c, n): alive, continuing, then per edge u, d_below, d_above, v.
X, S = 0, 1
N_BLOCKS = 2 + len(PARTS) * len(EDGES)


def block(edge: Edge, part: Part) -> int:
    return 2 + len(PARTS) * EDGES.index(edge) + PARTS.index(part)


@dataclass(frozen=True)
class Rule:
    """A class of rules: the LP's feasible set, narrowed."""

    name: str
    label: str
    early_hi_below: bool = True  # may declare "hi: below" at n <= 2
    min_episodes: int = 0  # every task gets at least this many episodes
    decide_only: bool = False  # declares only what decide(c, n) places at the state
    decide_from: int = 0  # (g): from this many episodes on, declares exactly what decide(c, n) places


RULES = (
    Rule("a", "any rule meeting the guarantee"),
    Rule("b", 'no "hi: below" declared within the first 2 episodes', early_hi_below=False),
    Rule("b1", "as (b), and every task gets at least one episode", early_hi_below=False, min_episodes=1),
    Rule("d", "declares only what the product's decide(c, n) places at that state", decide_only=True),
)


def wrong_interval(edge: Edge, side: Side) -> tuple[float, float]:
    """The closed range of p on the wrong side of declaring ``side`` of ``edge`` (edge point included)."""
    r = R_LO if edge == "lo" else R_HI
    return (r, 1.0) if side == "below" else (0.0, r)


def truly(edge: Edge, side: Side, p: float) -> bool:
    """Whether ``side`` is the true side of ``edge`` at p (the band includes its edges)."""
    if edge == "lo":
        return p < R_LO if side == "below" else p >= R_LO
    return p <= R_HI if side == "below" else p > R_HI


@dataclass(frozen=True)
class Lattice:
    """States (c, n), 0 <= c <= n <= n_max, in order of n then c."""

    n_max: int
    c: np.ndarray
    n: np.ndarray

    @classmethod
    def of(cls, n_max: int) -> Lattice:
        cs = [c for n in range(n_max + 1) for c in range(n + 1)]
        ns = [n for n in range(n_max + 1) for _ in range(n + 1)]
        return cls(n_max, np.array(cs), np.array(ns))

    @property
    def size(self) -> int:
        return len(self.c)

    def at(self, c: int, n: int) -> int:
        return n * (n + 1) // 2 + c

    def var(self, blk: int, states: np.ndarray) -> np.ndarray:
        return blk * self.size + states

    def mass(self) -> np.ndarray:
        """P_prior(the first n episodes have c passes): C(n, c) E_prior[p^c (1-p)^(n-c)]."""
        return P_ZERO * (self.c == 0) + P_ONE * (self.c == self.n) + P_UNIFORM / (self.n + 1)

    def right_mass(self, edge: Edge, side: Side) -> np.ndarray:
        """P_prior(c passes in n, and ``side`` is ``edge``'s true side): atoms, then the uniform part."""
        r = R_LO if edge == "lo" else R_HI
        below_r = betainc(self.c + 1, self.n - self.c + 1, r)  # P(p < r | c of n) under the uniform part
        uniform = below_r if side == "below" else 1.0 - below_r
        at_zero = P_ZERO * (self.c == 0) * truly(edge, side, 0.0)
        at_one = P_ONE * (self.c == self.n) * truly(edge, side, 1.0)
        atoms = at_zero + at_one
        return atoms + P_UNIFORM * uniform / (self.n + 1)


def placed_edges(c: int, n: int) -> dict[Edge, Side]:
    """The edges the product's decide() places for c passes in n episodes."""
    d = decide(c, n, LO, HI, K, CONFIDENCE)
    out: dict[Edge, Side] = {}
    if d.lo_side is not None:
        out["lo"] = d.lo_side
    if d.hi_side is not None:
        out["hi"] = d.hi_side
    return out


def fixed_k_table(k: int) -> Table:
    """The product's fixed-k decisions: for each count of passes in k episodes, the edges it places."""
    return {c: placed_edges(c, k) for c in range(k + 1)}


def table_accuracy(table: Table, k: int) -> float:
    """T: expected edges placed on the right side per task by a fixed-k table."""
    lat = Lattice.of(k)
    return sum(
        float(lat.right_mass(edge, side)[lat.at(c, k)])
        for c, placed in table.items()
        for edge, side in placed.items()
    )


@dataclass
class Program:
    """The LP in scipy's form: minimise cost @ z, a_ub z <= b_ub, a_eq z = b_eq, 0 <= z <= upper."""

    lat: Lattice
    cost: np.ndarray
    a_ub: sparse.csr_matrix
    b_ub: np.ndarray
    a_eq: sparse.csr_matrix
    b_eq: np.ndarray
    upper: np.ndarray
    accuracy: np.ndarray  # accuracy @ z: expected edges declared right (its negative is an a_ub row)

    def dual_bound(self, y_eq: np.ndarray, y_ub: np.ndarray) -> float:
        """Weak duality: a lower bound on the LP's minimum from any multipliers (y_ub clipped to <= 0)."""
        y_ub = np.minimum(y_ub, 0.0)
        reduced = self.cost - self.a_eq.T @ y_eq - self.a_ub.T @ y_ub
        return float(self.b_eq @ y_eq + self.b_ub @ y_ub + np.minimum(reduced, 0.0) @ self.upper)

    def violation(self, z: np.ndarray) -> float:
        """The largest violation of any constraint at ``z`` (0 for a feasible point)."""
        return max(
            float(np.max(np.abs(self.a_eq @ z - self.b_eq))),
            float(np.max(self.a_ub @ z - self.b_ub)),
            float(np.max(z - self.upper)),
            float(np.max(-z)),
            0.0,
        )


def error_grid(edge: Edge, side: Side, points: int) -> np.ndarray:
    lo, hi = wrong_interval(edge, side)
    return np.linspace(lo, hi, points)


def error_rows(
    lat: Lattice, edge: Edge, side: Side, grid: int, drop: float
) -> tuple[np.ndarray, sparse.coo_matrix]:
    """The grid of wrong-side pass rates for (edge, side) and, per grid point and state, the probability
    C(n, c) p^c (1-p)^(n-c) of reaching that state: the guarantee's coefficients. Dropping negligible ones
    only loosens a <= constraint, so the bound stays valid."""
    p = error_grid(edge, side, grid)
    pmf = binom.pmf(lat.c[None, :], lat.n[None, :], p[:, None])
    pmf[pmf < drop] = 0.0
    return p, sparse.coo_matrix(pmf)


def flow_equalities(
    lat: Lattice, states: np.ndarray, size: int, nvar: int, pairs: list[tuple[int, int]]
) -> tuple[sparse.csr_matrix, list[float]]:
    """The flow equations of each (into, out_of) pair of blocks: into(0, 0) = 1 and
    into(c, n) = c/n out_of(c-1, n-1) + (n-c)/n out_of(c, n-1) (shares of the C(n, c) sequences)."""
    rows: list[int] = []
    cols: list[int] = []
    vals: list[float] = []
    b_eq: list[float] = []
    for into, out_of in pairs:
        for i in states:
            c, n = int(lat.c[i]), int(lat.n[i])
            row = len(b_eq)
            terms = [(into * size + i, 1.0)]
            if c > 0:
                terms.append((out_of * size + lat.at(c - 1, n - 1), -c / n))
            if c < n:
                terms.append((out_of * size + lat.at(c, n - 1), -(n - c) / n))
            for col, val in terms:
                rows.append(row)
                cols.append(col)
                vals.append(val)
            b_eq.append(1.0 if n == 0 else 0.0)
    return sparse.csr_matrix((vals, (rows, cols)), shape=(len(b_eq), nvar)), b_eq


def _skeleton(
    n_max: int, blocks: int
) -> tuple[Lattice, int, int, np.ndarray, np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """What every single-task LP starts from: the lattice, its sizes, the prior mass of each state, the
    last layer, the cost (E[N] = sum_n P(N > n), so continuing at a state costs its mass; past n_max at
    least one more episode) and the upper bounds, all 1 so far."""
    lat = Lattice.of(n_max)
    size, nvar = lat.size, blocks * lat.size
    states = np.arange(size)
    mass = lat.mass()
    cost = np.zeros(nvar)
    cost[lat.var(S, states)] = mass
    return lat, size, nvar, states, mass, np.flatnonzero(lat.n == n_max), cost, np.ones(nvar)


def build(
    n_max: int, target: float, rule: Rule, *, any_length: bool, grid: int, drop: float = 1e-14
) -> Program:
    """The LP for ``rule`` sampling up to ``n_max`` episodes (or past it, relaxed, when ``any_length``)."""
    lat, size, nvar, states, mass, last, cost, upper = _skeleton(n_max, N_BLOCKS)
    if not any_length:
        upper[lat.var(S, last)] = 0.0
        for edge in EDGES:
            upper[lat.var(block(edge, "v"), last)] = 0.0
    if not rule.early_hi_below:
        upper[lat.var(block("hi", "below"), np.flatnonzero(lat.n <= 2))] = 0.0
    if rule.decide_only:
        for i in states:
            placed = placed_edges(int(lat.c[i]), int(lat.n[i]))
            for edge in EDGES:
                for side in SIDES:
                    if placed.get(edge) != side:
                        upper[lat.var(block(edge, side), np.array([i]))] = 0.0

    pairs = [(X, S)] + [(block(e, "u"), block(e, "v")) for e in EDGES]
    a_eq, b_eq = flow_equalities(lat, states, size, nvar, pairs)

    # Per state: sum_blk coef * blk(c, n) <= 0.
    per_state = [{S: 1.0, X: -1.0}]  # continue at most the alive mass
    for edge in EDGES:
        u, db, da, v = (block(edge, part) for part in PARTS)
        per_state += [
            {db: 1.0, da: 1.0, u: -1.0},  # declare at most the undecided mass
            {v: 1.0, S: -1.0},  # undecided and continuing <= continuing
            {v: 1.0, db: 1.0, da: 1.0, u: -1.0},  # undecided and continuing <= undecided, not declared
        ]
    eye = sparse.identity(size, format="csr")
    ub_blocks = [
        sparse.hstack([eye * t.get(b, 0.0) for b in range(N_BLOCKS)], format="csr") for t in per_state
    ]
    b_ub = [np.zeros(size) for _ in per_state]
    if rule.min_episodes:
        early = sparse.diags((lat.n < rule.min_episodes).astype(float), format="csr")
        zero = sparse.csr_matrix((size, size))
        ub_blocks.append(
            sparse.hstack([early if b == X else -early if b == S else zero for b in range(N_BLOCKS)])
        )
        b_ub.append(np.zeros(size))  # x - s <= 0 where n < min_episodes: nobody stops there

    # The guarantee: sum_states d(c, n) C(n, c) p^c (1-p)^(n-c) <= alpha at every grid p on the wrong side.
    # Dropping negligible coefficients only loosens a <= constraint, so the bound stays valid.
    for edge in EDGES:
        for side in SIDES:
            p, coo = error_rows(lat, edge, side, grid, drop)
            cols_d = lat.var(block(edge, side), coo.col)
            ub_blocks.append(sparse.csr_matrix((coo.data, (coo.row, cols_d)), shape=(len(p), nvar)))
            b_ub.append(np.full(len(p), ALPHA))

    # Accuracy: right declarations (and, when any_length, free right credit past n_max) >= target.
    acc = np.zeros(nvar)
    for edge in EDGES:
        for side in SIDES:
            acc[lat.var(block(edge, side), states)] = lat.right_mass(edge, side)
        if any_length:
            acc[lat.var(block(edge, "v"), last)] = mass[last]
    ub_blocks.append(sparse.csr_matrix(-acc))
    b_ub.append(np.array([-target]))

    a_ub = sparse.vstack(ub_blocks, format="csr")
    return Program(lat, cost, a_ub, np.concatenate(b_ub), a_eq, np.array(b_eq), upper, acc)


def fixed_k_point(lat: Lattice, table: Table, k: int) -> np.ndarray:
    """The fixed-k rule as a point of the LP: sample every task k times, then place the table's edges."""
    z = np.zeros(N_BLOCKS * lat.size)
    for i in np.flatnonzero(lat.n <= k):
        c, n, at = int(lat.c[i]), int(lat.n[i]), np.array([i])
        z[lat.var(X, at)] = 1.0
        z[lat.var(S, at)] = float(n < k)
        for edge in EDGES:
            z[lat.var(block(edge, "u"), at)] = 1.0
            z[lat.var(block(edge, "v"), at)] = float(n < k)
            if n == k and edge in table[c]:
                z[lat.var(block(edge, table[c][edge]), at)] = 1.0
    return z


@dataclass
class Solved:
    prog: Program
    z: np.ndarray
    bound: float


def solve(prog: Program) -> Solved:
    res = linprog(
        prog.cost,
        A_ub=prog.a_ub,
        b_ub=prog.b_ub,
        A_eq=prog.a_eq,
        b_eq=prog.b_eq,
        bounds=np.column_stack([np.zeros_like(prog.upper), prog.upper]),
        method="highs",
    )
    if res.status != 0:
        raise RuntimeError(f"LP not solved: {res.message}")
    return Solved(prog, res.x, prog.dual_bound(res.eqlin.marginals, res.ineqlin.marginals))


def error_of(sol: Solved, edge: Edge, side: Side, p: np.ndarray) -> np.ndarray:
    """P_p(the optimum declares ``side`` of ``edge``) at each p."""
    lat = sol.prog.lat
    d = sol.z[lat.var(block(edge, side), np.arange(lat.size))]
    live = d > 1e-12
    return binom.pmf(lat.c[None, live], lat.n[None, live], p[:, None]) @ d[live]


def worst_error(sol: Solved, points: int = 20001) -> float:
    """The optimum's largest P_p(wrong declaration) on a grid much finer than the LP's."""
    return max(
        float(np.max(error_of(sol, edge, side, error_grid(edge, side, points))))
        for edge in EDGES
        for side in SIDES
    )


def describe(sol: Solved, upto: int = 3) -> None:
    """The optimum's first moves: per state, the share of its sequences alive, continuing and declaring."""
    lat, z = sol.prog.lat, sol.z

    def val(blk: int, i: int) -> float:
        v = float(z[blk * lat.size + i])
        return 0.0 if abs(v) < 5e-7 else v

    print("      state  alive  cont. | lo: below above | hi: below above   (shares of the state's sequences)")
    for i in np.flatnonzero(lat.n <= upto):
        if val(X, i) == 0.0:
            continue
        lo = f"{val(block('lo', 'below'), i):.3f} {val(block('lo', 'above'), i):.3f}"
        hi = f"{val(block('hi', 'below'), i):.3f} {val(block('hi', 'above'), i):.3f}"
        print(f"      {lat.c[i]}/{lat.n[i]:<4d} {val(X, i):6.3f} {val(S, i):6.3f} |     {lo} |     {hi}")
    at_edge = ", ".join(
        f"{edge} {side} {float(error_of(sol, edge, side, np.array([R_LO if edge == 'lo' else R_HI]))[0]):.4f}"
        for edge in EDGES
        for side in SIDES
    )
    mass = lat.mass()
    alive = ", ".join(
        f"n={n} {float(mass[lat.n == n] @ z[lat.var(S, np.flatnonzero(lat.n == n))]):.3f}"
        for n in (1, 2, 3, 4, 8)
        if n <= lat.n_max
    )
    print(f"      error spent at the edge point: {at_edge}\n      P(task gets more than n episodes): {alive}")


def run_target(
    k: int, target: float, rules: tuple[Rule, ...], n_maxes: list[int], grid: int, show: bool
) -> None:
    table = fixed_k_table(k)
    print(f"\nTarget T = {target:.6f} right edges per task (fixed k = {k}; at most 2)")
    for rule in rules:
        print(f"  ({rule.name}) {rule.label}")
        print(
            "    N_max | stop by N_max: E[N]   / k | any length: E[N]   / k | worst error "
            "| fixed-k point: cost, T, violation | s"
        )
        sol: Solved | None = None
        for n_max in n_maxes:
            start = time.perf_counter()
            cells: list[str] = []
            for any_length in (False, True):
                prog = build(n_max, target, rule, any_length=any_length, grid=grid)
                solved = solve(prog)
                cells.append(f"{solved.bound:9.4f} {solved.bound / k:6.3f}")
                if not any_length:
                    sol = solved
            assert sol is not None
            z = fixed_k_point(sol.prog.lat, table, k)
            point = f"{sol.prog.cost @ z:6.3f} {sol.prog.accuracy @ z:.4f} {sol.prog.violation(z):.0e}"
            print(
                f"    {n_max:5d} |     {cells[0]}     |   {cells[1]}     | {worst_error(sol):11.4f} |"
                f" {point:>33s} | {time.perf_counter() - start:4.1f}"
            )
        if show and sol is not None:
            print(f"    The optimum (stop by N_max = {sol.prog.lat.n_max}) up to n = 3:")
            describe(sol)


def early_budget_program(prog: Program, episodes: float, within: int) -> Program:
    """``prog`` turned round: minimise beta, the share of each (edge, side)'s error budget that declarations
    within the first ``within`` episodes may spend at the edge point, subject to E[N] <= ``episodes``."""
    lat, size = prog.lat, prog.lat.size
    nvar = len(prog.cost) + 1
    beta = nvar - 1
    early = np.flatnonzero(lat.n <= within)
    rows = [sparse.hstack([prog.a_ub, sparse.csr_matrix((prog.a_ub.shape[0], 1))], format="csr")]
    b_ub = [prog.b_ub]
    spend = np.append(prog.cost, 0.0)  # E[N] <= episodes
    rows.append(sparse.csr_matrix(spend))
    b_ub.append(np.array([episodes]))
    for edge in EDGES:
        r = R_LO if edge == "lo" else R_HI
        for side in SIDES:
            row = np.zeros(nvar)
            row[lat.var(block(edge, side), early)] = binom.pmf(lat.c[early], lat.n[early], r)
            row[beta] = -ALPHA
            rows.append(sparse.csr_matrix(row))
            b_ub.append(np.zeros(1))
    cost = np.zeros(nvar)
    cost[beta] = 1.0
    a_eq = sparse.hstack([prog.a_eq, sparse.csr_matrix((prog.a_eq.shape[0], 1))], format="csr")
    upper = np.append(prog.upper, 1.0)
    del size
    return Program(
        lat,
        cost,
        sparse.vstack(rows, format="csr"),
        np.concatenate(b_ub),
        a_eq,
        prog.b_eq,
        upper,
        np.append(prog.accuracy, 0.0),
    )


def run_early_budget(
    k: int, target: float, n_maxes: list[int], grid: int, episodes: float, within: int
) -> None:
    print(
        f"  (e) any rule with E[N] <= {episodes:g} (= {episodes / k:g} k) reaching T = {target:.6f}: the "
        "least share beta of each (edge, side)'s\n      error budget it must spend, at the edge point, on "
        f"declarations made within its first {within} episodes"
    )
    print("    N_max | stop by N_max: beta | any length: beta | s")
    for n_max in n_maxes:
        start = time.perf_counter()
        cells = []
        for any_length in (False, True):
            prog = build(n_max, target, RULES[0], any_length=any_length, grid=grid)
            solved = solve(early_budget_program(prog, episodes, within))
            cells.append(f"{solved.bound:7.4f}")
        print(
            f"    {n_max:5d} |      {cells[0]}        |    {cells[1]}       "
            f"| {time.perf_counter() - start:4.1f}"
        )


# ---------------------------------------------------------------------------------------------------------
# (f) Declarations that hold whatever sampling follows: the product's promise.

# Blocks, one value per state: alive X and continuing S (the sampler), then per edge the declaration
# process on the FULL tree (every sequence continues, whether or not the sampler does): undecided u,
# declared below/above, undecided after (w = u - below - above); and the sampler's view of it: alive and
# still undecided a, the declarations it sees (seen below/above), alive, undecided and continuing q.
HPARTS = ("u", "below", "above", "w", "a", "seen_below", "seen_above", "q")
H_BLOCKS = 2 + len(HPARTS) * len(EDGES)


def hblock(edge: Edge, part: str) -> int:
    return 2 + len(HPARTS) * EDGES.index(edge) + HPARTS.index(part)


def build_holding(
    n_max: int, target: float, grid: int, rule: Rule = RULES[0], drop: float = 1e-14
) -> Program:
    """The LP for rules whose declarations stay within the guarantee however long sampling goes on.

    The rules of (a)-(d) are charged only for declarations on the sequences they go on sampling, so they may
    stop a task after one edge is declared and never pay for what the other edge's test would have done on
    it. The product cannot: a curator may run more episodes on any task, and the adaptive sampler goes on
    sampling a task with one edge open. So here each declaration rule lives on the full tree of sequences
    (every sequence continues) and is charged there, and the sampler is credited with the declarations it
    is there to see: of a state's sequences, those alive and undecided (a <= u) may be declared (seen <=
    declared), must be where the declared share cannot miss them (seen >= declared + a - u), and continue
    undecided only while sampled (q <= S, q <= a - seen). Shares, not sequences: a relaxation, so a lower
    bound. Sampling stops by N_max and declarations past it are not charged; the bound converges as N_max
    grows.
    """
    lat, size, nvar, states, mass, last, cost, upper = _skeleton(n_max, H_BLOCKS)
    upper[lat.var(S, last)] = 0.0
    pairs = [(X, S)]
    for e in EDGES:
        pairs += [(hblock(e, "u"), hblock(e, "w")), (hblock(e, "a"), hblock(e, "q"))]
        upper[lat.var(hblock(e, "q"), last)] = 0.0
    if not rule.early_hi_below:
        upper[lat.var(hblock("hi", "below"), np.flatnonzero(lat.n <= 2))] = 0.0
    forced: list[tuple[int, int]] = []  # (declaration block, state) declared wherever still undecided
    for i in states:
        if not (rule.decide_only or (rule.decide_from and lat.n[i] >= rule.decide_from)):
            continue
        placed = placed_edges(int(lat.c[i]), int(lat.n[i]))
        for edge in EDGES:
            for side in SIDES:
                if placed.get(edge) != side:
                    upper[lat.var(hblock(edge, side), np.array([i]))] = 0.0
                elif rule.decide_from:
                    forced.append((hblock(edge, side), int(i)))
    a_flow, b_flow = flow_equalities(lat, states, size, nvar, pairs)
    eye = sparse.identity(size, format="csr")
    zero = sparse.csr_matrix((size, size))

    def rows(terms: dict[int, float]) -> sparse.csr_matrix:
        return sparse.hstack([eye * terms[b] if b in terms else zero for b in range(H_BLOCKS)], format="csr")

    eq_blocks, b_eq = [a_flow], [np.array(b_flow)]
    ub_blocks, b_ub = [rows({S: 1.0, X: -1.0})], [np.zeros(size)]
    if rule.min_episodes:
        early = sparse.diags((lat.n < rule.min_episodes).astype(float), format="csr")
        ub_blocks.append(
            sparse.hstack([early if b == X else -early if b == S else zero for b in range(H_BLOCKS)])
        )
        b_ub.append(np.zeros(size))
    for edge in EDGES:
        u, db, da, w, a, sb, sa, q = (hblock(edge, part) for part in HPARTS)
        eq_blocks.append(rows({w: 1.0, u: -1.0, db: 1.0, da: 1.0}))  # w = u - below - above
        b_eq.append(np.zeros(size))
        for terms in (
            {db: 1.0, da: 1.0, u: -1.0},  # declare at most the undecided
            {a: 1.0, u: -1.0},  # alive and undecided: undecided
            {sb: 1.0, db: -1.0},  # seen: declared
            {sa: 1.0, da: -1.0},
            {db: 1.0, da: 1.0, a: 1.0, u: -1.0, sb: -1.0, sa: -1.0},  # seen >= declared + a - u
            {q: 1.0, S: -1.0},  # continuing undecided: continuing
            {q: 1.0, a: -1.0, sb: 1.0, sa: 1.0},  # ... and not declared
        ):
            ub_blocks.append(rows(terms))
            b_ub.append(np.zeros(size))
        for blk, i in forced:
            if blk in (db, da):  # undecided <= declared: every undecided sequence there is declared
                row = np.zeros(nvar)
                row[lat.var(u, np.array([i]))] = 1.0
                row[lat.var(blk, np.array([i]))] = -1.0
                ub_blocks.append(sparse.csr_matrix(row))
                b_ub.append(np.zeros(1))
        for side in SIDES:
            p, coo = error_rows(lat, edge, side, grid, drop)
            cols_d = lat.var(db if side == "below" else da, coo.col)
            ub_blocks.append(sparse.csr_matrix((coo.data, (coo.row, cols_d)), shape=(len(p), nvar)))
            b_ub.append(np.full(len(p), ALPHA))
    acc = np.zeros(nvar)
    for edge in EDGES:
        for side in SIDES:
            acc[lat.var(hblock(edge, "seen_" + side), states)] = lat.right_mass(edge, side)
    ub_blocks.append(sparse.csr_matrix(-acc))
    b_ub.append(np.array([-target]))
    return Program(
        lat,
        cost,
        sparse.vstack(ub_blocks, format="csr"),
        np.concatenate(b_ub),
        sparse.vstack(eq_blocks, format="csr"),
        np.concatenate(b_eq),
        upper,
        acc,
    )


def run_holding(
    k: int, target: float, n_max: int, hold_nmax: list[int], grid: int, keep_from: tuple[int, ...]
) -> None:
    """(f) and (g): the floor when declarations are charged however long sampling goes on, and when the
    product's own decisions are kept from some episode on (only the first few episodes' rule redesigned)."""
    print(
        "  (f) as (a) / (b1), each declaration charged on every sequence, sampled or not (a curator may run\n"
        "      more episodes on any task; the sampler goes on with a task whose other edge is open)\n"
        "  (g) as (b1), and from the m-th episode on declaring exactly what decide(c, n) places, wherever\n"
        "      still undecided: the product's later decisions kept, its first m - 1 episodes redesigned.\n"
        "      Declarations past N_max go uncharged, so (g) rises with N_max (each value a lower bound)"
    )
    for rule in (RULES[0], RULES[2]):
        start = time.perf_counter()
        sol = solve(build_holding(n_max, target, grid, rule))
        print(
            f"    (f) as ({rule.name}), N_max = {n_max}: {sol.bound:6.4f} {sol.bound / k:6.3f}"
            f" | {time.perf_counter() - start:4.1f} s"
        )
    print("    (g) E[N] / k for m = " + ", ".join(str(m) for m in keep_from))
    for horizon in hold_nmax:
        start = time.perf_counter()
        bounds = [
            solve(build_holding(horizon, target, grid, dataclasses.replace(RULES[2], decide_from=m))).bound
            for m in keep_from
        ]
        cells = "  ".join(f"{b / k:6.3f}" for b in bounds)
        print(f"      N_max = {horizon:3d}: {cells} | {time.perf_counter() - start:5.1f} s")


# ---------------------------------------------------------------------------------------------------------
# The joint bound: ONE rule read at two budgets (k1 = 4 and k2 = 8 episodes per task at fixed k).

# Joint blocks, one value per state: phase-2 alive A and continuing s2, phase-1 alive B and continuing s1,
# then per edge: phase-1 undecided u1, declarations d1 below/above (count for both accuracies),
# continuing undecided v1; phase-2 undecided u2, phase-2-only declarations d2 below/above (count for the
# k2 accuracy only), continuing undecided v2. One scalar variable, lambda, follows the blocks.
A2, S2, B1, S1 = 0, 1, 2, 3
JPARTS = ("u1", "b1", "a1", "v1", "u2", "b2", "a2", "v2")
J_BLOCKS = 4 + len(JPARTS) * len(EDGES)
LAMBDA_MAX = 2.0  # lambda's upper bound in the LP: the nested fixed-k rule has lambda = 1


def jblock(edge: Edge, part: str) -> int:
    return 4 + len(JPARTS) * EDGES.index(edge) + JPARTS.index(part)


def jdecl(edge: Edge, side: Side, phase: int) -> int:
    return jblock(edge, ("b" if side == "below" else "a") + str(phase))


@dataclass
class Joint:
    """The joint LP (minimise lambda) and the linear forms read off its points."""

    prog: Program
    acc1: np.ndarray  # expected right edges per task declared by tau1 (its negative is an a_ub row)
    acc2: np.ndarray  # ... by tau2
    spend1: np.ndarray  # E[tau1]
    spend2: np.ndarray  # E[tau2]
    lam: int  # lambda's index


def build_joint(
    n_max: int,
    ks: tuple[int, int],
    targets: tuple[float, float],
    *,
    decide_only: bool,
    any_length: bool,
    grid: int,
    drop: float = 1e-14,
) -> Joint:
    """min lambda: one rule with nested stopping times tau1 <= tau2, E[tau_i] <= k_i lambda, acc_i >= T_i."""
    lat = Lattice.of(n_max)
    size = lat.size
    nvar = J_BLOCKS * size + 1
    lam = nvar - 1
    states = np.arange(size)
    mass = lat.mass()
    last = np.flatnonzero(lat.n == n_max)
    cost = np.zeros(nvar)
    cost[lam] = 1.0
    upper = np.ones(nvar)
    upper[lam] = LAMBDA_MAX
    if not any_length:
        for blk in [S1, S2] + [jblock(e, v) for e in EDGES for v in ("v1", "v2")]:
            upper[blk * size + last] = 0.0
    if decide_only:
        for i in states:
            placed = placed_edges(int(lat.c[i]), int(lat.n[i]))
            for edge in EDGES:
                for side in SIDES:
                    if placed.get(edge) != side:
                        for phase in (1, 2):
                            upper[jdecl(edge, side, phase) * size + i] = 0.0

    pairs = [(A2, S2), (B1, S1)] + [
        (jblock(e, "u" + ph), jblock(e, "v" + ph)) for e in EDGES for ph in ("1", "2")
    ]
    a_eq, b_eq = flow_equalities(lat, states, size, nvar, pairs)

    per_state: list[dict[int, float]] = [
        {S2: 1.0, A2: -1.0},  # s2 <= A
        {S1: 1.0, B1: -1.0},  # s1 <= B
        {S1: 1.0, S2: -1.0},  # tau1 > n implies tau2 > n
        {B1: 1.0, A2: -1.0},  # B <= A (implied by the flows; kept for clarity)
    ]
    for edge in EDGES:
        u1, b1, a1, v1, u2, b2, a2, v2 = (jblock(edge, part) for part in JPARTS)
        per_state += [
            {b1: 1.0, a1: 1.0, u1: -1.0},  # sum d1 <= u1
            {b1: 1.0, a1: 1.0, b2: 1.0, a2: 1.0, u2: -1.0},  # sum (d1 + d2) <= u2
            {v1: 1.0, S1: -1.0},  # v1 <= s1
            {v1: 1.0, b1: 1.0, a1: 1.0, u1: -1.0},  # v1 <= u1 - sum d1
            {v2: 1.0, S2: -1.0},  # v2 <= s2
            {v2: 1.0, b1: 1.0, a1: 1.0, b2: 1.0, a2: 1.0, u2: -1.0},  # v2 <= u2 - sum (d1 + d2)
            {v1: 1.0, v2: -1.0},  # v1 <= v2
            {u1: 1.0, u2: -1.0},  # u1 <= u2 (implied)
        ]
    eye = sparse.identity(size, format="csr")
    lam_col = sparse.csr_matrix((size, 1))
    ub_blocks = [
        sparse.hstack([eye * t.get(b, 0.0) for b in range(J_BLOCKS)] + [lam_col], format="csr")
        for t in per_state
    ]
    b_ub = [np.zeros(size) for _ in per_state]

    # The guarantee over ALL declarations, d1 + d2, at every grid p on the wrong side.
    for edge in EDGES:
        for side in SIDES:
            p, coo = error_rows(lat, edge, side, grid, drop)
            for phase in (1, 2):
                cols_d = jdecl(edge, side, phase) * size + coo.col
                ub_blocks.append(sparse.csr_matrix((coo.data, (coo.row, cols_d)), shape=(len(p), nvar)))
                b_ub.append(np.full(len(p), ALPHA if phase == 1 else 0.0))
    # (the two phases' rows for one p are summed below: stacking them and adding is simpler than
    # building one matrix with two column sets)
    n_err = 2 * len(EDGES) * len(SIDES)
    err = ub_blocks[-n_err:]
    del ub_blocks[-n_err:], b_ub[-n_err:]
    for j in range(0, n_err, 2):
        ub_blocks.append(err[j] + err[j + 1])
        b_ub.append(np.full(err[j].shape[0], ALPHA))

    spend1, spend2 = np.zeros(nvar), np.zeros(nvar)
    spend1[S1 * size + states] = mass
    spend2[S2 * size + states] = mass
    acc1, acc2 = np.zeros(nvar), np.zeros(nvar)
    for edge in EDGES:
        for side in SIDES:
            right = lat.right_mass(edge, side)
            acc1[jdecl(edge, side, 1) * size + states] = right
            acc2[jdecl(edge, side, 1) * size + states] = right
            acc2[jdecl(edge, side, 2) * size + states] = right
        if any_length:  # mass sampled past n_max: one more episode (in spend) and every undecided edge right
            acc1[jblock(edge, "v1") * size + last] = mass[last]
            acc2[jblock(edge, "v2") * size + last] = mass[last]
    for k, spend in zip(ks, (spend1, spend2), strict=True):
        row = spend.copy()
        row[lam] = -float(k)
        ub_blocks.append(sparse.csr_matrix(row))  # E[tau_i] <= k_i lambda
        b_ub.append(np.zeros(1))
    for target, acc in zip(targets, (acc1, acc2), strict=True):
        ub_blocks.append(sparse.csr_matrix(-acc))
        b_ub.append(np.array([-target]))

    a_ub = sparse.vstack(ub_blocks, format="csr")
    prog = Program(lat, cost, a_ub, np.concatenate(b_ub), a_eq, np.array(b_eq), upper, acc1)
    return Joint(prog, acc1, acc2, spend1, spend2, lam)


def nested_point(joint: Joint, ks: tuple[int, int]) -> np.ndarray:
    """Fixed k1, then on to fixed k2: tau1 = k1, tau2 = k2; at n = k1 place k1's table (final), at n = k2
    place k2's table for the edges still undecided."""
    lat, (k1, k2) = joint.prog.lat, ks
    size = lat.size
    z = np.zeros(J_BLOCKS * size + 1)
    z[joint.lam] = 1.0
    tables = {k1: fixed_k_table(k1), k2: fixed_k_table(k2)}
    inside = np.flatnonzero(lat.n <= k2)
    z[A2 * size + inside] = 1.0
    z[S2 * size + inside] = (lat.n[inside] < k2).astype(float)
    first = np.flatnonzero(lat.n <= k1)
    z[B1 * size + first] = 1.0
    z[S1 * size + first] = (lat.n[first] < k1).astype(float)
    for edge in EDGES:
        u1, v1, u2, v2 = (jblock(edge, part) for part in ("u1", "v1", "u2", "v2"))
        z[u1 * size + first] = 1.0
        z[v1 * size + first] = (lat.n[first] < k1).astype(float)
        for i in inside:  # states in order of n: u2 from the v2 of the level before, as in the LP's flow
            c, n = int(lat.c[i]), int(lat.n[i])
            if n == 0:
                u = 1.0
            else:
                u = (c / n) * z[v2 * size + lat.at(c - 1, n - 1)] if c > 0 else 0.0
                u += ((n - c) / n) * z[v2 * size + lat.at(c, n - 1)] if c < n else 0.0
            z[u2 * size + i] = u
            declared = 0.0
            if n in (k1, k2) and edge in tables[n][c]:
                declared = 1.0 if n == k1 else u
                z[jdecl(edge, tables[n][c][edge], 1 if n == k1 else 2) * size + i] = declared
            z[v2 * size + i] = (u - declared) if n < k2 else 0.0
    return z


def run_joint(ks: tuple[int, int], rule: Rule, n_maxes: list[int], grid: int, show: bool) -> None:
    t1, t2 = (table_accuracy(fixed_k_table(k), k) for k in ks)
    print(f"  ({rule.name}) {rule.label}; T_{ks[0]} = {t1:.6f}, T_{ks[1]} = {t2:.6f}")
    print(
        "    N_max | lambda*: stop by N_max  any length | optimum: E[tau1] E[tau2]  acc1   acc2  "
        "| worst error | nested point: acc2, violation | s"
    )
    joint: Joint | None = None
    z = np.zeros(0)
    for n_max in n_maxes:
        start = time.perf_counter()
        cells: list[str] = []
        for any_length in (True, False):  # the 'stop by' optimum is the one described
            joint = build_joint(
                n_max, ks, (t1, t2), decide_only=rule.decide_only, any_length=any_length, grid=grid
            )
            solved = solve(joint.prog)
            cells.insert(0, f"{solved.bound:8.4f}")
            z = solved.z
        assert joint is not None
        # The nested fixed-k rule as a feasibility check, with T_k2 replaced by what it reaches.
        point = nested_point(joint, ks)
        reached = float(joint.acc2 @ point)
        check = build_joint(
            n_max, ks, (t1, reached), decide_only=rule.decide_only, any_length=False, grid=grid
        )
        viol = check.prog.violation(point)
        opt = f"{joint.spend1 @ z:7.3f} {joint.spend2 @ z:7.3f} {joint.acc1 @ z:.4f} {joint.acc2 @ z:.4f}"
        print(
            f"    {n_max:5d} |         {cells[0]}   {cells[1]} |        {opt} |"
            f" {worst_joint_error(joint, z):11.6f} |        {reached:.4f} {viol:.0e}  | "
            f"{time.perf_counter() - start:4.1f}"
        )
    if show and joint is not None:
        describe_joint(joint, z)


def joint_error(joint: Joint, z: np.ndarray, edge: Edge, side: Side, p: np.ndarray) -> np.ndarray:
    lat = joint.prog.lat
    idx = np.arange(lat.size)
    d = z[jdecl(edge, side, 1) * lat.size + idx] + z[jdecl(edge, side, 2) * lat.size + idx]
    live = d > 1e-12
    return binom.pmf(lat.c[None, live], lat.n[None, live], p[:, None]) @ d[live]


def worst_joint_error(joint: Joint, z: np.ndarray, points: int = 20001) -> float:
    return max(
        float(np.max(joint_error(joint, z, edge, side, error_grid(edge, side, points))))
        for edge in EDGES
        for side in SIDES
    )


def describe_joint(joint: Joint, z: np.ndarray, upto: int = 4) -> None:
    lat, size = joint.prog.lat, joint.prog.lat.size

    def val(blk: int, i: int) -> float:
        v = float(z[blk * size + i])
        return 0.0 if abs(v) < 5e-7 else v

    print(f"    The optimum (stop by N_max = {lat.n_max}) up to n = {upto}; d1 / d2 per edge and side:")
    print("      state  A      s2     B      s1    | lo: below     above       | hi: below     above")
    for i in np.flatnonzero(lat.n <= upto):
        if val(A2, i) == 0.0:
            continue
        parts = []
        for edge in EDGES:
            parts.append(
                " ".join(
                    f"{val(jdecl(edge, side, 1), i):.3f}/{val(jdecl(edge, side, 2), i):.3f}" for side in SIDES
                )
            )
        head = " ".join(f"{val(b, i):6.3f}" for b in (A2, S2, B1, S1))
        print(f"      {lat.c[i]}/{lat.n[i]:<4d} {head} |     {parts[0]} |     {parts[1]}")
    at_edge = []
    for edge in EDGES:
        r = np.array([R_LO if edge == "lo" else R_HI])
        for side in SIDES:
            p1 = float(joint_error(joint, z * _phase_mask(joint, 1), edge, side, r)[0])
            p_all = float(joint_error(joint, z, edge, side, r)[0])
            at_edge.append(f"{edge} {side} {p1:.6f} + {p_all - p1:.1e}")
    print(f"      error spent at the edge point, phase 1 + phase 2 only: {', '.join(at_edge)}")
    mass = lat.mass()
    for blk, name in ((S1, "tau1"), (S2, "tau2")):
        alive = ", ".join(
            f"n={n} {float(mass[lat.n == n] @ z[blk * size + np.flatnonzero(lat.n == n)]):.3f}"
            for n in (1, 2, 3, 4, 8, 12, 16)
            if n <= lat.n_max
        )
        print(f"      P({name} > n): {alive}")
    print("      phase-2-only declarations (state, share), first 12 by n:")
    for edge in EDGES:
        for side in SIDES:
            d = z[jdecl(edge, side, 2) * size : (jdecl(edge, side, 2) + 1) * size]
            live = np.flatnonzero(d > 5e-4)[:12]
            if len(live):
                where = " ".join(f"{lat.c[i]}/{lat.n[i]}:{d[i]:.3f}" for i in live)
                print(f"        {edge} {side}: {where}")


def _phase_mask(joint: Joint, phase: int) -> np.ndarray:
    """1 on the phase's declaration variables and everything that is not a declaration; 0 elsewhere."""
    size = joint.prog.lat.size
    mask = np.ones(J_BLOCKS * size + 1)
    for edge in EDGES:
        for side in SIDES:
            mask[jdecl(edge, side, 3 - phase) * size : (jdecl(edge, side, 3 - phase) + 1) * size] = 0.0
    return mask


JOINT_INTRO = (
    "",
    "JOINT bound: ONE rule, read at two budgets. Nested stopping times tau1 <= tau2 per task; the",
    "edges declared by tau1 count for the k1 accuracy, those declared by tau2 for the k2 accuracy;",
    "the guarantee covers all its declarations. lambda* = min lambda with E[tau1] <= k1 lambda,",
    "E[tau2] <= k2 lambda, acc1 >= T_k1, acc2 >= T_k2. lambda* > 0.5 would mean no rule reaches",
    "fixed k1's and fixed k2's accuracy with half their episodes, both in one run.",
    "'nested point': fixed k1, then on to k2 (lambda = 1; its k1 declarations are final), checked",
    "feasible with T_k2 replaced by the acc2 it reaches. 'any length' bounds rules of any length.",
    f"Long runs are nearly free in error: 'lo: above' after 5 of 5 has probability {R_LO**5:.1e} at r_lo,",
    f"'hi: below' after 0 of 11 {(1 - R_HI) ** 11:.1e} at r_hi: phase 2 adds accuracy on a sliver of budget.",
)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    ap.add_argument("--grid", type=int, default=300, help="error-constraint points per wrong-side interval")
    ap.add_argument(
        "--nmax", type=int, nargs="+", default=[12, 20, 30, 40], help="horizons for (a), (b) at k=4"
    )
    ap.add_argument("--target-edges", type=float, default=None, help="override T for the k = 4 target")
    ap.add_argument("--no-k8", action="store_true", help="skip the fixed k = 8 target")
    ap.add_argument(
        "--joint-nmax", type=int, nargs="+", default=[20, 30], help="horizons for the joint bound (4, 8)"
    )
    ap.add_argument("--no-joint", action="store_true", help="skip the joint bounds")
    ap.add_argument(
        "--hold-nmax",
        type=int,
        nargs="+",
        default=[40, 160],
        help="horizons for (g), the rules that keep decide()",
    )
    ap.add_argument(
        "--alpha",
        type=float,
        default=1.0 - CONFIDENCE,
        help="error allowed per edge and side (default 1 - confidence; the product spends 0.9 of it)",
    )
    args = ap.parse_args(argv)
    globals()["ALPHA"] = args.alpha
    start = time.perf_counter()

    print(
        f"Band pass@{K} in [{LO}, {HI}] at {CONFIDENCE:.0%}: r_lo = {R_LO:.6f}, r_hi = {R_HI:.6f}; "
        f"population {P_ZERO} at p=0, {P_ONE} at p=1, {P_UNIFORM} uniform; {args.grid} grid points per "
        "wrong-side interval."
    )
    print(
        f'Declaring "hi: below" after 0 of 2 has probability {(1 - R_HI) ** 2:.6f} at p = r_hi, the hi '
        f"edge's whole error budget ({ALPHA:.2f}): a rule doing so can never place another task below the "
        "top edge."
    )
    print("Bounds are E[N] per task (dual bound of the LP) and E[N] / k. (b1), (d) and k = 8: smallest and")
    print("largest N_max only; where 'stop by' and 'any length' agree the value is exact for the LP.")
    ends = sorted({min(args.nmax), max(args.nmax)})
    for k in (4,) if args.no_k8 else (4, 8):
        table = fixed_k_table(k)
        print(f"\nFixed k = {k}, the product's decide(c, {k}, {LO}, {HI}, {K}, {CONFIDENCE}):")
        for c, placed in table.items():
            what = ", ".join(f"{edge} {side}" for edge, side in placed.items()) or "nothing"
            print(f"  c = {c}: {what}")
        target = table_accuracy(table, k)
        if k == 4 and args.target_edges is not None:
            print(f"  T of this table: {target:.6f}; overridden by --target-edges {args.target_edges}")
            target = args.target_edges
        if k == 4:
            run_target(k, target, RULES[:2], sorted(args.nmax), args.grid, show=True)
            run_target(k, target, RULES[2:], ends, args.grid, show=True)
            run_early_budget(k, target, ends, args.grid, episodes=k / 2, within=3)
            run_holding(k, target, max(args.nmax), args.hold_nmax, args.grid, keep_from=(4, 5, 6, 8, 12, 20))
        else:
            run_target(
                k, target, RULES[:2] + RULES[3:], [n for n in ends if n >= k] or [k], args.grid, show=False
            )
    if not args.no_joint:
        print("\n".join(JOINT_INTRO))
        for ks, n_maxes in (((4, 8), args.joint_nmax), ((4, 16), [max(args.joint_nmax + [16])])):
            print(f"\nJoint (k1, k2) = {ks}:")
            for rule in (RULES[0], RULES[3]):
                run_joint(ks, rule, n_maxes, args.grid, show=ks == (4, 8) and rule is RULES[0])
    print(f"\n{time.perf_counter() - start:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
