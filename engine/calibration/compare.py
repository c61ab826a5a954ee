"""Calibration across models and checkpoints: the tasks × models matrix of pass@k.

The band is model-specific and moves during training (a 9B policy saturated at 81.3% mean pass@2 within
20 steps), so a curator needs each task's pass@k for several models side by side, and above all the
tasks that *left* the band from one model to the next: ``saturated`` (now above it: the policy outgrew
the task) or ``too_hard`` (now below it). Every cell comes from the same ``build_report`` the single-model
report uses, so the matrix and ``bandpass report --model M`` can never disagree.

**Beyond noise.** A cell's band is a decision at the stated confidence (engine/calibration/confidence.py),
so a task *moves* between consecutive models whenever its decision differs, and the move is beyond noise
only when both ends are decided (each is wrong with probability at most ``1 - confidence``, so the move
is real with probability at least ``1 - 2(1 - confidence)``); a move to or from ``undecided`` is within
noise. ``left_band`` lists the moves out of the band that are beyond noise. For the checkpoint as a whole
(is step 40 better than step 20 on these tasks, or is it noise?) an exact McNemar test pairs the two
models' valid samples of each common task in episode order (the i-th of one with the i-th of the other,
as many pairs as the smaller count): under "no change on any task" each pair is as likely to be
fail→pass as pass→fail, so the discordant pairs are Binomial(b + c, 1/2). The pairing assumes the number
of samples a task got was not chosen by its outcomes; batches that stopped adaptively on both sides make
the p-value approximate.

Order matters for "left between consecutive models". Models are taken in the order asked, except that
entries of one ``series`` in ``bandpass.toml`` (``[models.X] series = "run", checkpoint_step = 20``) are
placed together, at the first member's position, sorted by ``checkpoint_step``: asking for ``step40,
step10, step20`` compares them as a training run, step by step.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any

from ..core.config import Config
from ..core.errors import InvalidInput
from ..core.plural import counted
from ..core.workspace import Workspace
from .calibrate import BandStatus, GateParams
from .confidence import BandDecision
from .report import CalibrationReport, build_report

SATURATED = "saturated"
TOO_HARD = "too_hard"


@dataclass(frozen=True)
class Cell:
    """One task under one model."""

    n: int
    c: int
    infra_errors: int
    pass_at_k: float | None
    band: BandStatus  # the decision at the report's confidence
    interval: tuple[float, float] = (0.0, 1.0)  # pass@k interval behind the decision


@dataclass(frozen=True)
class Move:
    """A task whose band decision differs between ``before`` and the next model, ``after``."""

    task: str
    before: str
    after: str
    band_before: BandStatus
    band_after: BandStatus

    @property
    def beyond_noise(self) -> bool:
        """Both ends decided: the move holds at the stated confidence (module docstring)."""
        return "undecided" not in (self.band_before, self.band_after)


@dataclass(frozen=True)
class PairedTest:
    """Exact McNemar between consecutive models over their common tasks (module docstring)."""

    before: str
    after: str
    tasks: int  # common tasks with at least one pair
    pairs: int
    improved: int  # pairs that failed before and passed after (b)
    regressed: int  # passed before, failed after (c)
    p_value: float
    alpha: float

    @property
    def beyond_noise(self) -> bool:
        return self.p_value < self.alpha

    @property
    def verdict(self) -> str:
        if not self.beyond_noise:
            return "within noise"
        return "better" if self.improved > self.regressed else "worse"

    def as_dict(self) -> dict[str, Any]:
        return {
            "from": self.before,
            "to": self.after,
            "tasks": self.tasks,
            "pairs": self.pairs,
            "improved": self.improved,
            "regressed": self.regressed,
            "p_value": self.p_value,
            "beyond_noise": self.beyond_noise,
            "verdict": self.verdict,
        }


def mcnemar_exact(improved: int, regressed: int) -> float:
    """Two-sided exact McNemar p-value: ``min(1, 2 P(Binomial(b + c, 1/2) <= min(b, c)))``, in exact
    rational arithmetic (no normal approximation, which is wrong at the small counts calibration has)."""
    m = improved + regressed
    if m == 0:
        return 1.0
    tail = sum(math.comb(m, i) for i in range(min(improved, regressed) + 1))
    return float(min(Fraction(1), Fraction(2 * tail, 2**m)))


def paired_test(
    before: str, after: str, a: dict[str, list[int]], b: dict[str, list[int]], alpha: float
) -> PairedTest:
    """McNemar over the tasks both models have valid samples on; ``a``/``b``: task -> samples in order."""
    improved = regressed = pairs = tasks = 0
    for task, xs in a.items():
        ys = b.get(task)
        if not xs or not ys:
            continue
        tasks += 1
        for x, y in zip(xs, ys, strict=False):
            pairs += 1
            improved += x == 0 and y == 1
            regressed += x == 1 and y == 0
    return PairedTest(
        before, after, tasks, pairs, improved, regressed, mcnemar_exact(improved, regressed), alpha
    )


@dataclass(frozen=True)
class Leaver:
    """A task in the band for ``before`` and out of it for ``after`` (the next model in the order)."""

    task: str
    before: str
    after: str
    kind: str  # saturated | too_hard
    pass_before: float | None
    pass_after: float | None


@dataclass
class Comparison:
    params: GateParams
    models: list[str]
    steps: dict[str, int | None]
    reports: dict[str, CalibrationReport]
    tasks: list[str]
    cells: dict[tuple[str, str], Cell] = field(default_factory=dict)  # (task, model) -> cell
    leavers: list[Leaver] = field(default_factory=list)
    moves: list[Move] = field(default_factory=list)
    paired: list[PairedTest] = field(default_factory=list)

    @property
    def k(self) -> int:
        return self.params.k

    def mean_pass_at_k(self, model: str) -> float | None:
        """Mean over the tasks measured for this model (the single-model report's number)."""
        return self.reports[model].mean_pass_at_k

    @property
    def common_tasks(self) -> list[str]:
        """Tasks measured (a pass@k on enough samples) for every model: the fair basis for comparing
        means."""
        measured = {m: {e.task for e in self.reports[m].measured} for m in self.models}
        return [t for t in self.tasks if all(t in measured[m] for m in self.models)]

    def mean_pass_at_k_common(self, model: str) -> float | None:
        vals = [self.cells[(t, model)].pass_at_k for t in self.common_tasks]
        nums = [v for v in vals if v is not None]
        return statistics.fmean(nums) if nums else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "params": self.params.as_dict(),
            "k": self.k,
            "models": [
                {
                    "model": m,
                    "band": [self.reports[m].params.lo, self.reports[m].params.hi],
                    "checkpoint_step": self.steps.get(m),
                    "mean_pass_at_k": self.mean_pass_at_k(m),
                    "mean_pass_at_k_common": self.mean_pass_at_k_common(m),
                    "band_counts": self.reports[m].band_counts(),
                    "confidence": self.reports[m].confidence,
                    "episodes": self.reports[m].episodes,
                    "infra_errors": self.reports[m].infra_errors,
                    "infra_rate": self.reports[m].infra_rate,
                }
                for m in self.models
            ],
            "common_tasks": len(self.common_tasks),
            "matrix": [
                {
                    "task": t,
                    "cells": {
                        m: {
                            "n": self.cells[(t, m)].n,
                            "c": self.cells[(t, m)].c,
                            "infra_errors": self.cells[(t, m)].infra_errors,
                            "pass_at_k": self.cells[(t, m)].pass_at_k,
                            "band": self.cells[(t, m)].band,
                            "interval": list(self.cells[(t, m)].interval),
                        }
                        for m in self.models
                    },
                }
                for t in self.tasks
            ],
            "left_band": [
                {
                    "task": lv.task,
                    "from": lv.before,
                    "to": lv.after,
                    "kind": lv.kind,
                    "pass_at_k_from": lv.pass_before,
                    "pass_at_k_to": lv.pass_after,
                }
                for lv in self.leavers
            ],
            "moves": [
                {
                    "task": mv.task,
                    "from": mv.before,
                    "to": mv.after,
                    "band_from": mv.band_before,
                    "band_to": mv.band_after,
                    "beyond_noise": mv.beyond_noise,
                }
                for mv in self.moves
            ],
            "paired": [p.as_dict() for p in self.paired],
        }


