"""``bandpass report review``: how far Claude's reviews and the deterministic diagnosis agree with curators.

Per suggester — each (review model, prompt version), and the stored deterministic diagnosis when the
workspace has one — over the episodes that have both a curator tag (the latest uncleared one) and a
suggestion (the latest successful review): agreement on class and on class.subclass, Cohen's kappa for
both, per-class precision and recall, plus what the reviews cost per reviewed episode and how much of
their evidence validation had to drop.

A ``true_fail`` review with no code, and the diagnosis ``policy.failed_checks``, suggest the taxonomy's
valid failure (``policy.failed_checks``: the policy simply failed) and are compared like any code. A
suggester that said nothing is not left out: a review whose code is ``none`` and a diagnosis that
suggests no tag (``unknown.no_evidence``) count in
``n`` as disagreements with the curator's tag, and are reported apart — the "no suggestion" count, which
diagnosis codes they were, and the agreement over the episodes that did get a suggestion — so the figure
neither hides the silent episodes nor reads "often silent" as "often wrong". Curated episodes with no
stored diagnosis at all are counted too (``bandpass diagnose`` fills them in).

A tag written by accepting a review agrees with that review by construction; ``independent=True`` leaves
such episodes out, which is the honest figure once curators start accepting suggestions.
"""

from __future__ import annotations

import json
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from rich.console import Group
from rich.table import Table
from rich.text import Text

from ...store.db import session
from ...store.models import ReviewSuggestion
from ...store.queries import reviews as rq
from ..core.plural import counted
from ..core.workspace import Workspace
from .agreement import NONE, Agreement, agreement
from .review_validation import review_code


@dataclass
class SuggesterFigures:
    name: str
    kind: str  # review | diagnosis
    model: str = ""
    prompt_version: str = ""
    reviewed_episodes: int = 0
    reviews: int = 0
    by_status: dict[str, int] = field(default_factory=dict)
    citations_kept: int = 0
    dropped_citations: int = 0
    dropped_codes: int = 0
    api_retries: int = 0
    accepted: int = 0
    cost_usd: float | None = None
    cost_unknown_reviews: int = 0
    agreement: Agreement | None = None
    no_suggestion_codes: dict[str, int] = field(default_factory=dict)  # diagnosis codes with no tag
    curated_not_diagnosed: int = 0

    @property
    def cost_per_episode(self) -> float | None:
        if self.cost_usd is None or not self.reviewed_episodes:
            return None
        return self.cost_usd / self.reviewed_episodes

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {
            "name": self.name,
            "kind": self.kind,
            "reviewed_episodes": self.reviewed_episodes,
            "agreement": self.agreement.as_dict() if self.agreement else None,
        }
        if self.kind == "diagnosis":
            d.update(
                no_suggestion_codes=self.no_suggestion_codes, curated_not_diagnosed=self.curated_not_diagnosed
            )
        if self.kind == "review":
            cpe = self.cost_per_episode
            d.update(
                model=self.model,
                prompt_version=self.prompt_version,
                reviews=self.reviews,
                by_status=self.by_status,
                citations_kept=self.citations_kept,
                dropped_citations=self.dropped_citations,
                dropped_codes=self.dropped_codes,
                api_retries=self.api_retries,
                accepted=self.accepted,
                cost_usd=None if self.cost_usd is None else round(self.cost_usd, 6),
                cost_unknown_reviews=self.cost_unknown_reviews,
                cost_per_reviewed_episode=None if cpe is None else round(cpe, 6),
            )
        return d


@dataclass
class ReviewReport:
    curated_episodes: int
    independent: bool
    reviewers: list[SuggesterFigures] = field(default_factory=list)
    diagnosis: SuggesterFigures | None = None
    diagnosis_unavailable: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "curated_episodes": self.curated_episodes,
            "independent": self.independent,
            "reviewers": [r.as_dict() for r in self.reviewers],
            "diagnosis": self.diagnosis.as_dict() if self.diagnosis else None,
            "diagnosis_unavailable": self.diagnosis_unavailable or None,
        }


