"""Adaptive sampling: rollouts only where they decide something.

A fixed batch gives every task the same k whatever its evidence says. An adaptive batch
(``bandpass run --model M --adaptive``) runs in rounds, each planned from everything the model has done on
the batch's tasks so far:

1. **First round.** Every task still undecided with fewer than ``first`` valid samples gets topped up to
   ``first`` (default 1: with the default band one pass already settles the lower edge, see
   ``confidence.py``, and a task with none yet cannot be ranked).
2. **Later rounds.** Only undecided tasks are candidates (decided ones are never sampled again), and only
   those with fewer than ``max_k`` attempts in the batch and none in flight. Each is scored by how many
   band edges further episodes are expected to settle per episode spent: for horizons of ``step``,
   ``2·step``, ``4·step``… up to its remaining attempts, the Jeffreys posterior predictive
   (beta-binomial) of the passes it would see, times the edges the decision rule would settle at that
   point, divided by the episodes it costs; the best horizon is its score. The ``round_tasks`` best get
   ``step`` more attempts each (default 1, so that a task is looked at after every episode and stops
   the moment it is decided); ties go to the widest interval. The score puts first what is close to a
   decision (a task at 3/3 needs a few more passes to clear the top edge) and last what needs far more
   episodes than a decision is worth: a task right at an edge is the most uncertain but the slowest to
   settle, and a task never solved needs 51 episodes to be shown below ``lo = 0.1`` on pass@2.
3. **Stop** when every task is decided, the budget is spent, every undecided task has ``max_k``
   attempts, or no undecided task can be decided within ``max_k`` (its score is 0).

The sampler looks after every round and stops each task the moment it is decided — the optional-stopping
pattern that breaks a fixed-n interval. The decision rule (``engine/calibration/confidence.py``) uses edge
tests calibrated for a look after every episode, so the stated confidence holds regardless; the planner
only chooses *where* to spend, which cannot make a decision less valid. ``bench/bench_adaptive.py``
measures both (accuracy per rollout against fixed k, and the misclassification rate over many seeds).

``plan_round`` is pure (the benchmark drives it with simulated episodes); ``AdaptiveSampler`` is the
``run_batch(next_round=...)`` hook that reads the store, plans, queues the round with
``engine.run.rollouts.extend_batch`` and records every decision in the band ledger.
"""

from __future__ import annotations

import fcntl
import math
import os
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from typing import Any

from ...store import queries
from ...store.db import session
from ..core.config import BandConfig, Config
from ..core.errors import BandpassError
from ..core.workspace import Workspace
from ..run import rollouts
from . import ledger
from .calibrate import GateParams, TaskEstimate, estimate
from .confidence import JEFFREYS, decide, log_beta

ALL_DECIDED = "every task decided"
BUDGET_SPENT = "budget spent"
MAX_K = "every undecided task reached --max-k"
FUTILE = "no undecided task can be decided within --max-k"
STOP_REASONS = (ALL_DECIDED, BUDGET_SPENT, MAX_K, FUTILE)

DEFAULT_FIRST = 1
DEFAULT_STEP = 1
DEFAULT_MAX_K = 32


class AdaptiveError(BandpassError, ValueError):
    """Settings no adaptive batch can run with; the message is the one line the CLI prints."""


