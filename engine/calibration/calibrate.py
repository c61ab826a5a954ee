"""Calibration: per (task version, policy model) solvability estimates, the band, and the export gates.

Accounting rules (DESIGN "Outcomes and accounting"), applied to the *latest* version of each task and the
finished episodes of one policy model:

- ``passed`` and ``failed`` are valid samples; ``passed`` is a success.
- ``agent_error:<code>`` IS a valid sample and counts as a failure: the policy together with its harness
  failed to finish (turn limit, unparsable action, context overflow). Training sees the same failure, so
  hiding it would overstate solvability. Harness brittleness is found by tagging, not by dropping samples.
- ``infra_error:<code>`` is NOT a sample: no valid reward exists. It never enters ``n``; it is counted and
  reported beside it with its own rate, so a run where the infrastructure failed (146 of 151 episodes)
  can never masquerade as a hard task (pass@2 = 2.65%).
- Any other finished outcome (empty, unknown spelling) is counted as ``unclassified`` and kept out of
  ``n`` for the same reason: a result we cannot read is not evidence of failure.

pass@k uses the unbiased estimator over all ``n`` valid samples, ``1 - C(n-c, k) / C(n, k)``, computed
exactly with integers (``math.comb``) and rounded once; it is what the report shows. Where a task stands
relative to the band is *decided* (``engine/calibration/confidence.py``): ``in``/``below``/``above`` only
when an interval valid at the stated confidence, however often anyone looks, lies on one side of each
edge, otherwise ``undecided``. The gates read the decision, never the point estimate.
"""

from __future__ import annotations

import math
import re
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import lru_cache
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.queries import endstate as endstate_store
from ..core import outcomes
from ..core.config import BandConfig
from ..core.errors import InvalidInput
from ..core.workspace import Workspace
from .confidence import (
    DEFAULT_CONFIDENCE,
    BandDecision,
    Status,
    decide,
    rate_interval,
)

#: in | below | above | undecided (engine/calibration/confidence.py)
BandStatus = Status

#: Above this infra-error rate a pass@k is not worth reading (the report shouts, the export gate refuses).
INFRA_WARN_RATE = 0.2
#: Instruction similarity (word 3-shingle Jaccard) at or above which the later task is a duplicate.
DUPLICATE_THRESHOLD = 0.8
#: Reward std above which a task gives a usable learning signal (the field's health signal).
HEALTHY_REWARD_STD = 0.1

GATE_AUDIT = "audit"
GATE_BLOCKING = "blocking_tag"
GATE_BAND = "band"
GATE_DUPLICATE = "duplicate"
GATE_INFRA = "infra_rate"


@lru_cache(maxsize=8192)  # pure; a band over 10,000 tasks asks for a few hundred distinct (n, c, k)
def pass_at_k(n: int, c: int, k: int) -> float | None:
    """Unbiased pass@k from ``n`` valid samples with ``c`` successes.

    ``k > n`` returns None (undefined): the estimator needs k distinct samples, and silently using k=n
    would report pass@n under the name pass@k. ``n == 0`` is None for the same reason. When fewer than
    ``k`` failures exist (``n - c < k``) every k-subset contains a success, so the value is exactly 1.0.
    """
    if k < 1:
        raise ValueError(f"pass@k: k must be >= 1, got {k}")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: need 0 <= c <= n, got n={n} c={c}")
    if n == 0 or k > n:
        return None
    if n - c < k:
        return 1.0
    return float(1 - Fraction(math.comb(n - c, k), math.comb(n, k)))


