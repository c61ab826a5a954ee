"""The meta-agent loop: Claude writes a Harbor task through tools and revises it until the audit accepts it.

One *generation* is one attempt at one task: a Generation row is created first (so a crash still leaves a
record), the conversation runs turn by turn, and after every turn the row is updated with tokens, cost,
retries and the redacted transcript. It ends in exactly one outcome:

- ``accepted``: submit succeeded; the task was imported with origin ``generated`` and its staging audit
  recorded; ``task_version_id`` points at it.
- ``rejected``: the meta-agent stopped without an accepted task, or submitted a near-duplicate. ``reason``
  lists taxonomy codes (the last audit's findings, ``invalidity.duplicate_task``, ``generator.no_submit``).
- ``budget_exhausted``: turns, tokens, dollars (attempt or batch) or wall time ran out; ``reason`` starts
  with ``budget.<which>`` followed by the last audit's codes. The scratch folder keeps the partial work.
- ``error``: the API failed for good (``infra.*``) or Docker was unavailable. Not the prompt's fault, so
  the yield report keeps it out of the yield's denominator.
- ``cancelled``: the curator stopped the batch.

Every step is also a :class:`~engine.core.events.GenerationEvent` on the bus: ``started``, ``text`` (streamed
tokens), ``tool_use``, ``tool_result``, ``api_retry``, ``turn`` and ``finished``; ``data`` is the text
delta for ``text`` and a JSON object for the others.
"""

from __future__ import annotations

import json
import logging
import os
import random
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from engine.core.events import EventBus, GenerationEvent
from engine.core.events import bus as default_bus
from engine.core.workspace import Workspace
from engine.generator import context as ctxmod
from engine.generator.api import ApiFailure, Cancelled, MetaClient, RetryPolicy, WaitPastDeadline
from engine.generator.pricing import PriceTable, PriceUnknown, Usage
from engine.generator.prompts import PromptVersion, load_prompt
from engine.generator.redact import Redactor
from engine.generator.seeds import DIFFICULTIES, SeedAxes, load_axes, sample_axes, sample_difficulty
from engine.generator.tools import Accepted, FinalRejection, ToolError, Workbench, validate_input
from engine.sandbox.docker_engine import DockerUnavailable
from store import queries
from store.db import session

log = logging.getLogger(__name__)

DEFAULT_PROMPT = "v2-context"
GENERATIONS_DIR = "generations"
MAX_NUDGES = 2
_EVENT_RESULT_CHARS = 4000

NUDGE_NO_TOOL = (
    "You have not submitted a task yet. Continue with the tools: finish the files, run the audit, fix what "
    "it reports, and call submit once it accepts the task."
)
NUDGE_MAX_TOKENS = (
    "Your reply was cut off at the output limit. Continue, and write large files in smaller parts."
)


class GeneratorError(ValueError):
    """The batch cannot start: missing API key, unknown prompt version, model or difficulty."""


@dataclass
class Budget:
    """Limits of one attempt. Checked before every API call, so a turn in flight always completes and
    is recorded; a tool (an audit) already running is never interrupted."""

    max_turns: int = 40
    max_tokens: int = 3_000_000  # input + output, all turns
    max_usd: float = 5.0
    max_wall_s: float = 1800.0

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

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class BatchResult:
    results: list[GenerationResult] = field(default_factory=list)
    skipped: int = 0  # attempts never started: batch budget spent or cancelled
    spent_usd: float = 0.0

    @property
    def accepted(self) -> list[GenerationResult]:
        return [r for r in self.results if r.outcome == "accepted"]

    def as_dict(self) -> dict[str, Any]:
        return {
            "results": [r.as_dict() for r in self.results],
            "skipped": self.skipped,
            "spent_usd": self.spent_usd,
            "accepted": len(self.accepted),
        }