@dataclass(frozen=True)
class AdaptiveSettings:
    """What an adaptive batch decides and how it may spend; stored with the batch (``adaptive_json``)."""

    lo: float = BandConfig.lo
    hi: float = BandConfig.hi
    k: int = BandConfig.k  # the k of pass@k the band is on
    confidence: float = BandConfig.confidence
    min_samples: int = 1
    first: int = DEFAULT_FIRST  # attempts per task in the first round
    step: int = DEFAULT_STEP  # attempts per chosen task in a later round
    max_k: int = DEFAULT_MAX_K  # most attempts the batch gives one task
    budget: int | None = None  # most attempts in the whole batch (None: only max_k bounds it)
    round_tasks: int = 8  # tasks per later round

    def __post_init__(self) -> None:
        if not 0 <= self.lo <= self.hi <= 1:
            raise AdaptiveError(f"--band: expected LO:HI with 0 <= LO <= HI <= 1, got {self.lo}:{self.hi}")
        if not 0 < self.confidence < 1:
            raise AdaptiveError(
                f"--confidence: expected a number strictly between 0 and 1, got {self.confidence}"
            )
        for name in ("k", "first", "step", "max_k", "round_tasks", "min_samples"):
            if getattr(self, name) < 1:
                raise AdaptiveError(
                    f"--{name.replace('_', '-')}: expected an integer >= 1, got {getattr(self, name)}"
                )
        if self.first > self.max_k:
            raise AdaptiveError(f"--k: the first round ({self.first}) cannot exceed --max-k ({self.max_k})")
        if self.budget is not None and self.budget < 1:
            raise AdaptiveError(f"--budget: expected a number of episodes >= 1, got {self.budget}")

    @property
    def gate_params(self) -> GateParams:
        return GateParams(
            lo=self.lo, hi=self.hi, k=self.k, min_samples=self.min_samples, confidence=self.confidence
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> AdaptiveSettings:
        known = {f: d[f] for f in cls.__dataclass_fields__ if f in d}
        return cls(**known)


@dataclass(frozen=True)
class TaskState:
    """One task's evidence as the planner sees it."""

    key: int  # task version id (any hashable id in the benchmark)
    n: int  # valid samples of the model on it, all batches
    c: int  # passes among them
    attempts: int = 0  # attempts this batch gave it (finished or not)
    in_flight: int = 0  # this batch's attempts not finished yet
    infra_errors: int = 0


@dataclass
class Plan:
    """One round: attempts per task key, or why there is none."""

    attempts: dict[int, int] = field(default_factory=dict)
    stopped: str = ""  # one of STOP_REASONS when the sampler is done; "" otherwise
    decided: int = 0
    undecided: int = 0
    spent: int = 0  # attempts the batch holds before this round
    first_round: bool = False

    @property
    def episodes(self) -> int:
        return sum(self.attempts.values())

    @property
    def waiting(self) -> bool:
        """Nothing to add now, but episodes in flight may change that."""
        return not self.attempts and not self.stopped


def _bb_logpmf(j: int, m: int, a: float, b: float) -> float:
    return (
        math.lgamma(m + 1)
        - math.lgamma(j + 1)
        - math.lgamma(m - j + 1)
        + log_beta(a + j, b + m - j)
        - log_beta(a, b)
    )


def horizons(step: int, remaining: int) -> list[int]:
    """``step, 2·step, 4·step, …`` below ``remaining``, then ``remaining`` itself."""
    out: list[int] = []
    m = step
    while m < remaining:
        out.append(m)
        m *= 2
    if remaining > 0:
        out.append(remaining)
    return out


@lru_cache(maxsize=65536)
def score(
    c: int,
    n: int,
    remaining: int,
    step: int,
    lo: float,
    hi: float,
    k: int,
    confidence: float,
    min_samples: int,
) -> float:
    """Expected band edges settled per further episode, at the best horizon (module docstring, step 2).

    0 when the task is decided, has no attempts left, or no horizon within ``remaining`` can settle an
    edge it has open."""
    now = decide(c, n, lo, hi, k, confidence, min_samples)
    if now.decided or remaining <= 0:
        return 0.0
    open_lo, open_hi = now.lo_side is None, now.hi_side is None
    best = 0.0
    for m in horizons(step, remaining):
        gain = 0.0
        for j in range(m + 1):
            later = decide(c + j, n + m, lo, hi, k, confidence, min_samples)
            settled = (open_lo and later.lo_side is not None) + (open_hi and later.hi_side is not None)
            if settled:
                gain += settled * math.exp(_bb_logpmf(j, m, JEFFREYS + c, JEFFREYS + n - c))
        best = max(best, gain / m)
    return best


def task_score(t: TaskState, s: AdaptiveSettings) -> float:
    """``score`` for one task, scaled by the share of its episodes that were valid samples (an
    infra-heavy task yields fewer decisions per episode spent)."""
    base = score(t.c, t.n, s.max_k - t.attempts, s.step, s.lo, s.hi, s.k, s.confidence, s.min_samples)
    runs = t.n + t.infra_errors
    return base * (t.n / runs if runs else 1.0)


def plan_round(tasks: Sequence[TaskState], s: AdaptiveSettings, spent: int | None = None) -> Plan:
    """The next round for ``tasks`` (in scope order) under ``s``: pure, see the module docstring.

    ``spent`` is the number of attempts the batch already holds (default: the sum of ``attempts``).
    """
    spent = sum(t.attempts for t in tasks) if spent is None else spent
    decisions = {t.key: decide(t.c, t.n, s.lo, s.hi, s.k, s.confidence, s.min_samples) for t in tasks}
    undecided = [t for t in tasks if not decisions[t.key].decided]
    plan = Plan(decided=len(tasks) - len(undecided), undecided=len(undecided), spent=spent)
    left = math.inf if s.budget is None else s.budget - spent
    if not undecided:
        plan.stopped = ALL_DECIDED
        return plan
    if left <= 0:
        plan.stopped = BUDGET_SPENT
        return plan
    room = [t for t in undecided if t.attempts < s.max_k]
    if not room:
        plan.stopped = MAX_K
        return plan
    ready = [t for t in room if t.in_flight == 0]
    flying = len(ready) < len(room)

    def give(t: TaskState, want: int) -> None:
        nonlocal left
        n = int(min(want, s.max_k - t.attempts, left))
        if n > 0:
            plan.attempts[t.key] = n
            left -= n

    thin = [t for t in ready if t.n < s.first]
    if thin:
        plan.first_round = True
        for t in thin:
            if left <= 0:
                break
            give(t, s.first - t.n)
        return plan
    scored = [(task_score(t, s), t) for t in ready]
    useful = [(v, t) for v, t in scored if v > 0]
    if not useful:
        if not flying:
            plan.stopped = FUTILE
        return plan

    def width(t: TaskState) -> float:
        d = decisions[t.key]
        return d.pass_at_k[1] - d.pass_at_k[0]

    order = {t.key: i for i, t in enumerate(tasks)}
    useful.sort(key=lambda vt: (-vt[0], -width(vt[1]), order[vt[1].key]))
    for _v, t in useful[: s.round_tasks]:
        if left <= 0:
            break
        give(t, s.step)
    return plan


# --- the hook on a real batch ----------------------------------------------------------------------------


@dataclass
class AdaptiveStatus:
    """Where an adaptive batch stands, for live views: rounds planned, decisions, spend."""

    rounds: int = 0
    decided: int = 0
    undecided: int = 0
    spent: int = 0
    budget: int | None = None
    stopped: str = ""
    last_round: int = 0  # episodes in the latest round

    def line(self) -> str:
        budget = f"{self.spent}/{self.budget}" if self.budget is not None else f"{self.spent} (no cap)"
        tail = f" · stopped: {self.stopped}" if self.stopped else ""
        return (
            f"round {self.rounds} · decided {self.decided} · undecided {self.undecided} · "
            f"episodes {budget}{tail}"
        )

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def _evidence(
    ws: Workspace, model: str, version_ids: Sequence[int], batch_id: str | None, k: int
) -> tuple[list[TaskState], list[TaskEstimate]]:
    """The planner's view of ``version_ids`` (in that order) from the store — every valid sample of
    ``model`` on each version, and this batch's attempts — and the estimates behind it."""
    with session(ws.engine) as s:
        sources = {src.version_id: src for src in queries.calibration_sources(s, model, version_ids)}
        mine = queries.batch_attempts(s, batch_id) if batch_id else {}
    states, ests = [], []
    for vid in version_ids:
        src = sources.get(vid)
        if src is None:
            continue
        e = estimate(src, model, ks=sorted({1, k}))
        a = mine.get(vid, queries.BatchAttempts())
        states.append(TaskState(vid, e.n, e.c, a.attempts, a.unfinished, e.infra_errors))
        ests.append(e)
    return states, ests


def task_states(
    ws: Workspace, model: str, version_ids: Sequence[int], batch_id: str | None
) -> list[TaskState]:
    """The planner's view of ``version_ids`` from the store (see ``_evidence``)."""
    return _evidence(ws, model, version_ids, batch_id, 1)[0]


@contextmanager
def _planning_lock(ws: Workspace, batch_id: str) -> Iterator[None]:
    """Only one process plans a batch's round at a time (two runners on one batch must not both add it)."""
    path = ws.root / ".locks" / f"batch-{batch_id}.plan.lock"
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)


