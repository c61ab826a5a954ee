"""The calibration report: what the band looks like for one policy model, and whether to believe it.

The report's first duty is honesty about the denominator. Infra errors are counted apart (they are not
samples), and when they are common enough to make pass@k meaningless (rate > 20%) the report opens with
a loud warning that also shows what pass@k *would have been reported as* had they been read as failures —
the 146-of-151 run that published pass@2 = 2.65% is the failure this report exists to prevent.

Where each task stands relative to the band is a *decision* at the stated confidence (``in``, ``below``,
``above`` or ``undecided``, with the interval behind it: engine/calibration/confidence.py); the histogram
shows the point estimates, the counts and the gates the decisions.

``build_report`` gathers plain data (also serialised by ``--json``); ``render_report`` and
``render_histogram`` turn it into Rich renderables for the CLI and the TUI alike.
"""

from __future__ import annotations

import statistics
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

from rich import box
from rich.console import Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ...store import queries
from ...store.db import session
from ..core import outcomes
from ..core.workspace import Workspace
from .calibrate import (
    HEALTHY_REWARD_STD,
    INFRA_WARN_RATE,
    BandStatus,
    GateParams,
    TaskEstimate,
    classify,
    estimates,
    gates,
    pass_at_k,
)
from .confidence import BandDecision

#: Histogram bins: exactly 0 (never solved) and exactly 1 (always solved) get their own rows because
#: that is where most tasks pile up and where no learning signal exists; between them ten 0.1 bins.
BIN_EDGES = [i / 10 for i in range(11)]


@dataclass
class HistogramBin:
    label: str
    lo: float
    hi: float
    count: int = 0
    overlap: str = "out"  # in | partial | out: the bin's relation to the band


