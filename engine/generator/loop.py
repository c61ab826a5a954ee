"""The meta-agent loop: Claude writes a Harbor task through tools and revises it until the audit accepts it.

One *generation* is one attempt at one task: a Generation row is created first (so a crash still leaves a
record), the conversation runs turn by turn, and after every turn the row is updated with tokens, cost,
retries and the redacted transcript. It ends in exactly one outcome:

- ``accepted``: submit succeeded; the task was imported with origin ``generated`` and its staging audit
  recorded; ``task_version_id`` points at it.
- ``rejected``: the meta-agent stopped without an accepted task, or submitted a near-duplicate. ``reason``
  lists taxonomy codes (the last audit's findings, ``invalidity.duplicate_task``, ``generator.no_tool_use``
  when ``Budget.max_no_tool_turns`` replies came without a tool call, ``generator.refusal``).
- ``budget_exhausted``: turns, tokens, dollars (attempt or batch) or wall time ran out; ``reason`` starts
  with ``budget.<which>`` followed by the last audit's codes. The scratch folder keeps the partial work.
- ``error``: the API failed for good (``infra.generator_*``, ``infra.rate_limited``: unreachable, closed
  mid-stream, stalled, no stop reason, refused), Docker was unavailable (``infra.daemon_unavailable``) or
  Bandpass itself failed (``generator.internal_error``, ``generator.prompt_error``). Not the prompt's
  fault, so the yield report keeps it out of the yield's denominator; ``detail`` holds the one line.
- ``cancelled``: the curator stopped the batch.

Every step is also a :class:`~engine.core.events.GenerationEvent` on the bus: ``started``, ``text`` (streamed
tokens), ``tool_use``, ``tool_result``, ``api_retry``, ``turn`` and ``finished``; ``data`` is the text
delta for ``text`` and a JSON object for the others.
"""

from __future__ import annotations

import logging
import os
import random
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from ..core.errors import BandpassError
from ..core.events import EventBus
from ..core.events import bus as default_bus
from ..core.redact import Redactor
from ..core.workspace import Workspace
from ..llm.client import MetaClient, RetryPolicy, is_api_code
from ..llm.pricing import PriceTable, PriceUnknown
from . import context as ctxmod
from .attempt import (
    GENERATIONS_DIR,
    Attempt,
    BatchSpend,
    Budget,
    End,
    GenerationResult,
    GeneratorContext,
    end_for,
)
from .prompts import load_prompt
from .seeds import DIFFICULTIES, SeedAxes, load_axes, sample_axes, sample_difficulty
from .turns import TurnLoop

log = logging.getLogger(__name__)

DEFAULT_PROMPT = "v2-context"

__all__ = ["DEFAULT_PROMPT", "BatchResult", "Budget", "GenerationResult", "GeneratorError", "generate_batch"]


class GeneratorError(BandpassError, ValueError):
    """The batch cannot start: missing API key, unknown prompt version, model or difficulty."""


class GeneratorUnreachable(GeneratorError):
    """Nothing answers at the generator's endpoint: the batch did not start (``bandpass generate`` exit 3,
    like an API failure during a batch)."""


#: The one hint a dead endpoint gets (``generate --check`` says the same).
UNREACHABLE_HINT = (
    "is the server running, and are ANTHROPIC_BASE_URL / [generator] base_url host and port right?"
)


@dataclass
class BatchResult:
    results: list[GenerationResult] = field(default_factory=list)
    skipped: int = 0  # attempts never started: batch budget spent, cancelled, or the generator down
    spent_usd: float = 0.0
    #: Set when the batch stopped starting attempts because the generator's API kept failing.
    halted: str = ""

    @property
    def accepted(self) -> list[GenerationResult]:
        return [r for r in self.results if r.outcome == "accepted"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": [r.as_dict() for r in self.results],
            "skipped": self.skipped,
            "halted": self.halted,
            "spent_usd": self.spent_usd,
            "accepted": len(self.accepted),
        }


#: The context one generation gets; kept under its old name for callers.
_Ctx = GeneratorContext


def resolve_api(
    ws: Workspace, api_key: str | None = None, base_url: str | None = None
) -> tuple[str, str | None]:
    """(key, base url). The key comes from the argument or the environment variable the workspace names
    (``[generator] api_key_env``, default ANTHROPIC_API_KEY) and is never stored. The base URL: the
    argument, else ``ANTHROPIC_BASE_URL``, else ``[generator] base_url``, else the SDK's default."""
    cfg = ws.config.generator
    key = api_key or os.environ.get(cfg.api_key_env, "")
    if not key:
        raise GeneratorError(f"{cfg.api_key_env} is not set: export your Anthropic API key in it")
    url = base_url or os.environ.get("ANTHROPIC_BASE_URL") or cfg.base_url or None
    return key, url


