"""What a workspace holds, at a glance: the figures ``bandpass demo`` opens on (and ``--no-tui`` prints).

A curator opening a workspace first wants to know where to look: how episodes ended, where each policy
checkpoint puts the tasks relative to the band, which tasks left the band between checkpoints, how many
failures fall into clusters worth tagging at once, what the tamper guard caught and how far the reviewers
agree with the curators. Every figure comes from the function the full view uses (``compare`` for the band,
``load_clusters`` for clusters, ``review_report`` for agreement), so the overview cannot disagree with
the screen it points to.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import asdict, dataclass, field
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.queries import diagnoses as dq
from ...store.queries import reviews as rq
from ..core.probes import is_builtin_agent
from ..core.workspace import Workspace
from ..review.clusters import load_clusters
from ..review.review_report import review_report
from .calibrate import GateParams, classify
from .compare import compare

GUARD_CODE = "agent_error:verifier_tamper"


@dataclass
class ModelFigures:
    """One policy model (checkpoint): where it puts the tasks."""

    model: str
    checkpoint_step: int | None
    episodes: int
    band: dict[str, int]  # below / in / above / undecided -> tasks (decisions at the band's confidence)
    histogram: list[tuple[str, int]]  # pass@k bins over measured tasks
    exportable: int
    mean_pass_at_k: float | None


@dataclass
class Overview:
    workspace: str
    tasks: int
    audits: dict[str, int]
    episodes: int
    outcomes: dict[str, int]
    kinds: dict[str, int]  # passed / failed / agent_error / infra_error
    band: tuple[float, float]
    k: int
    confidence: float = 0.9
    models: list[ModelFigures] = field(default_factory=list)
    left_band: list[dict[str, Any]] = field(default_factory=list)
    clusters: int = 0  # clusters with two or more members
    clustered_failures: int = 0
    largest_cluster: int = 0
    diagnoses: dict[str, int] = field(default_factory=dict)
    guard_caught: int = 0
    tags: int = 0
    reviews: int = 0
    review_agreement: float | None = None  # class agreement of the latest reviews with curators
    diagnosis_agreement: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def build_overview(ws: Workspace, params: GateParams | None = None) -> Overview:
    if params is None:
        b = ws.config.band
        params = GateParams(lo=b.lo, hi=b.hi, k=b.k, min_samples=b.min_samples, confidence=b.confidence)
    with session(ws.engine) as s:
        rows = queries.task_rows(s)
        eps = queries.episodes(s, status="done")
        agents = queries.episode_agents(s)
        audits = Counter(r.audit or "none" for r in rows)
        diagnoses = Counter(dq.code_counts(s))
        tags = queries.active_tag_count(s)
        reviews = rq.review_count(s)
    outcomes = Counter(e.outcome for e in eps)
    ov = Overview(
        workspace=str(ws.root),
        tasks=len(rows),
        audits=dict(sorted(audits.items())),
        episodes=len(eps),
        outcomes=dict(sorted(outcomes.items())),
        kinds=dict(sorted(Counter(classify(e.outcome) for e in eps).items())),
        band=(params.lo, params.hi),
        k=params.k,
        confidence=params.confidence,
        diagnoses=dict(diagnoses.most_common()),
        guard_caught=outcomes.get(GUARD_CODE, 0),
        tags=tags,
        reviews=reviews,
    )
    models = [a for a in agents if not is_builtin_agent(a)]
    if models:
        cmp = compare(ws, models, params, config=ws.config)
        for m in cmp.models:
            rep = cmp.reports[m]
            bins, _unknown = rep.histogram()
            ov.models.append(
                ModelFigures(
                    model=m,
                    checkpoint_step=cmp.steps.get(m),
                    episodes=rep.episodes,
                    band=rep.band_counts(),
                    histogram=[(b.label, b.count) for b in bins],
                    exportable=rep.exportable,
                    mean_pass_at_k=rep.mean_pass_at_k,
                )
            )
        ov.left_band = cmp.as_dict()["left_band"]
    groups = [c for c in load_clusters(ws) if c.size >= 2]
    ov.clusters = len(groups)
    ov.clustered_failures = sum(c.size for c in groups)
    ov.largest_cluster = max((c.size for c in groups), default=0)
    rr = review_report(ws)
    if rr.reviewers and rr.reviewers[0].agreement is not None:
        ov.review_agreement = rr.reviewers[0].agreement.class_agreement
    if rr.diagnosis is not None and rr.diagnosis.agreement is not None:
        ov.diagnosis_agreement = rr.diagnosis.agreement.class_agreement
    return ov


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def overview_lines(ov: Overview) -> list[str]:
    """The summary as plain lines: ``bandpass demo --no-tui`` prints them, the Overview screen shows them."""
    lo, hi = ov.band
    audits = ", ".join(f"{n} {v}" for v, n in ov.audits.items())
    out = [
        f"workspace {ov.workspace}",
        f"{ov.tasks} tasks (audits: {audits}); {ov.episodes} episodes",
        "",
        "outcomes:",
        *(f"  {n:>4}  {o}" for o, n in ov.outcomes.items()),
        "",
        f"band: pass@{ov.k} in [{lo:g}, {hi:g}], decided at {ov.confidence:.0%} confidence",
    ]
    for m in ov.models:
        step = f" (step {m.checkpoint_step})" if m.checkpoint_step is not None else ""
        b = m.band
        out.append(
            f"  {m.model}{step}: {m.episodes} episodes; below {b['below']}, in {b['in']}, "
            f"above {b['above']}, undecided {b['undecided']}; exportable {m.exportable}; "
            f"mean pass@{ov.k} {_pct(m.mean_pass_at_k)}"
        )
        out.append("    " + "  ".join(f"{label}:{n}" for label, n in m.histogram))
    for lv in ov.left_band:
        out.append(f"  left the band: {lv['task']} {lv['from']} -> {lv['to']} ({lv['kind']})")
    if ov.models and not ov.left_band:
        out.append("  no task left the band beyond noise between checkpoints")
    out += [
        "",
        f"clusters: {ov.clusters} with 2+ members "
        f"({ov.clustered_failures} failures; largest {ov.largest_cluster})",
        f"tamper guard caught: {ov.guard_caught}",
        f"curator tags: {ov.tags}; Claude reviews: {ov.reviews} (class agreement with curators "
        f"{_pct(ov.review_agreement)}; deterministic diagnosis {_pct(ov.diagnosis_agreement)})",
        "diagnoses: " + ", ".join(f"{c} {n}" for c, n in ov.diagnoses.items()),
    ]
    return out


__all__ = ["ModelFigures", "Overview", "build_overview", "overview_lines"]