def order_models(models: Sequence[str], config: Config | None) -> list[str]:
    """The order described in the module docstring (stable; unknown names keep their place)."""
    cfgs = config.models if config is not None else {}
    first_of_series: dict[str, int] = {}
    keys: list[tuple[int, int, int]] = []
    for i, m in enumerate(models):
        c = cfgs.get(m)
        if c is not None and c.series and c.checkpoint_step is not None:
            anchor = first_of_series.setdefault(c.series, i)
            keys.append((anchor, c.checkpoint_step, i))
        else:
            keys.append((i, 0, i))
    return [m for _, m in sorted(zip(keys, models, strict=True), key=lambda t: t[0])]


def model_params(model: str, params: GateParams, config: Config | None) -> GateParams:
    """``params`` with the model's own band from bandpass.toml (``[models.X] band = "LO:HI"``), if any."""
    c = config.models.get(model) if config is not None else None
    edges = c.band_edges() if c is not None else None
    return params if edges is None else replace(params, lo=edges[0], hi=edges[1])


def compare(
    ws: Workspace,
    models: Sequence[str],
    params: GateParams,
    *,
    config: Config | None = None,
    band_override: bool = False,
) -> Comparison:
    """Builds the matrix over the latest version of every task that has a valid sample for any model.

    Each model is judged against its own band (``model_params``) unless ``band_override`` (``--band``
    given) puts every model on ``params``' band.
    """
    if not models:
        raise InvalidInput("--models: expected at least one model")
    dupes = sorted({m for m in models if list(models).count(m) > 1})
    if dupes:
        raise InvalidInput(f"--models: {', '.join(dupes)} given twice")
    ordered = order_models(models, config)
    cfgs = config.models if config is not None else {}
    reports = {
        m: build_report(ws, m, params if band_override else model_params(m, params, config)) for m in ordered
    }
    names = [e.task for e in reports[ordered[0]].estimates]  # every model sees every task, same order
    cells: dict[tuple[str, str], Cell] = {}
    samples: dict[str, dict[str, list[int]]] = {}
    for m in ordered:
        rep = reports[m]
        for e in rep.estimates:
            d: BandDecision = rep.decisions[e.task]
            cells[(e.task, m)] = Cell(
                e.n, e.c, e.infra_errors, e.pass_at.get(params.k), d.status, d.pass_at_k
            )
        samples[m] = {e.task: e.samples for e in rep.estimates}
    tasks = [t for t in names if any(cells[(t, m)].n or cells[(t, m)].infra_errors for m in ordered)]
    leavers: list[Leaver] = []
    moves: list[Move] = []
    paired: list[PairedTest] = []
    for before, after in zip(ordered, ordered[1:], strict=False):
        for t in tasks:
            a, b = cells[(t, before)], cells[(t, after)]
            if a.band != b.band:
                moves.append(Move(t, before, after, a.band, b.band))
            if a.band == "in" and b.band in ("above", "below"):  # both decided: beyond noise
                kind = SATURATED if b.band == "above" else TOO_HARD
                leavers.append(Leaver(t, before, after, kind, a.pass_at_k, b.pass_at_k))
        alpha = 1.0 - reports[after].confidence
        common = {t: samples[before].get(t, []) for t in tasks}
        paired.append(paired_test(before, after, common, samples[after], alpha))
    return Comparison(
        params=params,
        models=ordered,
        steps={m: (cfgs[m].checkpoint_step if m in cfgs else None) for m in ordered},
        reports=reports,
        tasks=tasks,
        cells=cells,
        leavers=leavers,
        moves=moves,
        paired=paired,
    )


