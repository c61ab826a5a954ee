"""One generation attempt's record: its row, its transcript, what it spent, and the one outcome it ends with.

The :class:`Attempt` owns everything the turn loop shares — usage, cost, retries, turns, the transcript
and the bus — so the loop itself is plain control flow. Every way an attempt can end is an :class:`End`
(outcome + reason codes); :func:`end_for` is the one place a typed error (API failure, wall budget while
waiting, cancellation, Docker gone, a bug of ours) becomes an outcome.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker

from ...store import queries
from ...store.db import session
from ..core.events import EventBus, GenerationEvent
from ..core.redact import Redactor
from ..core.workspace import Workspace
from ..llm.client import ApiFailure, Cancelled, MetaClient, WaitPastDeadline
from ..llm.pricing import PriceTable, Usage
from ..sandbox.docker_engine import DockerUnavailable
from .prompts import PromptVersion
from .seeds import SeedAxes
from .tools import Accepted, Workbench

log = logging.getLogger(__name__)

GENERATIONS_DIR = "generations"


@dataclass
class Budget:
    """Limits of one attempt. Checked before every API call, so a turn in flight always completes and
    is recorded; a tool (an audit) already running is never interrupted. ``max_no_tool_turns`` counts
    replies without a tool call (cut at max_tokens or not): a model that only talks ends ``rejected``
    with ``generator.no_tool_use`` instead of burning ``max_turns``."""

    max_turns: int = 40
    max_tokens: int = 3_000_000  # input + output, all turns
    max_usd: float = 5.0
    max_wall_s: float = 1800.0
    max_no_tool_turns: int = 3

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


class BatchSpend:
    """Dollars spent by all generations of a batch, against the batch's ``--budget-usd``."""

    def __init__(self, limit_usd: float | None) -> None:
        self.limit_usd = limit_usd
        self._spent = 0.0
        self._lock = threading.Lock()

    def add(self, usd: float) -> None:
        with self._lock:
            self._spent += usd

    @property
    def spent(self) -> float:
        with self._lock:
            return self._spent

    def exhausted(self) -> bool:
        return self.limit_usd is not None and self.spent >= self.limit_usd


@dataclass
class GeneratorContext:
    """Everything one generation needs that the batch prepares once."""

    ws: Workspace
    client: MetaClient
    prompt: PromptVersion
    prices: PriceTable
    budget: Budget
    spend: BatchSpend
    bus: EventBus
    redactor: Redactor
    audit_reruns: int
    too_easy: list[str]
    cancel: threading.Event
    accept_warnings: bool
    docker_factory: Callable[[], docker.DockerClient] | None
    rng_lock: threading.Lock = field(default_factory=threading.Lock)


@dataclass
class GenerationResult:
    generation_id: int
    outcome: str
    reason: str
    prompt_version: str
    model: str
    difficulty: str
    seed_axes: dict[str, str]
    task_version_id: int | None = None
    task_name: str = ""
    turns: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    api_retries: int = 0
    scratch_dir: str = ""
    detail: str = ""  # one line for the curator when the attempt failed: what, where, the server's words

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class End(Exception):
    """How an attempt ends. Raised from anywhere in the loop, or returned; ``detail`` is the one line a
    curator reads for a failure."""

    outcome: str
    codes: list[str] = field(default_factory=list)
    accepted: Accepted | None = None
    detail: str = ""


def end_for(exc: BaseException, attempt: Attempt) -> End:
    """The one mapping from a typed error to an outcome; records the evidence in the transcript."""
    if isinstance(exc, End):
        return exc
    if isinstance(exc, ApiFailure):
        attempt.lose(exc.lost)
        attempt.record(
            {
                "type": "api_error",
                "code": exc.code,
                "detail": exc.detail,
                "request_id": exc.request_id,
                "retries": exc.retries,
            }
        )
        return End("error", [exc.code], detail=exc.detail)
    if isinstance(exc, WaitPastDeadline):
        attempt.record({"type": "budget", "exhausted": "budget.wall", "detail": str(exc)})
        return End("budget_exhausted", ["budget.wall", *attempt.audit_codes()], detail=str(exc))
    if isinstance(exc, Cancelled):
        return End("cancelled", ["generator.cancelled", *attempt.audit_codes()])
    if isinstance(exc, (DockerUnavailable, docker.errors.DockerException)):
        detail = f"Docker is unavailable: {exc}"
        attempt.record({"type": "error", "detail": detail})
        return End("error", ["infra.daemon_unavailable"], detail=detail)
    log.error("generation %s failed", attempt.gid, exc_info=exc)
    detail = f"internal error: {type(exc).__name__}: {exc}"
    attempt.record({"type": "error", "detail": f"{type(exc).__name__}: {exc}"})
    return End("error", ["generator.internal_error"], detail=detail)