def generate_batch(
    ws: Workspace,
    n: int,
    model: str | None = None,
    prompt_version: str = DEFAULT_PROMPT,
    *,
    concurrency: int = 1,
    difficulty: str | None = None,
    budget: Budget | None = None,
    batch_budget_usd: float | None = None,
    target_model: str | None = None,
    bus: EventBus | None = None,
    seed: int | None = None,
    audit_reruns: int = 2,
    api_key: str | None = None,
    base_url: str | None = None,
    stop: threading.Event | None = None,
    accept_warnings: bool = False,
    retry: RetryPolicy | None = None,
    max_tokens_per_turn: int = 8192,
    api_timeout_s: float = 600.0,
    halt_after_api_failures: int = 3,
    check_endpoint: bool = True,
    docker_factory: Callable[[], docker.DockerClient] | None = None,
    on_finished: Callable[[GenerationResult], None] | None = None,
) -> BatchResult:
    """Runs ``n`` generations, ``concurrency`` at a time; blocks until all end. The TUI runs it on a
    worker thread, subscribes to :class:`GenerationEvent` on ``bus``, and sets ``stop`` to cancel.

    ``budget`` limits each attempt; ``batch_budget_usd`` limits the whole batch (no new attempt starts
    once it is spent, and running ones stop before their next turn). ``target_model`` shows the
    meta-agent tasks that model already solves above the band as "too easy". ``api_timeout_s`` bounds
    every wait on the server (connect, and each read of a stream: a stalled stream fails after it).
    Once ``halt_after_api_failures`` attempts in a row have ended with an API failure (each after its
    own retries), no new attempt starts: an overnight batch against a dead server stops within minutes
    instead of spending hours retrying, and says why in ``BatchResult.halted``. Before that,
    ``check_endpoint`` asks the server for its model list (no tokens): nothing listening raises
    :class:`GeneratorUnreachable` at once, as ``bandpass run`` refuses a dead policy endpoint.
    """
    if n < 0:
        raise GeneratorError(f"--n: expected a count >= 0, got {n}")
    if concurrency < 1:
        raise GeneratorError(f"--concurrency: expected >= 1, got {concurrency}")
    if difficulty is not None and difficulty not in DIFFICULTIES:
        raise GeneratorError(f"--difficulty: expected one of {', '.join(DIFFICULTIES)}, got {difficulty!r}")
    if audit_reruns < 1:
        raise GeneratorError(f"audit reruns: expected >= 1, got {audit_reruns}")
    model = model or ws.config.generator.model
    try:
        prompt = load_prompt(prompt_version)
    except ValueError as exc:
        raise GeneratorError(str(exc)) from exc
    prices = PriceTable(ws.root)
    if not prices.known(model):  # runs with cost unknown; only a dollar budget needs the price
        unknown = PriceUnknown(model, prices.files, prices.workspace_file)
        if batch_budget_usd is not None:
            raise GeneratorError(f"--budget-usd needs a price: {unknown}")
        logging.getLogger(__name__).warning("cost unknown: %s", unknown)
    axes_lists = load_axes()
    key, url = resolve_api(ws, api_key, base_url)
    bus = default_bus if bus is None else bus
    rng = random.Random(seed)
    too_easy = ctxmod.too_easy_tasks(ws, target_model, prompt.context.too_easy) if target_model else []
    if api_timeout_s <= 0:
        raise GeneratorError(f"api timeout: expected seconds > 0, got {api_timeout_s}")
    client = MetaClient(
        model,
        api_key=key,
        base_url=url,
        retry=retry,
        max_tokens=max_tokens_per_turn,
        timeout_s=api_timeout_s,
    )
    if check_endpoint and n > 0:
        dead = client.unreachable(timeout_s=min(api_timeout_s, 15.0))
        if dead is not None:
            client.close()
            raise GeneratorUnreachable(f"{dead}: {UNREACHABLE_HINT}; no attempt was started")
    ctx = GeneratorContext(
        ws=ws,
        client=client,
        prompt=prompt,
        prices=prices,
        budget=budget or Budget(),
        spend=BatchSpend(batch_budget_usd),
        bus=bus,
        redactor=Redactor([key]),
        audit_reruns=audit_reruns,
        too_easy=too_easy,
        cancel=stop if stop is not None else threading.Event(),
        accept_warnings=accept_warnings,
        docker_factory=docker_factory,
    )
    # Draw every attempt's seed up front, in order: the batch is reproducible whatever the thread timing.
    plans = []
    for _ in range(n):
        axes = sample_axes(rng, axes_lists)
        plans.append((axes, sample_difficulty(rng, axes_lists, difficulty), rng.random()))

    slots: list[GenerationResult | None] = [None] * n
    on_finished_lock = threading.Lock()
    breaker = _ApiBreaker(halt_after_api_failures)

    def job(index: int) -> None:
        if ctx.cancel.is_set() or ctx.spend.exhausted() or breaker.halted:
            return
        axes, diff, sub_seed = plans[index]
        res = generate_one(ctx, axes, diff, random.Random(sub_seed))
        slots[index] = res
        breaker.saw(res)
        if on_finished is not None:
            with on_finished_lock:
                on_finished(res)

    try:
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="bandpass-gen") as pool:
            try:
                for fut in [pool.submit(job, i) for i in range(n)]:
                    fut.result()
            except BaseException:
                # Ctrl-C (or a crash here): running attempts end "cancelled" at their next turn instead
                # of the pool waiting for every attempt to run to completion.
                ctx.cancel.set()
                raise
    finally:
        client.close()
    # Plan order, not finishing order: result i is the i-th seed drawn, whatever the thread timing.
    result = BatchResult(results=[r for r in slots if r is not None])
    result.skipped = n - len(result.results)
    result.halted = breaker.halted
    result.spent_usd = ctx.spend.spent
    return result


