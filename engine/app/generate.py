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

from bandpass.engine.generator import DEFAULT_PROMPT, Budget, RetryPolicy, generate_batch, resolve_api
from bandpass.engine.generator.check import CheckReport, check_generator
from bandpass.engine.llm.pricing import PriceTable
from bandpass.store import queries
from bandpass.store.db import session

if TYPE_CHECKING:
    from bandpass.engine.core.events import EventBus
    from bandpass.engine.core.workspace import Workspace
    from bandpass.engine.generator import BatchResult
    from bandpass.store.models import Generation


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
    ws: Workspace, req: GenerateRequest, *, bus: EventBus | None = None, stop: threading.Event | None = None
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
        **req.extra,
    )


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