class AdaptiveSampler:
    """``run_batch(next_round=sampler)``: plans each round from the store, queues it, records decisions.

    Everything it needs is in the batch row (``adaptive_json``: the settings, the task versions in scope,
    the rounds so far and, once it stops on its own, why), so ``bandpass run --resume`` rebuilds it with
    ``from_batch`` and continues the rounds.
    """

    def __init__(
        self,
        ws: Workspace,
        batch_id: str,
        model: str,
        version_ids: Sequence[int],
        settings: AdaptiveSettings,
        *,
        config: Config | None = None,
        rounds: int = 0,
        on_round: Callable[[AdaptiveStatus], None] | None = None,
    ) -> None:
        self.ws, self.batch_id, self.model = ws, batch_id, model
        self.version_ids = list(dict.fromkeys(version_ids))
        self.settings = settings
        self.config = config
        self.on_round = on_round
        self.lock = threading.Lock()
        self.status = AdaptiveStatus(rounds=rounds, budget=settings.budget)

    @classmethod
    def from_batch(cls, ws: Workspace, batch_id: str, *, config: Config | None = None) -> AdaptiveSampler:
        batch = rollouts.get_batch(ws, batch_id)
        state = queries.adaptive_settings(batch)
        if not state:
            raise AdaptiveError(f"batch {batch_id} is not adaptive")
        sampler = cls(
            ws,
            batch_id,
            batch.agent,
            state.get("versions", []),
            AdaptiveSettings.from_dict(state.get("settings", {})),
            config=config,
            rounds=int(state.get("rounds", 0)),
        )
        sampler.status.stopped = state.get("stopped", "")
        return sampler

    def state(self) -> dict[str, Any]:
        """What the batch row keeps (``adaptive_json``): settings, scope, rounds, stop reason."""
        return {
            "settings": self.settings.as_dict(),
            "versions": self.version_ids,
            "rounds": self.status.rounds,
            "stopped": self.status.stopped,
        }

    def _save(self) -> None:
        with session(self.ws.engine) as s:
            queries.set_batch_adaptive(s, self.batch_id, self.state())

    def preview(self) -> Plan:
        """The round the sampler would plan now, without queueing it (what another round would cost)."""
        return plan_round(task_states(self.ws, self.model, self.version_ids, self.batch_id), self.settings)

    def refresh(self) -> AdaptiveStatus:
        """Recounts decisions and spend from the store (for a live view between rounds)."""
        plan = self.preview()
        with self.lock:
            self.status.decided, self.status.undecided, self.status.spent = (
                plan.decided,
                plan.undecided,
                plan.spent,
            )
            return AdaptiveStatus(**asdict(self.status))

    def __call__(self) -> int:
        """Plans and queues the next round; returns the episodes added (0: none now, or stopped)."""
        with self.lock, _planning_lock(self.ws, self.batch_id):
            states, ests = _evidence(self.ws, self.model, self.version_ids, self.batch_id, self.settings.k)
            plan = plan_round(states, self.settings)
            ledger.record(
                self.ws, self.model, ests, self.settings.gate_params, f"adaptive:{self.batch_id}", self.config
            )
            added = rollouts.extend_batch(self.ws, self.batch_id, plan.attempts) if plan.attempts else 0
            st = self.status
            st.decided, st.undecided, st.spent = plan.decided, plan.undecided, plan.spent + added
            if added:
                st.rounds += 1
                st.last_round = added
            if plan.stopped:
                st.stopped = plan.stopped
            if added or plan.stopped:
                self._save()
            snapshot = AdaptiveStatus(**asdict(st))
        if self.on_round is not None:
            self.on_round(snapshot)
        return added