@dataclass
class TaskEstimate:
    """One task version's solvability for one model, plus the facts the gates look at."""

    task: str
    task_id: int
    version_id: int
    version_hash: str
    path: str
    instruction: str
    category: str
    difficulty: str
    model: str
    n: int = 0  # valid samples: passed + failed + agent_error
    c: int = 0  # passes
    infra_errors: int = 0
    agent_errors: int = 0
    unclassified: int = 0
    pass_at: dict[int, float | None] = field(default_factory=dict)
    reward_std: float | None = None
    outcomes: dict[str, int] = field(default_factory=dict)
    audit: str = ""
    blocking_tags: int = 0
    #: The valid samples in episode order (1 passed, 0 not) and their episode ids: what paired tests
    #: across checkpoints pair, and the evidence the band ledger records.
    samples: list[int] = field(default_factory=list)
    sample_ids: list[int] = field(default_factory=list)
    #: How the episodes were verified: clean_room | service (a fresh container in the service's network
    #: namespace) | in_place (asked by the task: the guard was the gate) | mixed | "" (none yet)
    verified: str = ""

    @property
    def episodes(self) -> int:
        """All finished episodes, valid or not: the infra rate's denominator."""
        return self.n + self.infra_errors + self.unclassified

    @property
    def pass_rate(self) -> float | None:
        return self.c / self.n if self.n else None

    @property
    def infra_rate(self) -> float:
        return self.infra_errors / self.episodes if self.episodes else 0.0

    @property
    def infra_heavy(self) -> bool:
        return self.infra_rate > INFRA_WARN_RATE

    def rate_interval(self, confidence: float = DEFAULT_CONFIDENCE) -> tuple[float, float]:
        """The anytime-valid interval on the per-sample pass rate (engine/calibration/confidence.py)."""
        return rate_interval(self.c, self.n, confidence)

    def decision(self, params: GateParams) -> BandDecision:
        """Where this task stands relative to ``params``' band, at ``params.confidence``."""
        return decide(self.c, self.n, params.lo, params.hi, params.k, params.confidence, params.min_samples)

    def as_dict(self) -> dict[str, Any]:
        skip = ("pass_at", "instruction", "samples", "sample_ids")
        d = {k: v for k, v in self.__dict__.items() if k not in skip}
        d["pass_at"] = {str(k): v for k, v in sorted(self.pass_at.items())}
        d["pass_rate"] = self.pass_rate
        d["infra_rate"] = self.infra_rate
        d["infra_heavy"] = self.infra_heavy
        d["episodes"] = self.episodes
        return d


@lru_cache(maxsize=1024)  # pure; called once per stored episode, over a handful of distinct outcomes
def classify(outcome: str) -> str:
    """``passed`` | ``failed`` | ``agent_error`` | ``infra_error`` | ``unclassified``."""
    if outcome in ("passed", "failed"):
        return outcome
    head = outcomes.kind_of(outcome)
    if head in (outcomes.AGENT, outcomes.INFRA):
        return head
    return "unclassified"


def reward_std(rewards: list[float]) -> float | None:
    """``statistics.pstdev`` of the rewards (None for none), the same value to the last bit.

    Why not call it directly: it computes exactly, with fractions, which was most of a band's cost over
    100,000 episodes (bench/bench_scale.py). Rewards are almost always 0 and 1, and then the value
    depends only on how many of each (exact arithmetic does not depend on order), so it is computed once
    per (ones, zeros) and remembered."""
    if not rewards:
        return None
    ones, zeros = rewards.count(1.0), rewards.count(0.0)
    if ones + zeros == len(rewards):
        return _binary_pstdev(ones, zeros)
    return statistics.pstdev(rewards)


@lru_cache(maxsize=8192)
def _binary_pstdev(ones: int, zeros: int) -> float:
    return statistics.pstdev([1.0] * ones + [0.0] * zeros)