@dataclass
class _Ctx:
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
    docker_factory: Callable[[], docker.DockerClient] | None = None,
    on_finished: Callable[[GenerationResult], None] | None = None,
) -> BatchResult:
    """Runs ``n`` generations, ``concurrency`` at a time; blocks until all end. The TUI runs it on a
    worker thread, subscribes to :class:`GenerationEvent` on ``bus``, and sets ``stop`` to cancel.

    ``budget`` limits each attempt; ``batch_budget_usd`` limits the whole batch (no new attempt starts
    once it is spent, and running ones stop before their next turn). ``target_model`` shows the
    meta-agent tasks that model already solves above the band as "too easy".
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
        unknown = PriceUnknown(model, prices.files)
        if batch_budget_usd is not None:
            raise GeneratorError(f"--budget-usd needs a price: {unknown}")
        logging.getLogger(__name__).warning("cost unknown: %s", unknown)
    axes_lists = load_axes()
    key, url = resolve_api(ws, api_key, base_url)
    bus = default_bus if bus is None else bus
    rng = random.Random(seed)
    too_easy = ctxmod.too_easy_tasks(ws, target_model, prompt.context.too_easy) if target_model else []
    client = MetaClient(model, api_key=key, base_url=url, retry=retry, max_tokens=max_tokens_per_turn)
    ctx = _Ctx(
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

    def job(index: int) -> None:
        if ctx.cancel.is_set() or ctx.spend.exhausted():
            return
        axes, diff, sub_seed = plans[index]
        res = generate_one(ctx, axes, diff, random.Random(sub_seed))
        slots[index] = res
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
    result.spent_usd = ctx.spend.spent
    return result


class _TextRedactingBuffer:
    """Streams text deltas on, but only up to the last whitespace seen: a key split across two deltas
    (keys hold no whitespace) is then always redacted whole before the TUI sees it."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._buf = ""

    def feed(self, delta: str) -> None:
        self._buf += delta
        cut = max(self._buf.rfind(c) for c in " \n\t")
        if cut >= 0:
            ready, self._buf = self._buf[: cut + 1], self._buf[cut + 1 :]
            self._emit(ready)

    def flush(self) -> None:
        if self._buf:
            ready, self._buf = self._buf, ""
            self._emit(ready)