def plan_adaptive_batch(
    ws: Workspace,
    model: str,
    version_ids: Sequence[int],
    settings: AdaptiveSettings,
    *,
    kind: str = "model",
    base_url: str = "",
    params: dict[str, Any] | None = None,
    config: Config | None = None,
) -> AdaptiveSampler:
    """Creates an adaptive batch (its row, its settings, no episodes yet) and returns its sampler; the
    first round is queued by the sampler's first call, i.e. when ``run_batch`` finds the queue empty."""
    if not version_ids:
        raise rollouts.BatchError("no task versions to run (import tasks first: bandpass import DIR)")
    with session(ws.engine) as s:
        missing = [v for v in version_ids if queries.get_version(s, v) is None]
    if missing:
        raise rollouts.BatchError(f"task version {missing[0]} does not exist")
    batch_id = rollouts.new_batch_id()
    sampler = AdaptiveSampler(ws, batch_id, model, version_ids, settings, config=config)
    rollouts.new_batch(
        ws,
        model,
        settings.first,
        batch_id=batch_id,
        kind=kind,
        base_url=base_url,
        params=params,
        adaptive=sampler.state(),
    )
    return sampler


def run_adaptive(
    ws: Workspace,
    sampler: AdaptiveSampler,
    **run_kwargs: Any,
) -> tuple[rollouts.BatchSummary, AdaptiveStatus]:
    """Runs (or resumes) an adaptive batch to its end: ``run_planned`` with the sampler as the hook."""
    summary = rollouts.run_planned(ws, sampler.batch_id, next_round=sampler, **run_kwargs)
    return summary, sampler.refresh()


__all__ = [
    "ALL_DECIDED",
    "BUDGET_SPENT",
    "FUTILE",
    "MAX_K",
    "AdaptiveError",
    "AdaptiveSampler",
    "AdaptiveSettings",
    "AdaptiveStatus",
    "Plan",
    "TaskState",
    "plan_adaptive_batch",
    "plan_round",
    "run_adaptive",
    "score",
    "task_states",
]