def estimate(source: queries.CalibrationSource, model: str, ks: Sequence[int] = (1, 2)) -> TaskEstimate:
    """Applies the accounting rules in the module docstring to one task's finished episodes."""
    est = TaskEstimate(
        task=source.name,
        task_id=source.task_id,
        version_id=source.version_id,
        version_hash=source.version_hash,
        path=source.path,
        instruction=source.instruction,
        category=source.category,
        difficulty=source.difficulty,
        model=model,
        audit=source.audit,
        blocking_tags=source.blocking_tags,
    )
    rewards: list[float] = []
    counts: Counter[str] = Counter()
    ids = source.episode_ids or [0] * len(source.outcomes)
    for (outcome, reward), eid in zip(source.outcomes, ids, strict=True):
        counts[outcome or "(none)"] += 1
        kind = classify(outcome)
        if kind == "infra_error":
            est.infra_errors += 1
            continue
        if kind == "unclassified":
            est.unclassified += 1
            continue
        est.n += 1
        est.samples.append(1 if kind == "passed" else 0)
        est.sample_ids.append(eid)
        if kind == "passed":
            est.c += 1
        if kind == "agent_error":
            est.agent_errors += 1
        # An agent_error is a failure whatever the verifier wrote afterwards (that reward is evidence for
        # the curator, not the outcome), so it contributes 0 here exactly as it contributes to n - c.
        # A missing reward reads as the outcome says: 1 for passed, 0 for failed.
        if kind == "agent_error" or reward is None:
            rewards.append(1.0 if kind == "passed" else 0.0)
        else:
            rewards.append(float(reward))
    est.outcomes = dict(sorted(counts.items()))
    est.pass_at = {k: pass_at_k(est.n, est.c, k) for k in sorted(set(ks))}
    # Population std: the spread of the rewards a GRPO group would see, not an estimate of a parent's.
    est.reward_std = reward_std(rewards)
    return est


def estimates(ws: Workspace, model: str, ks: Iterable[int] = (1, 2)) -> list[TaskEstimate]:
    """Estimates for the latest version of every task in the workspace, in first-import order."""
    ks = sorted(set(ks))
    with session(ws.engine) as s:
        sources = queries.calibration_sources(s, model)
        verified = endstate_store.verified_how(s, [src.version_id for src in sources])
    out = [estimate(src, model, ks) for src in sources]
    for est in out:
        est.verified = verified.get(est.version_id, "")
    return out


def band_status(
    est: TaskEstimate,
    lo: float,
    hi: float,
    min_samples: int,
    k: int = 2,
    confidence: float = DEFAULT_CONFIDENCE,
) -> BandStatus:
    """Where the task stands relative to the band ``[lo, hi]`` on pass@k, both edges inclusive, *decided*
    at ``confidence`` (engine/calibration/confidence.py): ``in``/``below``/``above`` only when the task's
    interval lies on one side of each edge, ``undecided`` otherwise and whenever ``n < min_samples``.

    A task with a handful of samples is undecided, never "below" or "above" by the luck of one episode.
    """
    return decide(est.c, est.n, lo, hi, k, confidence, min_samples).status


_WORD = re.compile(r"[a-z0-9_]+")


def shingles(text: str, size: int = 3) -> frozenset[str]:
    """Word ``size``-shingles of a normalised instruction (lowercase, punctuation and spacing dropped)."""
    words = _WORD.findall(text.lower())
    if len(words) < size:
        return frozenset([" ".join(words)]) if words else frozenset()
    return frozenset(" ".join(words[i : i + size]) for i in range(len(words) - size + 1))


def near_duplicates(
    items: Sequence[tuple[str, str]], threshold: float = DUPLICATE_THRESHOLD
) -> dict[str, tuple[str, float]]:
    """``{later task: (earlier task, similarity)}`` for instructions whose shingle Jaccard >= threshold.

    ``items`` are ``(task name, instruction)`` in import order; the later one is the duplicate, so the
    task that was there first keeps its place and a regenerated copy never displaces it. Shingle
    Jaccard rather than difflib because it is order-insensitive at paragraph level and, through an
    inverted index, compares only pairs that share a shingle instead of all n² pairs.
    """
    index: dict[str, list[int]] = {}
    sets: list[frozenset[str]] = []
    out: dict[str, tuple[str, float]] = {}
    for i, (name, text) in enumerate(items):
        sh = shingles(text)
        shared: Counter[int] = Counter()
        for g in sh:
            for j in index.get(g, ()):
                shared[j] += 1
        best: tuple[float, int] | None = None
        for j, inter in shared.items():
            union = len(sh) + len(sets[j]) - inter
            sim = inter / union if union else 0.0
            if sim >= threshold and (best is None or sim > best[0] or (sim == best[0] and j < best[1])):
                best = (sim, j)
        if best is not None:
            out[name] = (items[best[1]][0], best[0])
        sets.append(sh)
        for g in sh:
            index.setdefault(g, []).append(i)
    return out