class Attempt:
    """The stored record of one generation, kept current after every turn."""

    def __init__(self, ctx: GeneratorContext, axes: SeedAxes, difficulty: str) -> None:
        self.ctx = ctx
        self.axes = axes
        self.difficulty = difficulty
        self.model = ctx.client.model
        ws = ctx.ws
        with session(ws.engine) as s:
            gid = queries.create_generation(
                s,
                prompt_version=ctx.prompt.name,
                model=self.model,
                seed_axes_json=json.dumps(axes.as_dict(), sort_keys=True),
                difficulty=difficulty,
                outcome="running",
            ).id
        assert gid is not None
        self.gid: int = gid
        self.started = time.monotonic()
        self.deadline = self.started + ctx.budget.max_wall_s
        self.dir = ws.root / GENERATIONS_DIR / f"{gid:06d}"
        self.scratch = self.dir / f"gen-{gid}"
        self.workbench = Workbench(
            ws=ws,
            scratch=self.scratch,
            stage_root=self.dir / ".stage",
            generation_id=gid,
            audit_reruns=ctx.audit_reruns,
            accept_warnings=ctx.accept_warnings,
            bus=ctx.bus,
            client_factory=ctx.docker_factory,
        )
        self.usage = Usage()
        self.lost = Usage()  # tokens of broken or unfinished streams: never a turn, kept apart
        self.cost = 0.0
        self.retries = 0
        self.turns = 0
        self.transcript: list[dict[str, Any]] = []

    # --- evidence ---------------------------------------------------------------------------------------

    def publish(self, kind: str, data: str | dict[str, Any]) -> None:
        text = data if isinstance(data, str) else json.dumps(data, default=str)
        self.ctx.bus.publish(
            GenerationEvent(generation_id=self.gid, kind=kind, data=self.ctx.redactor.text(text))
        )

    def record(self, entry: dict[str, Any]) -> None:
        self.transcript.append(entry)

    def on_retry(self, entry: dict[str, Any]) -> None:
        self.retries += 1
        if "lost_usage" in entry:
            self.lose(Usage(**entry["lost_usage"]))
        self.record({"type": "api_retry", **entry})
        self.publish("api_retry", entry)

    def lose(self, usage: Usage) -> None:
        self.lost.add(usage)

    def charge(self, usage: Usage) -> float:
        """Adds one turn's usage; returns its cost (also added to the batch's spend)."""
        self.turns += 1
        self.usage.add(usage)
        cost = self.ctx.prices.cost(self.model, usage)
        self.cost += cost
        self.ctx.spend.add(cost)
        return cost

    def audit_codes(self) -> list[str]:
        """The last audit's reasons when it did not accept the task (why an unfinished attempt failed)."""
        wb = self.workbench
        if wb.last_audit is not None and not wb.accepted(wb.last_audit[1]):
            return list(wb.last_audit[1].reasons)
        return []

    def wall_s(self) -> float:
        return round(time.monotonic() - self.started, 3)

    def save(self, **fields: Any) -> None:
        with session(self.ctx.ws.engine) as s:
            queries.update_generation(
                s,
                self.gid,
                tokens_in=self.usage.tokens_in,
                tokens_out=self.usage.output_tokens,
                cost_usd=round(self.cost, 6),
                wall_s=self.wall_s(),
                api_retries=self.retries,
                turns=self.turns,
                lost_tokens_in=self.lost.tokens_in,
                lost_tokens_out=self.lost.output_tokens,
                transcript_json=json.dumps(self.ctx.redactor.obj(self.transcript), default=str),
                **fields,
            )

    # --- the end ----------------------------------------------------------------------------------------

    def finish(self, end: End) -> GenerationResult:
        red = self.ctx.redactor
        reason = red.text(",".join(dict.fromkeys(c for c in end.codes if c)))
        detail = red.text(end.detail)
        entry: dict[str, Any] = {
            "type": "finished",
            "outcome": end.outcome,
            "reason": reason,
            "at": time.time(),
        }
        if detail:
            entry["detail"] = detail
        self.record(entry)
        accepted = end.accepted
        self.save(
            outcome=end.outcome,
            reason=reason,
            detail=detail,
            task_version_id=accepted.version_id if accepted else None,
        )
        try:
            self.workbench.close()
        except OSError:
            log.warning("could not remove staging workspace of generation %s", self.gid, exc_info=True)
        res = GenerationResult(
            generation_id=self.gid,
            outcome=end.outcome,
            reason=reason,
            prompt_version=self.ctx.prompt.name,
            model=self.model,
            difficulty=self.difficulty,
            seed_axes=self.axes.as_dict(),
            task_version_id=accepted.version_id if accepted else None,
            task_name=accepted.name if accepted else "",
            turns=self.turns,
            tokens_in=self.usage.tokens_in,
            tokens_out=self.usage.output_tokens,
            cost_usd=round(self.cost, 6),
            wall_s=self.wall_s(),
            api_retries=self.retries,
            scratch_dir=self.ctx.ws.rel(self.scratch),
            detail=detail,
        )
        self.publish("finished", res.as_dict())
        return res