class _ApiBreaker:
    """Counts attempts in a row that ended with an API failure; past the limit, the batch halts."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.streak = 0
        self.halted = ""
        self._lock = threading.Lock()

    def saw(self, res: GenerationResult) -> None:
        with self._lock:
            if res.outcome == "error" and is_api_code(res.reason):
                self.streak += 1
                if self.limit and self.streak >= self.limit and not self.halted:
                    self.halted = f"{self.streak} attempts in a row failed for the API; last: {res.detail}"
            elif res.outcome != "cancelled":
                self.streak = 0


def generate_one(
    ctx: GeneratorContext, axes: SeedAxes, difficulty: str, rng: random.Random
) -> GenerationResult:
    """One attempt, start to one outcome, in three phases: open the record, converse, finish. Never
    raises for what the model, the API or Docker does; every error is mapped by :func:`end_for`."""
    attempt = Attempt(ctx, axes, difficulty)
    try:
        end = _prepare(ctx, attempt, axes, difficulty, rng).run()
    except Exception as exc:  # noqa: BLE001 - every failure ends the row with an outcome; a bug of ours included
        end = end_for(exc, attempt)
    return attempt.finish(end)


def _prepare(
    ctx: GeneratorContext, attempt: Attempt, axes: SeedAxes, difficulty: str, rng: random.Random
) -> TurnLoop:
    """Renders the prompt and records the attempt's starting point (meta, system, first message)."""
    try:
        system_text, user_text = _render(ctx, axes, difficulty, rng)
    except Exception as exc:  # a broken prompt file or context query: recorded, not raised
        log.exception("generation %s: could not build the prompt", attempt.gid)
        attempt.record({"type": "error", "detail": f"{type(exc).__name__}: {exc}"})
        raise End("error", ["generator.prompt_error"], detail=f"prompt error: {exc}") from exc
    loop = TurnLoop(ctx, attempt, system_text, user_text)
    attempt.transcript.extend(
        [
            {
                "type": "meta",
                "prompt_version": ctx.prompt.name,
                "model": attempt.model,
                "base_url": ctx.client.base_url or "(sdk default)",
                "url": ctx.client.messages_url,
                "seed_axes": axes.as_dict(),
                "difficulty": difficulty,
                "budget": ctx.budget.as_dict(),
                "batch_budget_usd": ctx.spend.limit_usd,
                "audit_reruns": ctx.audit_reruns,
                "scratch_dir": ctx.ws.rel(attempt.scratch),
            },
            {"type": "system", "text": system_text},
            {"type": "message", **loop.messages[0]},
        ]
    )
    attempt.save()
    attempt.publish(
        "started",
        {
            "prompt_version": ctx.prompt.name,
            "model": attempt.model,
            "difficulty": difficulty,
            "seed_axes": axes.as_dict(),
        },
    )
    return loop


def _render(ctx: GeneratorContext, axes: SeedAxes, difficulty: str, rng: random.Random) -> tuple[str, str]:
    prompt, ws = ctx.prompt, ctx.ws
    c = prompt.context
    items_easy = "\n\n".join(ctx.too_easy)
    examples = ctxmod.example_tasks(ws, c.examples, rng, c.example_chars) if c.examples else []
    failure = ctxmod.last_failure(ws) if c.last_failure else ""
    values = {
        **axes.as_dict(),
        "difficulty": difficulty,
        "difficulty_guidance": prompt.difficulty_guidance.get(difficulty, ""),
        "too_easy": prompt.render_section("too_easy", {"items": items_easy}) if items_easy else "",
        "examples": prompt.render_section("examples", {"items": "\n\n".join(examples)}) if examples else "",
        "last_failure": prompt.render_section("last_failure", {"failure": failure}) if failure else "",
    }
    return prompt.system, prompt.render_user(values)


def scratch_path(ws: Workspace, generation_id: int) -> Path:
    """Where a generation's files are (kept for rejected and budget-exhausted attempts too)."""
    return ws.root / GENERATIONS_DIR / f"{generation_id:06d}" / f"gen-{generation_id}"
