"""How far a suggester (Claude's review, the deterministic diagnosis) agrees with curators.

Pure functions over (curator label, suggested label) pairs, so the figures are tested by hand-computed
examples. Labels are ``class.subclass``; a suggestion with no usable code (the model said ``none``, or
validation dropped its code) is the label ``"none"`` and counts as a disagreement, never as a skip — a
reviewer that declines to commit must not look more accurate for it.

Cohen's kappa corrects raw agreement for the agreement two raters would reach by chance given how often
each uses each label: ``(p_o - p_e) / (1 - p_e)``. It is undefined (None) when ``p_e == 1`` (both raters
always say the same single label).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

NONE = "none"


def class_of(label: str) -> str:
    return label.partition(".")[0] if label and label != NONE else NONE


def cohens_kappa(pairs: Sequence[tuple[str, str]]) -> float | None:
    n = len(pairs)
    if n == 0:
        return None
    po = sum(1 for a, b in pairs if a == b) / n
    ca = Counter(a for a, _ in pairs)
    cb = Counter(b for _, b in pairs)
    pe = sum(ca[k] * cb.get(k, 0) for k in ca) / (n * n)
    if pe >= 1.0:
        return None
    return (po - pe) / (1 - pe)


@dataclass
class ClassFigures:
    label: str
    support: int  # how many episodes curators gave this class
    predicted: int  # how many the suggester gave this class
    correct: int

    @property
    def precision(self) -> float | None:
        return self.correct / self.predicted if self.predicted else None

    @property
    def recall(self) -> float | None:
        return self.correct / self.support if self.support else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "class": self.label,
            "support": self.support,
            "predicted": self.predicted,
            "correct": self.correct,
            "precision": _r(self.precision),
            "recall": _r(self.recall),
        }


@dataclass
class Agreement:
    n: int
    class_agreement: float | None
    subclass_agreement: float | None
    kappa_class: float | None
    kappa_subclass: float | None
    per_class: list[ClassFigures] = field(default_factory=list)
    #: Of the ``n``, how many got no suggestion (label ``none``): counted in ``n`` as disagreements, and
    #: reported apart so a low figure can be read as "often silent" rather than "often wrong".
    no_suggestion: int = 0
    #: The agreements over the ``n - no_suggestion`` episodes that did get a suggestion.
    class_agreement_suggested: float | None = None
    subclass_agreement_suggested: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "n": self.n,
            "class_agreement": _r(self.class_agreement),
            "subclass_agreement": _r(self.subclass_agreement),
            "kappa_class": _r(self.kappa_class),
            "kappa_subclass": _r(self.kappa_subclass),
            "per_class": [c.as_dict() for c in self.per_class],
            "no_suggestion": self.no_suggestion,
            "class_agreement_suggested": _r(self.class_agreement_suggested),
            "subclass_agreement_suggested": _r(self.subclass_agreement_suggested),
        }


def _r(x: float | None) -> float | None:
    return None if x is None else round(x, 4)


def agreement(pairs: Sequence[tuple[str, str]]) -> Agreement:
    """Figures for (curator, suggestion) label pairs; per-class rows for every class either side used."""
    n = len(pairs)
    full = [(a or NONE, b or NONE) for a, b in pairs]
    cls = [(class_of(a), class_of(b)) for a, b in full]
    labels = sorted(({a for a, _ in cls} | {b for _, b in cls}) - {NONE})
    per_class = [
        ClassFigures(
            label=c,
            support=sum(1 for a, _ in cls if a == c),
            predicted=sum(1 for _, b in cls if b == c),
            correct=sum(1 for a, b in cls if a == b == c),
        )
        for c in labels
    ]
    said = [(a, b) for a, b in full if b != NONE]
    said_cls = [(class_of(a), class_of(b)) for a, b in said]
    m = len(said)
    return Agreement(
        n=n,
        class_agreement=sum(1 for a, b in cls if a == b) / n if n else None,
        subclass_agreement=sum(1 for a, b in full if a == b) / n if n else None,
        kappa_class=cohens_kappa(cls),
        kappa_subclass=cohens_kappa(full),
        per_class=per_class,
        no_suggestion=n - m,
        class_agreement_suggested=sum(1 for a, b in said_cls if a == b) / m if m else None,
        subclass_agreement_suggested=sum(1 for a, b in said if a == b) / m if m else None,
    )