@dataclass
class GateParams:
    """The knobs the gates read; recorded verbatim with every export."""

    lo: float = BandConfig.lo
    hi: float = BandConfig.hi
    k: int = BandConfig.k
    min_samples: int = BandConfig.min_samples
    allow_warning: bool = False
    duplicate_threshold: float = DUPLICATE_THRESHOLD
    max_infra_rate: float = INFRA_WARN_RATE
    confidence: float = DEFAULT_CONFIDENCE

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def gates(ests: Sequence[TaskEstimate], params: GateParams) -> dict[str, list[str]]:
    """Per task name, the gates it fails (empty list: exportable). Strings are ``gate`` or ``gate:why``.

    - ``audit``: the latest audit must say ``accepted``. ``warning`` fails unless ``allow_warning``:
      a warning means the auditor saw something (a flaky rerun, a suspicious nop) and training data is
      the wrong place to find out which; the curator can opt in per export.
    - ``blocking_tag``: any uncleared blocking tag (invalidity, misalignment) on any episode of the
      version, whichever agent ran it: the defect is in the task, not in that model.
    - ``band``: the task is *decided* in the band at ``confidence`` (its interval inside ``[lo, hi]``);
      ``band:below``/``band:above`` when decided outside, ``band:undecided`` when the evidence cannot
      tell yet (too few samples, or a pass rate near an edge). Never the bare point estimate.
    - ``duplicate``: instruction near-duplicate of an earlier-imported task of the workspace (decided
      over all tasks, not only the ones passing other gates, so the answer does not move with the band).
    - ``infra_rate``: the task's infra-error rate above ``max_infra_rate``; its few valid samples may be
      honest, but an environment that fails this often wastes the trainer's rollouts.
    """
    dups = near_duplicates([(e.task, e.instruction) for e in ests], params.duplicate_threshold)
    accepted = {"accepted", "warning"} if params.allow_warning else {"accepted"}
    out: dict[str, list[str]] = {}
    for e in ests:
        failed: list[str] = []
        if e.audit not in accepted:
            failed.append(f"{GATE_AUDIT}:{e.audit or 'none'}")
        if e.blocking_tags:
            failed.append(f"{GATE_BLOCKING}:{e.blocking_tags}")
        status = e.decision(params).status
        if status != "in":
            failed.append(f"{GATE_BAND}:{status}")
        if e.task in dups:
            failed.append(f"{GATE_DUPLICATE}:{dups[e.task][0]}")
        if e.infra_rate > params.max_infra_rate:
            failed.append(f"{GATE_INFRA}:{e.infra_rate:.2f}")
        out[e.task] = failed
    return out


def exportable(ests: Sequence[TaskEstimate], params: GateParams) -> list[TaskEstimate]:
    """The estimates that pass every gate, in the input order."""
    failed = gates(ests, params)
    return [e for e in ests if not failed[e.task]]


def parse_band(text: str) -> tuple[float, float]:
    """``"LO:HI"`` to floats, with the one-line error the CLI shows verbatim."""
    err = f"--band: expected LO:HI with 0 <= LO <= HI <= 1, got {text}"
    parts = text.split(":")
    if len(parts) != 2:
        raise InvalidInput(err)
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        raise InvalidInput(err) from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 <= lo <= hi <= 1):
        raise InvalidInput(err)
    return lo, hi