@dataclass
class CalibrationReport:
    model: str
    params: GateParams
    estimates: list[TaskEstimate]
    gates: dict[str, list[str]]
    decisions: dict[str, BandDecision]
    outcome_kinds: dict[str, int]  # passed | failed | agent_error | infra_error | unclassified
    agent_error_codes: dict[str, int]
    infra_codes: dict[str, int]
    tags: dict[str, int]  # class.subclass -> uncleared tags on this model's episodes
    generation: list[tuple[str, int, int]] = field(default_factory=list)  # prompt_version, attempts, accepted
    ks: tuple[int, ...] = ()  # the pass@k values asked for (``per_task``); always holds 1 and ``k``

    @property
    def k(self) -> int:
        return self.params.k

    @property
    def status(self) -> dict[str, BandStatus]:
        """Each task's band decision: in | below | above | undecided."""
        return {task: d.status for task, d in self.decisions.items()}

    @property
    def confidence(self) -> float:
        return self.params.confidence

    @property
    def episodes(self) -> int:
        return sum(self.outcome_kinds.values())

    @property
    def infra_errors(self) -> int:
        return self.outcome_kinds.get("infra_error", 0)

    @property
    def infra_rate(self) -> float:
        return self.infra_errors / self.episodes if self.episodes else 0.0

    @property
    def infra_warning(self) -> bool:
        return self.infra_rate > INFRA_WARN_RATE

    @property
    def measured(self) -> list[TaskEstimate]:
        """Tasks with a defined pass@k and at least ``min_samples`` valid samples: what the histogram and
        the means are over (a measurement, not yet a decision)."""
        return [
            e for e in self.estimates if e.n >= self.params.min_samples and e.pass_at.get(self.k) is not None
        ]

    @property
    def undecided(self) -> list[TaskEstimate]:
        return [e for e in self.estimates if self.decisions[e.task].status == "undecided"]

    @property
    def mean_pass_at_k(self) -> float | None:
        vals = [p for e in self.measured if (p := e.pass_at.get(self.k)) is not None]
        return statistics.fmean(vals) if vals else None

    @property
    def mean_pass_at_k_if_infra_failed(self) -> float | None:
        """The number a careless pipeline would publish: infra errors read as failed samples."""
        vals = []
        for e in self.estimates:
            p = pass_at_k(e.n + e.infra_errors, e.c, self.k) if e.n + e.infra_errors else None
            if p is not None and e.n + e.infra_errors >= self.params.min_samples:
                vals.append(p)
        return statistics.fmean(vals) if vals else None

    @property
    def mean_reward_std(self) -> float | None:
        vals = [e.reward_std for e in self.measured if e.reward_std is not None]
        return statistics.fmean(vals) if vals else None

    @property
    def healthy_tasks(self) -> int:
        """Measured tasks whose reward std exceeds the field's 0.1 health threshold."""
        return sum(1 for e in self.measured if (e.reward_std or 0.0) > HEALTHY_REWARD_STD)

    @property
    def infra_heavy_tasks(self) -> list[TaskEstimate]:
        return [e for e in self.estimates if e.infra_heavy]

    def band_counts(self) -> dict[str, int]:
        c = Counter(d.status for d in self.decisions.values())
        return {s: c.get(s, 0) for s in ("below", "in", "above", "undecided")}

    @property
    def exportable(self) -> int:
        return sum(1 for why in self.gates.values() if not why)

    def histogram(self) -> tuple[list[HistogramBin], int]:
        """Bins of pass@k over measured tasks, and the number of unmeasured tasks (shown apart)."""
        lo, hi = self.params.lo, self.params.hi
        bins = [HistogramBin("= 0", 0.0, 0.0)]
        for a, b in zip(BIN_EDGES, BIN_EDGES[1:], strict=False):
            bins.append(HistogramBin(f"{a:.1f}–{b:.1f}", a, b))
        bins.append(HistogramBin("= 1", 1.0, 1.0))
        for bin_ in bins:
            if lo <= bin_.lo and bin_.hi <= hi:
                bin_.overlap = "in"  # also a point bin (= 0, = 1) inside the band
            elif bin_.lo <= hi and lo < bin_.hi:
                bin_.overlap = "partial"  # the bin [lo, hi) holds values on both sides of an edge
        for e in self.measured:
            p = e.pass_at.get(self.k)
            if p is None:
                continue
            if p <= 0.0:
                bins[0].count += 1
            elif p >= 1.0:
                bins[-1].count += 1
            else:
                bins[1 + min(int(p * 10), 9)].count += 1
        return bins, len(self.estimates) - len(self.measured)

    def per_task(self) -> list[dict[str, Any]]:
        """One object per task's latest version, the numbers a script needs
        (docs/guide/calibration-and-export.md, "Accounting"): the point estimates, and the band decision
        with its pass@k interval and confidence."""
        ks = self.ks or tuple(sorted({1, self.k}))
        return [
            {
                "task": e.task,
                "version_hash": e.version_hash,
                "n": e.n,
                "c": e.c,
                "infra_errors": e.infra_errors,
                "infra_rate": e.infra_rate,
                "pass_at": {str(k): e.pass_at.get(k) for k in ks},
                "reward_std": e.reward_std,
                "band": self.decisions[e.task].status,
                **self.decisions[e.task].as_dict(),
                "verified": e.verified,
            }
            for e in self.estimates
        ]

    def as_dict(self) -> dict[str, Any]:
        bins, unknown = self.histogram()
        return {
            "model": self.model,
            "params": self.params.as_dict(),
            "tasks": len(self.estimates),
            "episodes": self.episodes,
            "infra_errors": self.infra_errors,
            "infra_rate": self.infra_rate,
            "infra_warning": self.infra_warning,
            "mean_pass_at_k": self.mean_pass_at_k,
            "mean_pass_at_k_if_infra_failed": self.mean_pass_at_k_if_infra_failed,
            "mean_reward_std": self.mean_reward_std,
            "healthy_tasks": self.healthy_tasks,
            "band_counts": self.band_counts(),
            "exportable": self.exportable,
            "histogram": [
                {"bin": b.label, "lo": b.lo, "hi": b.hi, "count": b.count, "band": b.overlap} for b in bins
            ]
            + [{"bin": "unmeasured", "count": unknown}],
            "outcomes": self.outcome_kinds,
            "agent_error_codes": self.agent_error_codes,
            "infra_codes": self.infra_codes,
            "tags": self.tags,
            "generation": [
                {"prompt_version": pv, "attempts": n, "accepted": a, "yield": a / n if n else None}
                for pv, n, a in self.generation
            ],
            "per_task": self.per_task(),
            "task_estimates": [
                {
                    **e.as_dict(),
                    "band": self.decisions[e.task].status,
                    **self.decisions[e.task].as_dict(),
                    "failed_gates": self.gates[e.task],
                }
                for e in self.estimates
            ],
        }