def render_comparison(cmp: Comparison) -> Any:
    """Rich renderables: the matrix (cells coloured by band), means per model, and the band leavers."""
    from rich import box
    from rich.console import Group
    from rich.table import Table
    from rich.text import Text

    style = {"in": "bold green", "above": "cyan", "below": "red", "undecided": "dim"}
    mark = {"in": "●", "above": "▲", "below": "▼", "undecided": "?"}
    head = Text(
        f"pass@{cmp.k} across models   default band [{cmp.params.lo:g}, {cmp.params.hi:g}]   "
        f"decided at {cmp.params.confidence:.0%} confidence   "
        "(● in band  ▲ above  ▼ below  ? undecided)",
        style="bold",
    )
    t = Table(box=box.SIMPLE_HEAD, show_edge=False)
    t.add_column("task", overflow="fold")
    for m in cmp.models:
        step = cmp.steps.get(m)
        r = cmp.reports[m].params
        head_m = m + (f"\nstep {step}" if step is not None else "") + f"\nband [{r.lo:g}, {r.hi:g}]"
        t.add_column(head_m, justify="right")
    for task in cmp.tasks:
        row: list[Any] = [task]
        for m in cmp.models:
            c = cmp.cells[(task, m)]
            val = "—" if c.pass_at_k is None else f"{c.pass_at_k:.2f}"
            row.append(Text(f"{val} {mark[c.band]} n={c.n}", style=style[c.band]))
        t.add_row(*row)

    def pct(x: float | None) -> str:
        return "—" if x is None else f"{100 * x:.1f}%"

    t.add_section()
    t.add_row(Text(f"mean pass@{cmp.k}", style="bold"), *[pct(cmp.mean_pass_at_k(m)) for m in cmp.models])
    t.add_row(
        Text(f"mean on {len(cmp.common_tasks)} common", style="bold"),
        *[pct(cmp.mean_pass_at_k_common(m)) for m in cmp.models],
    )
    t.add_row(Text("in band", style="bold"), *[str(cmp.reports[m].band_counts()["in"]) for m in cmp.models])
    t.add_row(
        Text("infra errors", style="bold"),
        *[f"{cmp.reports[m].infra_errors} ({pct(cmp.reports[m].infra_rate)})" for m in cmp.models],
    )
    parts: list[Any] = [head, t]
    if cmp.paired:
        pt = Table(
            title="Paired tests (exact McNemar on per-task episodes)",
            box=box.SIMPLE,
            title_justify="left",
            show_edge=False,
        )
        for col in ("from", "to", "tasks", "pairs", "fail→pass", "pass→fail", "p", "verdict"):
            pt.add_column(col, justify="left" if col in ("from", "to", "verdict") else "right")
        for p in cmp.paired:
            verdict = Text(
                p.verdict,
                style={"better": "bold green", "worse": "bold red"}.get(p.verdict, "dim"),
            )
            pt.add_row(
                p.before,
                p.after,
                str(p.tasks),
                str(p.pairs),
                str(p.improved),
                str(p.regressed),
                f"{p.p_value:.3g}",
                verdict,
            )
        parts.append(pt)
    noisy = [mv for mv in cmp.moves if not mv.beyond_noise]
    if noisy:
        parts.append(
            Text(
                f"{counted(len(noisy), 'band move')} within noise (to or from undecided): "
                + ", ".join(f"{mv.task} {mv.band_before}→{mv.band_after}" for mv in noisy[:8])
                + (" …" if len(noisy) > 8 else ""),
                style="dim",
            )
        )
    if cmp.leavers:
        lv = Table(
            title="Left the band (beyond noise)", box=box.SIMPLE, title_justify="left", show_edge=False
        )
        for col in ("task", "from", "to", "why", f"pass@{cmp.k}"):
            lv.add_column(col)
        for x in cmp.leavers:
            why = (
                Text("saturated (above)", style="cyan")
                if x.kind == SATURATED
                else Text("too hard (below)", style="red")
            )
            lv.add_row(x.task, x.before, x.after, why, f"{pct(x.pass_before)} → {pct(x.pass_after)}")
        parts.append(lv)
    else:
        parts.append(Text("No task left the band beyond noise between consecutive models."))
    heavy = [m for m in cmp.models if cmp.reports[m].infra_warning]
    if heavy:
        parts.insert(
            0,
            Text(
                f"WARNING: infra errors above 20% for {', '.join(heavy)}: their pass@k is not meaningful",
                style="bold red",
            ),
        )
    return Group(*parts)