def _system_blocks(text: str) -> list[dict[str, Any]]:
    # One cache breakpoint on the system prompt: tools + system are the same on every turn.
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def _with_cache_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy whose last block carries ``cache_control``, so each turn reads the previous turns from the
    prompt cache instead of paying for them again (a 30-turn loop re-sends its history 30 times)."""
    out = [dict(m) for m in messages]
    last = dict(out[-1])
    content = last["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    content = [dict(b) for b in content]
    content[-1]["cache_control"] = {"type": "ephemeral"}
    last["content"] = content
    out[-1] = last
    return out


def generate_one(ctx: _Ctx, axes: SeedAxes, difficulty: str, rng: random.Random) -> GenerationResult:
    """One attempt, start to one outcome. Never raises for what the model or the API does."""
    ws, prompt, red = ctx.ws, ctx.prompt, ctx.redactor
    model = ctx.client.model
    with session(ws.engine) as s:
        gid = queries.create_generation(
            s,
            prompt_version=prompt.name,
            model=model,
            seed_axes_json=json.dumps(axes.as_dict(), sort_keys=True),
            difficulty=difficulty,
            outcome="running",
        ).id
    assert gid is not None
    started = time.monotonic()
    deadline = started + ctx.budget.max_wall_s
    gen_dir = ws.root / GENERATIONS_DIR / f"{gid:06d}"
    scratch = gen_dir / f"gen-{gid}"
    wb = Workbench(
        ws=ws,
        scratch=scratch,
        stage_root=gen_dir / ".stage",
        generation_id=gid,
        audit_reruns=ctx.audit_reruns,
        accept_warnings=ctx.accept_warnings,
        bus=ctx.bus,
        client_factory=ctx.docker_factory,
    )
    usage = Usage()
    state: dict[str, Any] = {"cost": 0.0, "retries": 0, "turns": 0}
    transcript: list[dict[str, Any]] = []

    def publish(kind: str, data: str | dict[str, Any]) -> None:
        text = data if isinstance(data, str) else json.dumps(data, default=str)
        ctx.bus.publish(GenerationEvent(generation_id=gid, kind=kind, data=red.text(text)))

    text_out = _TextRedactingBuffer(lambda t: publish("text", t))

    def save(**fields: Any) -> None:
        with session(ws.engine) as s:
            queries.update_generation(
                s,
                gid,
                tokens_in=usage.tokens_in,
                tokens_out=usage.output_tokens,
                cost_usd=round(state["cost"], 6),
                wall_s=round(time.monotonic() - started, 3),
                api_retries=state["retries"],
                transcript_json=json.dumps(red.obj(transcript), default=str),
                **fields,
            )

    def finish(outcome: str, codes: list[str], accepted: Accepted | None = None) -> GenerationResult:
        reason = red.text(",".join(dict.fromkeys(c for c in codes if c)))
        transcript.append({"type": "finished", "outcome": outcome, "reason": reason, "at": time.time()})
        save(
            outcome=outcome,
            reason=reason,
            task_version_id=accepted.version_id if accepted else None,
        )
        try:
            wb.close()
        except OSError:
            log.warning("could not remove staging workspace of generation %s", gid, exc_info=True)
        res = GenerationResult(
            generation_id=gid,
            outcome=outcome,
            reason=reason,
            prompt_version=prompt.name,
            model=model,
            difficulty=difficulty,
            seed_axes=axes.as_dict(),
            task_version_id=accepted.version_id if accepted else None,
            task_name=accepted.name if accepted else "",
            turns=state["turns"],
            tokens_in=usage.tokens_in,
            tokens_out=usage.output_tokens,
            cost_usd=round(state["cost"], 6),
            wall_s=round(time.monotonic() - started, 3),
            api_retries=state["retries"],
            scratch_dir=ws.rel(scratch),
        )
        publish("finished", res.as_dict())
        return res

    def audit_codes() -> list[str]:
        if wb.last_audit is not None and not wb.accepted(wb.last_audit[1]):
            return list(wb.last_audit[1].reasons)
        return []

    try:
        system_text, user_text = _render(ctx, axes, difficulty, rng)
    except Exception as exc:  # a broken prompt file or context query: recorded, not raised
        log.exception("generation %s: could not build the prompt", gid)
        transcript.append({"type": "error", "detail": f"{type(exc).__name__}: {exc}"})
        return finish("error", ["generator.prompt_error"])

    tools = prompt.tools
    schemas = {t["name"]: t["input_schema"] for t in tools}
    messages: list[dict[str, Any]] = [{"role": "user", "content": [{"type": "text", "text": user_text}]}]
    transcript.extend(
        [
            {
                "type": "meta",
                "prompt_version": prompt.name,
                "model": model,
                "base_url": ctx.client.base_url or "(sdk default)",
                "seed_axes": axes.as_dict(),
                "difficulty": difficulty,
                "budget": ctx.budget.as_dict(),
                "batch_budget_usd": ctx.spend.limit_usd,
                "audit_reruns": ctx.audit_reruns,
                "scratch_dir": ws.rel(scratch),
            },
            {"type": "system", "text": system_text},
            {"type": "message", **messages[0]},
        ]
    )
    save()
    publish(
        "started",
        {
            "prompt_version": prompt.name,
            "model": model,
            "difficulty": difficulty,
            "seed_axes": axes.as_dict(),
        },
    )

    def converse() -> GenerationResult:
        nudges = 0
        while True:
            # ---- budgets, checked before spending more ------------------------------------------------
            b = ctx.budget
            over = None
            if ctx.cancel.is_set():
                return finish("cancelled", ["generator.cancelled", *audit_codes()])
            if state["turns"] >= b.max_turns:
                over = "budget.turns"
            elif usage.tokens_in + usage.output_tokens >= b.max_tokens:
                over = "budget.tokens"
            elif state["cost"] >= b.max_usd:
                over = "budget.usd"
            elif ctx.spend.exhausted():
                over = "budget.batch_usd"
            elif time.monotonic() >= deadline:
                over = "budget.wall"
            if over:
                transcript.append({"type": "budget", "exhausted": over})
                return finish("budget_exhausted", [over, *audit_codes()])

            # ---- one turn --------------------------------------------------------------------------------
            def on_retry(entry: dict[str, Any]) -> None:
                state["retries"] += 1
                transcript.append({"type": "api_retry", **entry})
                publish("api_retry", entry)

            try:
                reply = ctx.client.turn(
                    system=_system_blocks(system_text),
                    tools=tools,
                    messages=_with_cache_breakpoint(messages),
                    on_text=text_out.feed,
                    on_retry=on_retry,
                    deadline=deadline,
                    stop=ctx.cancel,
                )
            except ApiFailure as exc:
                text_out.flush()
                transcript.append(
                    {
                        "type": "api_error",
                        "code": exc.code,
                        "detail": exc.detail,
                        "request_id": exc.request_id,
                    }
                )
                return finish("error", [exc.code])
            except WaitPastDeadline as exc:
                text_out.flush()
                transcript.append({"type": "budget", "exhausted": "budget.wall", "detail": str(exc)})
                return finish("budget_exhausted", ["budget.wall", *audit_codes()])
            except Cancelled:
                text_out.flush()
                return finish("cancelled", ["generator.cancelled", *audit_codes()])
            text_out.flush()
            state["turns"] += 1
            usage.add(reply.usage)
            turn_cost = ctx.prices.cost(model, reply.usage)
            state["cost"] += turn_cost
            ctx.spend.add(turn_cost)
            # The API refuses an empty assistant message; an empty reply still has to keep its turn.
            content = reply.content or [{"type": "text", "text": "(empty reply)"}]
            messages.append({"role": "assistant", "content": content})
            transcript.append(
                {
                    "type": "message",
                    "role": "assistant",
                    "content": reply.content,
                    "stop_reason": reply.stop_reason,
                    "request_id": reply.request_id,
                    "usage": reply.usage.__dict__,
                    "cost_usd": round(turn_cost, 6),
                }
            )
            publish(
                "turn",
                {
                    "turn": state["turns"],
                    "stop_reason": reply.stop_reason,
                    "tokens_in": usage.tokens_in,
                    "tokens_out": usage.output_tokens,
                    "cost_usd": round(state["cost"], 6),
                    "api_retries": state["retries"],
                },
            )

            if reply.stop_reason == "refusal":
                save()
                return finish("rejected", ["generator.refusal"])
            if not reply.tool_calls:
                if reply.stop_reason != "max_tokens":
                    nudges += 1
                    if nudges > MAX_NUDGES:
                        save()
                        return finish("rejected", [*audit_codes(), "generator.no_submit"])
                nudge = NUDGE_MAX_TOKENS if reply.stop_reason == "max_tokens" else NUDGE_NO_TOOL
                msg = {"role": "user", "content": [{"type": "text", "text": nudge}]}
                messages.append(msg)
                transcript.append({"type": "message", **msg})
                save()
                continue

            # ---- tools ----------------------------------------------------------------------------------
            results: list[dict[str, Any]] = []
            accepted: Accepted | None = None
            final: FinalRejection | None = None
            infra: str | None = None
            for call in reply.tool_calls:
                publish("tool_use", {"id": call.id, "name": call.name, "input": call.input})
                is_error = False
                audits_before = wb.audits
                if accepted is not None or final is not None or infra is not None:
                    text, is_error = "not run: the generation already ended with an earlier call", True
                elif call.parse_error:
                    text, is_error = (
                        f"{call.parse_error}. Send the call again with a valid JSON object.",
                        True,
                    )
                elif call.name not in schemas:
                    text = f"unknown tool {call.name!r}; the tools are: {', '.join(schemas)}"
                    is_error = True
                else:
                    try:
                        args = validate_input(schemas[call.name], call.input)
                        out = wb.execute(call.name, args)
                        if isinstance(out, Accepted):
                            accepted = out
                            text = (
                                f"accepted: task {out.name!r} is now in the workspace "
                                f"(version {out.version_hash[:12]})"
                            )
                        else:
                            text = out
                    except ToolError as exc:
                        text, is_error = str(exc), True
                    except FinalRejection as exc:
                        final = exc
                        text, is_error = f"rejected: {exc.detail} ({exc.code})", True
                    except (DockerUnavailable, docker.errors.DockerException) as exc:
                        infra = "infra.daemon_unavailable"
                        text, is_error = f"Docker is unavailable: {exc}", True
                    except Exception as exc:  # a bug in a tool must not lose the generation's record
                        log.exception("generation %s: tool %s failed", gid, call.name)
                        text, is_error = f"internal error in {call.name}: {type(exc).__name__}: {exc}", True
                if wb.audits > audits_before and wb.last_audit is not None:
                    rep = wb.last_audit[1]
                    transcript.append(
                        {
                            "type": "audit",
                            "version_hash": rep.version_hash,
                            "verdict": rep.verdict,
                            "reasons": rep.reasons,
                            "findings": rep.checks.get("findings", []),
                            "duration_s": rep.duration_s,
                        }
                    )
                block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id, "content": text}
                if is_error:
                    block["is_error"] = True
                results.append(block)
                publish(
                    "tool_result",
                    {
                        "id": call.id,
                        "name": call.name,
                        "is_error": is_error,
                        "content": text[:_EVENT_RESULT_CHARS],
                    },
                )
            msg = {"role": "user", "content": results}
            messages.append(msg)
            transcript.append({"type": "message", **msg})
            if accepted is not None:
                return finish("accepted", [], accepted)
            if final is not None:
                return finish("rejected", [final.code])
            if infra is not None:
                return finish("error", [infra])
            save()

    try:
        return converse()
    except Exception as exc:  # a bug of ours must still end the row with an outcome, not leave it running
        log.exception("generation %s failed", gid)
        transcript.append({"type": "error", "detail": f"{type(exc).__name__}: {exc}"})
        return finish("error", ["generator.internal_error"])


def _render(ctx: _Ctx, axes: SeedAxes, difficulty: str, rng: random.Random) -> tuple[str, str]:
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