def build_report(
    ws: Workspace, model: str, params: GateParams, ks: tuple[int, ...] | list[int] = ()
) -> CalibrationReport:
    """The report for ``model``; ``ks`` adds pass@k values to ``per_task`` (1 and ``params.k`` always)."""
    all_ks = tuple(sorted({1, params.k, *ks}))
    ests = estimates(ws, model, ks=all_ks)
    kinds: Counter[str] = Counter()
    agent_codes: Counter[str] = Counter()
    infra_codes: Counter[str] = Counter()
    for e in ests:
        for outcome, n in e.outcomes.items():
            kind = classify(outcome)
            kinds[kind] += n
            code = outcomes.code_of(outcome) if ":" in outcome else "(none)"
            if kind == "agent_error":
                agent_codes[code] += n
            elif kind == "infra_error":
                infra_codes[code] += n
    with session(ws.engine) as s:
        tags = queries.tag_counts(s, model)
        generation = queries.generation_yield(s)
    return CalibrationReport(
        model=model,
        params=params,
        estimates=ests,
        gates=gates(ests, params),
        decisions={e.task: e.decision(params) for e in ests},
        outcome_kinds=dict(sorted(kinds.items())),
        agent_error_codes=dict(sorted(agent_codes.items())),
        infra_codes=dict(sorted(infra_codes.items())),
        tags=tags,
        generation=generation,
        ks=all_ks,
    )


# --- rendering ----------------------------------------------------------------------------------------


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.1f}%"


def infra_warning_panel(r: CalibrationReport) -> RenderableType | None:
    if not r.infra_warning:
        return None
    naive = r.mean_pass_at_k_if_infra_failed
    text = Text()
    text.append(
        f"INFRA ERRORS: {r.infra_errors} of {r.episodes} episodes ({_pct(r.infra_rate)}) "
        "produced no reward.\n",
        style="bold",
    )
    text.append(
        f"pass@{r.k} below is computed over valid samples only; with this many infra errors it says little "
        "about the model. Fix the infrastructure and re-run before trusting it.\n"
    )
    text.append(
        f"Read as failures, they would have been reported as mean pass@{r.k} = {_pct(naive)} "
        f"(honest value over valid samples: {_pct(r.mean_pass_at_k)}).\n"
    )
    if r.infra_codes:
        top = ", ".join(
            f"{c} ×{n}" for c, n in sorted(r.infra_codes.items(), key=lambda t: (-t[1], t[0]))[:5]
        )
        text.append(f"Codes: {top}")
    return Panel(
        text,
        title="⚠  WARNING: pass@k NOT MEANINGFUL  ⚠",
        border_style="bold red",
        box=box.HEAVY,
        style="red",
    )


def render_histogram(r: CalibrationReport, width: int = 40) -> RenderableType:
    """pass@k histogram with the band overlaid: band edges drawn as rules, in-band bars in green."""
    bins, unknown = r.histogram()
    top = max([b.count for b in bins] + [unknown, 1])
    lo, hi = r.params.lo, r.params.hi
    lines = Text()
    lines.append(f"pass@{r.k} for {r.model}   band [{lo:g}, {hi:g}]\n", style="bold")

    def edge(label: str, value: float) -> None:
        lines.append(f"{'':>8} ┄┄┄┄ band {label} {value:g} " + "┄" * max(0, width - 14) + "\n", style="cyan")

    lo_drawn = hi_drawn = False
    for b in bins:
        if not lo_drawn and (b.hi > lo or (b.hi == b.lo == lo)):
            edge("lo", lo)
            lo_drawn = True
        if not hi_drawn and (b.lo > hi or (b.lo == hi and b.hi > hi)):
            edge("hi", hi)
            hi_drawn = True
        style = {"in": "green", "partial": "yellow", "out": "dim"}[b.overlap]
        bar = "█" * round(width * b.count / top)
        lines.append(f"{b.label:>8} │", style="bold" if b.overlap == "in" else "")
        lines.append(f"{bar:<{width}}", style=style)
        lines.append(f" {b.count}\n")
    if not hi_drawn:
        edge("hi", hi)
    bar = "░" * round(width * unknown / top)
    lines.append(f"{'few':>8} │", style="")
    lines.append(f"{bar:<{width}}", style="magenta")
    lines.append(f" {unknown}  (fewer than {max(r.params.min_samples, r.k)} valid samples: not measured)")
    return lines


def _counts_table(title: str, counts: dict[str, int], total: int | None = None) -> Table:
    t = Table(title=title, box=box.SIMPLE, title_justify="left", show_edge=False, min_width=44)
    t.add_column("", overflow="fold", min_width=24)
    t.add_column("count", justify="right")
    if total is not None:
        t.add_column("share", justify="right")
    for key, n in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0])):
        row = [key, str(n)]
        if total is not None:
            row.append(_pct(n / total) if total else "—")
        t.add_row(*row)
    if not counts:
        t.add_row("(none)", "", *([""] if total is not None else []))
    return t


