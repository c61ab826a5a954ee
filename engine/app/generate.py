"""Generate tasks, check the generator, read its history: what ``bandpass generate`` and the Generate
screen both do.

Why here: the CLI and the screen each called ``generate_batch`` with their own set of options and each
checked the generator (key, endpoint, model) their own way. A :class:`GenerateRequest` is the one shape of
a generation batch; the front ends fill it from options or widgets and render the ``BatchResult``.
Progress is the event bus (``GenerationEvent``); cancelling is ``stop``.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ...store import queries
from ...store.db import session
from ..generator import (
    DEFAULT_PROMPT,
    BatchResult,
    Budget,
    GeneratorError,
    GeneratorUnreachable,
    RetryPolicy,
    available_versions,
    generate_batch,
    generation_report,
    load_prompt,
    resolve_api,
)
from ..generator.check import CheckReport, check_generator
from ..generator.report import render_generation_report
from ..generator.transcript import GenerationView, read_transcript, render_lines
from ..llm.client import is_api_code
from ..llm.pricing import PriceTable

if TYPE_CHECKING:
    from collections.abc import Callable

    from ...store.models import Generation
    from ..audit.corpus import AuditRunSummary
    from ..core.events import EventBus
    from ..core.workspace import Workspace
    from ..generator.attempt import GenerationResult

__all__ = [
    "generate_and_audit",
    "DEFAULT_PROMPT",
    "BatchResult",
    "Budget",
    "CheckReport",
    "GenerateRequest",
    "GenerationHistory",
    "GenerationView",
    "GeneratorError",
    "GeneratorUnreachable",
    "RetryPolicy",
    "available_versions",
    "check",
    "generate",
    "generation_report",
    "generator_model",
    "history",
    "is_api_code",
    "load_prompt",
    "read_transcript",
    "render_generation_report",
    "render_lines",
]


@dataclass(frozen=True)
class GenerateRequest:
    """A generation batch: ``n`` attempts with ``prompt_version``; None model means bandpass.toml's
    ``[generator] model``. The defaults are the generator's own."""

    n: int
    model: str | None = None
    prompt_version: str = DEFAULT_PROMPT
    concurrency: int = 1
    difficulty: str | None = None
    #: Per-attempt limits (None: the generator's default budget).
    budget: Budget | None = None
    batch_budget_usd: float | None = None
    target_model: str | None = None
    seed: int | None = None
    audit_reruns: int = 2
    accept_warnings: bool = False
    retry: RetryPolicy | None = None
    max_tokens_per_turn: int = 8192
    api_timeout_s: float = 600.0
    extra: dict[str, Any] = field(default_factory=dict)


def generate(
    ws: Workspace,
    req: GenerateRequest,
    *,
    bus: EventBus | None = None,
    stop: threading.Event | None = None,
    on_finished: Callable[[GenerationResult], None] | None = None,
) -> BatchResult:
    """Runs the batch to its end (blocking: front ends call it from a worker thread). Raises
    ``GeneratorUnreachable`` (nothing listening: nothing started) or ``GeneratorError`` (no key, bad
    prompt version...); attempts that fail for the API's reasons are results, not exceptions."""
    return generate_batch(
        ws,
        req.n,
        req.model,
        req.prompt_version,
        concurrency=req.concurrency,
        difficulty=req.difficulty,
        budget=req.budget,
        batch_budget_usd=req.batch_budget_usd,
        target_model=req.target_model,
        bus=bus,
        seed=req.seed,
        audit_reruns=req.audit_reruns,
        stop=stop,
        accept_warnings=req.accept_warnings,
        retry=req.retry,
        max_tokens_per_turn=req.max_tokens_per_turn,
        api_timeout_s=req.api_timeout_s,
        on_finished=on_finished,
        **req.extra,
    )


def generate_and_audit(
    ws: Workspace,
    req: GenerateRequest,
    *,
    reruns: int = 3,
    concurrency: int | None = None,
    bus: EventBus | None = None,
    stop: threading.Event | None = None,
    on_audit_progress: Callable[[AuditRunSummary], None] | None = None,
) -> tuple[BatchResult, AuditRunSummary | None, str]:
    """The batch with its accepted tasks audited as they come (engine/audit/pipeline.py): generation and
    the full audit overlap. Returns the batch, the audit run's summary and its id (``--resume`` it)."""
    from ..audit.executors import LocalAuditExecutor
    from ..audit.pipeline import audit_alongside

    with audit_alongside(
        ws,
        reruns=reruns,
        executor=LocalAuditExecutor(concurrency),
        bus=bus,
        on_progress=on_audit_progress,
        stop=stop,
    ) as feed:

        def accepted(res: GenerationResult) -> None:
            if res.outcome == "accepted" and res.task_version_id is not None:
                feed.put(res.task_version_id)

        result = generate(ws, req, bus=bus, stop=stop, on_finished=accepted)
    if feed.error is not None:
        raise feed.error
    return result, feed.summary, feed.run_id


def generator_model(ws: Workspace, model: str | None = None) -> str:
    """The model a batch or a check uses: ``model``, else bandpass.toml's ``[generator] model``."""
    return model or ws.config.generator.model


def check(ws: Workspace, model: str | None = None) -> CheckReport:
    """One-token check of the generator's endpoint, key, model and tool use (``bandpass generate
    --check``, ``k`` on the screen). Raises ``GeneratorError`` when no key is set; what the server
    answers is in the report, never raised."""
    key, url = resolve_api(ws)
    return check_generator(ws, generator_model(ws, model), api_key=key, base_url=url)


@dataclass(frozen=True)
class GenerationHistory:
    """The recent attempts (newest first), the yield per prompt version, and the prices that say which
    costs are known."""

    generations: list[Generation]
    yields: list[tuple[str, int, int]]
    prices: PriceTable


def history(ws: Workspace) -> GenerationHistory:
    """What the Generate screen lists. Raises ``PricesInvalid`` for a broken generator-prices.toml."""
    prices = PriceTable(ws.root)
    with session(ws.engine) as s:
        gens = list(queries.recent_generations(s))  # readable after the session: no expiry on commit
        yields = queries.generation_yield(s)
    return GenerationHistory(gens, list(yields), prices)