def review_report(ws: Workspace, *, model: str | None = None, independent: bool = False) -> ReviewReport:
    with session(ws.engine) as s:
        labels = rq.curator_labels(s)
        reviews = rq.all_reviews(s, model=model)
        live = {r.id: t.id for r in reviews if (t := rq.accepted_tag(s, r)) is not None}
        diagnoses = rq.stored_diagnoses(s)
        s.expunge_all()
    accepted_tags = set(live.values())
    if independent:
        labels = {e: v for e, v in labels.items() if v[1] not in accepted_tags}
    report = ReviewReport(curated_episodes=len(labels), independent=independent)
    groups: dict[tuple[str, str], list[ReviewSuggestion]] = defaultdict(list)
    for r in reviews:
        groups[(r.model, r.prompt_version)].append(r)
    for (m, pv), rows in sorted(groups.items()):
        fig = SuggesterFigures(name=f"{m} / {pv}", kind="review", model=m, prompt_version=pv)
        fig.reviews = len(rows)
        fig.reviewed_episodes = len({r.episode_id for r in rows})
        fig.by_status = dict(Counter(r.status for r in rows))
        fig.api_retries = sum(r.api_retries for r in rows)
        fig.accepted = sum(1 for r in rows if r.id in live)
        known = [r.cost_usd for r in rows if r.cost_usd is not None]
        fig.cost_unknown_reviews = len(rows) - len(known)
        fig.cost_usd = sum(known) if known else None
        latest: dict[int, ReviewSuggestion] = {}
        for r in rows:
            if r.status == "ok":
                latest[r.episode_id] = r  # ids ascend: the last one wins
                cites = json.loads(r.citations_json or "[]")
                dropped = json.loads(r.dropped_json or "[]")
                fig.citations_kept += len(cites)
                fig.dropped_citations += sum(1 for d in dropped if d.get("what") == "citation")
                fig.dropped_codes += sum(1 for d in dropped if d.get("what") == "code")
        pairs = [(labels[e][0], review_code(r) or "none") for e, r in latest.items() if e in labels]
        fig.agreement = agreement(pairs)
        report.reviewers.append(fig)
    if diagnoses is None:
        report.diagnosis_unavailable = "no stored deterministic diagnosis in this workspace"
    else:
        fig = SuggesterFigures(name="deterministic diagnosis", kind="diagnosis")
        fig.reviewed_episodes = len(diagnoses)
        compared = {e: v for e, v in diagnoses.items() if e in labels}
        fig.agreement = agreement([(labels[e][0], tag or NONE) for e, (tag, _code) in compared.items()])
        fig.no_suggestion_codes = dict(
            Counter(code or "?" for tag, code in compared.values() if not tag).most_common()
        )
        fig.curated_not_diagnosed = sum(1 for e in labels if e not in diagnoses)
        report.diagnosis = fig
    return report


def _pct(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


def _num(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def render_review_report(report: ReviewReport) -> Group:
    parts: list[Any] = []
    head = f"{report.curated_episodes} episodes carry a curator tag"
    if report.independent:
        head += " (tags written by accepting a review left out)"
    parts.append(Text(head, style="bold"))
    table = Table(
        title="agreement with curators (episodes with a tag and a review or diagnosis; "
        "no suggestion counts as a disagreement)"
    )
    for col in (
        "suggester",
        "n",
        "no sugg.",
        "class",
        "subclass",
        "κ class",
        "κ subclass",
        "reviewed",
        "$/episode",
        "dropped cites",
        "dropped codes",
        "accepted",
    ):
        table.add_column(col, justify="left" if col == "suggester" else "right")
    sugg = list(report.reviewers) + ([report.diagnosis] if report.diagnosis else [])
    for f in sugg:
        a = f.agreement
        cost = (
            "n/a"
            if f.kind == "diagnosis"
            else ("unknown" if f.cost_per_episode is None else f"${f.cost_per_episode:.4f}")
        )
        table.add_row(
            f.name,
            str(a.n if a else 0),
            str(a.no_suggestion if a else 0),
            _pct(a.class_agreement if a else None),
            _pct(a.subclass_agreement if a else None),
            _num(a.kappa_class if a else None),
            _num(a.kappa_subclass if a else None),
            str(f.reviewed_episodes),
            cost,
            f"{f.dropped_citations}/{f.dropped_citations + f.citations_kept}"
            if f.kind == "review"
            else "n/a",
            str(f.dropped_codes) if f.kind == "review" else "n/a",
            str(f.accepted) if f.kind == "review" else "n/a",
        )
    parts.append(table)
    if report.diagnosis is None:
        parts.append(
            Text(f"deterministic diagnosis: unavailable ({report.diagnosis_unavailable})", style="yellow")
        )
    for f in sugg:
        a = f.agreement
        if a and a.no_suggestion:
            codes = ", ".join(f"{k} {v}" for k, v in f.no_suggestion_codes.items())
            parts.append(
                Text(
                    f"{f.name}: {a.no_suggestion} of {a.n} curated episodes got no suggestion"
                    + (f" ({codes})" if codes else "")
                    + f", counted as disagreements; where it suggested ({a.n - a.no_suggestion}): "
                    f"class {_pct(a.class_agreement_suggested)}, "
                    f"subclass {_pct(a.subclass_agreement_suggested)}"
                )
            )
        if f.kind == "diagnosis" and f.curated_not_diagnosed:
            parts.append(
                Text(
                    f"{f.name}: {counted(f.curated_not_diagnosed, 'curated episode')} not diagnosed yet "
                    "(bandpass diagnose --all), not in its n",
                    style="yellow",
                )
            )
        if not f.agreement or not f.agreement.per_class:
            continue
        pc = Table(title=f"per class: {f.name}")
        for col in ("class", "curators", "suggested", "correct", "precision", "recall"):
            pc.add_column(col, justify="left" if col == "class" else "right")
        for c in f.agreement.per_class:
            pc.add_row(
                c.label, str(c.support), str(c.predicted), str(c.correct), _pct(c.precision), _pct(c.recall)
            )
        if f.agreement.no_suggestion:
            pc.add_row("(no suggestion)", "—", str(f.agreement.no_suggestion), "0", "—", "—")
        parts.append(pc)
        if f.kind == "review" and (f.cost_unknown_reviews or set(f.by_status) - {"ok"}):
            extra = ", ".join(f"{k} {v}" for k, v in sorted(f.by_status.items()))
            note = f"{f.name}: reviews by status: {extra}"
            if f.cost_unknown_reviews:
                note += (
                    f"; cost unknown for {counted(f.cost_unknown_reviews, 'review')} (no price for the model)"
                )
            parts.append(Text(note, style="yellow"))
    return Group(*parts)