def breakdown_tables(r: CalibrationReport) -> list[Table]:
    """Counts by outcome, agent-error code, infra code and uncleared failure tag (CLI and TUI alike)."""
    return [
        _counts_table("Outcomes", r.outcome_kinds, r.episodes),
        _counts_table("Agent error codes", r.agent_error_codes),
        _counts_table("Infra error codes", r.infra_codes),
        _counts_table("Failure tags (uncleared)", r.tags),
    ]


def summary_table(r: CalibrationReport) -> Table:
    band = r.band_counts()
    t = Table(box=box.SIMPLE, show_header=False, show_edge=False)
    t.add_column(style="bold")
    t.add_column()
    t.add_row(
        "tasks", f"{len(r.estimates)}  ({len(r.measured)} measured, {len(r.estimates) - len(r.measured)} not)"
    )
    t.add_row(
        "episodes",
        f"{r.episodes}  ({r.infra_errors} infra errors = {_pct(r.infra_rate)}, not counted in n)",
    )
    t.add_row(f"mean pass@{r.k}", f"{_pct(r.mean_pass_at_k)} over measured tasks")
    std = "—" if r.mean_reward_std is None else f"{r.mean_reward_std:.3f}"
    t.add_row(
        "reward std",
        f"mean {std}; {r.healthy_tasks} of {len(r.measured)} tasks > {HEALTHY_REWARD_STD} (learning signal)",
    )
    t.add_row(
        "band",
        f"below {band['below']} · in {band['in']} · above {band['above']} · undecided {band['undecided']}"
        f"  (decided at {r.confidence:.0%} confidence)",
    )
    t.add_row("exportable", f"{r.exportable} (decided in band and passing every gate)")
    return t


def render_report(r: CalibrationReport) -> RenderableType:
    parts: list[RenderableType] = []
    warn = infra_warning_panel(r)
    if warn is not None:
        parts.append(warn)
    parts.append(
        Text(
            f"Calibration: {r.model}   k={r.k}   band [{r.params.lo:g}, {r.params.hi:g}]   "
            f"confidence {r.confidence:g}   min samples {r.params.min_samples}",
            style="bold",
        )
    )
    parts.append(summary_table(r))
    undecided = r.undecided
    if undecided:
        shown = ", ".join(
            f"{e.task} (n={e.n}, pass@{r.k} in [{r.decisions[e.task].pass_at_k[0]:.2f}, "
            f"{r.decisions[e.task].pass_at_k[1]:.2f}])"
            for e in undecided[:6]
        )
        more = f" and {len(undecided) - 6} more" if len(undecided) > 6 else ""
        parts.append(
            Text(
                f"Undecided at {r.confidence:.0%}: {shown}{more}. "
                f"bandpass run --model {r.model} --adaptive spends episodes only on these.",
                style="yellow",
            )
        )
    parts.append(render_histogram(r))
    heavy = r.infra_heavy_tasks
    if heavy:
        names = ", ".join(f"{e.task} ({e.infra_errors}/{e.episodes})" for e in heavy[:10])
        more = f" and {len(heavy) - 10} more" if len(heavy) > 10 else ""
        parts.append(
            Text(
                f"Infra-heavy tasks (> {INFRA_WARN_RATE:.0%} infra errors): {names}{more}",
                style="bold yellow",
            )
        )
    in_place = [e.task for e in r.estimates if e.verified in ("in_place", "mixed")]
    if in_place:
        names = ", ".join(in_place[:10]) + (f" and {len(in_place) - 10} more" if len(in_place) > 10 else "")
        parts.append(
            Text(
                f"Verified in place (the task asks for it: the verifier ran in the agent's container, the "
                f"tamper guard the gate; the rest in a fresh container): {names}",
                style="yellow",
            )
        )
    parts.extend(breakdown_tables(r))
    gen = Table(title="Generator yield", box=box.SIMPLE, title_justify="left", show_edge=False, min_width=44)
    gen.add_column("prompt version", justify="left")
    gen.add_column("attempts", justify="right")
    gen.add_column("accepted", justify="right")
    gen.add_column("yield", justify="right")
    for pv, n, a in r.generation:
        gen.add_row(pv or "(unversioned)", str(n), str(a), _pct(a / n if n else None))
    if not r.generation:
        gen.add_row("(no generations)", "", "", "")
    parts.append(gen)
    spaced: list[RenderableType] = []
    for p in parts:
        spaced += [p, Text("")]
    return Group(*spaced[:-1])
