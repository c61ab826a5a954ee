"""Claude as a second reviewer: reads one stored episode and suggests why it passed or failed.

A review is a *suggestion* stored beside the curator's tags (``review_suggestion``), never a tag: a wrong
automatic tag would silently keep tasks in or out of an export. :func:`accept_review` is the only path from
a review to a tag, and it needs a curator (a :class:`~engine.review.tagging.Tagger`, so the tag has an
author and can be undone).

The API side reuses the generator's streaming client (:class:`~engine.llm.client.MetaClient`): tool use
over a streamed Messages call, our own retries that honour ``retry-after`` for 429/529/overloaded and count
them apart (``api_retries``), and malformed tool JSON surfaced instead of raised. Prices come from the
generator's table (``engine/llm/prices.toml``); a model without a price still works, its cost
is *unknown* (NULL, with a warning), except under ``--budget-usd``, which cannot be enforced without one.
The API key is read from the environment and never stored.
"""

from __future__ import annotations

import json
import os
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from typing import Any

from ...store.db import session
from ...store.models import FailureTag, ReviewSuggestion
from ...store.queries import reviews as rq
from ..core.errors import BandpassError
from ..core.plural import listed
from ..core.taxonomy import Taxonomy, load_taxonomy
from ..core.workspace import Workspace
from ..llm.client import ApiFailure, Cancelled, MetaClient, RetryPolicy, TurnReply
from ..llm.pricing import PriceTable, PriceUnknown, Usage
from .review_context import build_episode_context
from .review_validation import CheckedAnswer, check_answer, review_code, schema_problems
from .reviewer_prompts import (
    DEFAULT_VERSION,
    SUBMIT_TOOL,
    ReviewerPrompt,
    load_reviewer_prompt,
)
from .tagging import Tagger


class ReviewError(BandpassError, RuntimeError):
    """A review run cannot start (no key, unknown prompt, a budget without a price); one line."""


class ReviewUnreachable(ReviewError):
    """Nothing answers at the reviewer's endpoint: no review started (``bandpass review`` exits 3)."""


#: Statuses of a stored review. Only ``ok`` reviews carry a verdict and enter the agreement report.
STATUSES = ("ok", "refused", "invalid", "error", "budget")


@dataclass
class ReviewOutcome:
    episode_id: int
    review_id: int | None
    status: str
    verdict: str = ""
    code: str = ""
    citations: int = 0
    dropped: list[dict[str, Any]] = field(default_factory=list)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    api_retries: int = 0
    tool_errors: int = 0
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class ReviewRunResult:
    run_id: str
    model: str
    prompt_version: str
    cluster: str = ""
    results: list[ReviewOutcome] = field(default_factory=list)
    skipped_budget: list[int] = field(default_factory=list)
    skipped_cancelled: list[int] = field(default_factory=list)
    skipped_reviewed: list[int] = field(default_factory=list)
    spent_usd: float = 0.0
    cost_known: bool = True
    warnings: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.results if r.status == status)

    @property
    def api_retries(self) -> int:
        return sum(r.api_retries for r in self.results)

    @property
    def dropped(self) -> int:
        return sum(len(r.dropped) for r in self.results)

    def as_dict(self) -> dict[str, Any]:
        return {
            "run_id": self.run_id,
            "model": self.model,
            "prompt_version": self.prompt_version,
            "cluster": self.cluster,
            "reviewed": len(self.results),
            "by_status": {s: self.count(s) for s in STATUSES if self.count(s)},
            "spent_usd": round(self.spent_usd, 6) if self.cost_known else None,
            "api_retries": self.api_retries,
            "dropped": self.dropped,
            "skipped_budget": self.skipped_budget,
            "skipped_cancelled": self.skipped_cancelled,
            "skipped_already_reviewed": self.skipped_reviewed,
            "warnings": self.warnings,
            "results": [r.as_dict() for r in self.results],
        }


def resolve_api(ws: Workspace, api_key: str | None, base_url: str | None) -> tuple[str, str | None]:
    """(key, base url): the key from the argument or the variable ``[generator] api_key_env`` names
    (default ANTHROPIC_API_KEY), never stored; the URL from the argument, ``ANTHROPIC_BASE_URL``, else
    ``[generator] base_url``, else the SDK's default."""
    cfg = ws.config.generator
    key = api_key or os.environ.get(cfg.api_key_env, "")
    if not key:
        raise ReviewError(f"{cfg.api_key_env} is not set: export your Anthropic API key in it")
    return key, base_url or os.environ.get("ANTHROPIC_BASE_URL") or cfg.base_url or None


def taxonomy_text(taxonomy: Taxonomy) -> str:
    lines = []
    for c in taxonomy.classes.values():
        lines.append(f"[{c.name}] {c.description}")
        lines.extend(f"  {c.name}.{sub}: {desc}" for sub, desc in c.subclasses.items())
    return "\n".join(lines)


class _Spend:
    """The run's dollars, shared by the workers; the budget check and the charge share one lock."""

    def __init__(self, budget_usd: float | None) -> None:
        self.budget = budget_usd
        self.spent = 0.0
        self._lock = threading.Lock()

    def charge(self, usd: float | None) -> None:
        if usd:
            with self._lock:
                self.spent += usd

    def exhausted(self) -> bool:
        with self._lock:
            return self.budget is not None and self.spent >= self.budget


class _Reviewer:
    def __init__(
        self,
        ws: Workspace,
        client: MetaClient,
        prompt: ReviewerPrompt,
        taxonomy: Taxonomy,
        prices: PriceTable | None,
        spend: _Spend,
        stop: threading.Event | None,
    ) -> None:
        self.ws, self.client, self.prompt, self.taxonomy = ws, client, prompt, taxonomy
        self.prices, self.spend, self.stop = prices, spend, stop
        self.system = [{"type": "text", "text": prompt.system}]
        self.tax_text = taxonomy_text(taxonomy)

    def _cost(self, usage: Usage) -> float | None:
        return self.prices.cost(self.client.model, usage) if self.prices is not None else None

    def review(self, episode_id: int) -> tuple[ReviewOutcome, dict[str, Any]]:
        """One conversation: ask, answer malformed input with an error and ask again, validate, keep."""
        started = time.monotonic()
        ctx = build_episode_context(self.ws, episode_id, limits=self.prompt.limits)
        messages: list[dict[str, Any]] = [
            {"role": "user", "content": self.prompt.render_user(ctx.render(), self.tax_text)}
        ]
        usage = Usage()
        out = ReviewOutcome(episode_id, None, "invalid")
        row: dict[str, Any] = {"explanation": "", "raw_input_json": "{}"}
        checked: CheckedAnswer | None = None
        while True:
            try:
                reply = self.client.turn(
                    system=self.system, tools=self.prompt.tools, messages=messages, stop=self.stop
                )
            except ApiFailure as exc:
                out.status, out.error, out.api_retries = "error", str(exc), out.api_retries + exc.retries
                break
            out.api_retries += reply.retries
            usage.add(reply.usage)
            self.spend.charge(self._cost(reply.usage))
            if reply.stop_reason == "refusal":
                out.status, row["explanation"] = "refused", reply.text.strip()
                out.error = "the model refused to review this episode"
                break
            answer, problems = self._submitted(reply)
            if answer is not None:
                row["raw_input_json"] = json.dumps(answer, sort_keys=True)
                checked = check_answer(answer, ctx, self.taxonomy)
                out.status = "ok"
                break
            out.tool_errors += 1
            if out.tool_errors > self.prompt.max_tool_errors:
                out.error = f"no valid {SUBMIT_TOOL} after {out.tool_errors} tries: {problems[0][1]}"
                break
            if self.spend.exhausted():
                out.status, out.error = "budget", "the run's budget ran out before the review was valid"
                break
            messages.append(
                {"role": "assistant", "content": reply.content or [{"type": "text", "text": "…"}]}
            )
            if reply.tool_calls:
                messages.append(
                    {
                        "role": "user",
                        "content": [
                            {"type": "tool_result", "tool_use_id": cid, "content": msg, "is_error": True}
                            for cid, msg in problems
                        ],
                    }
                )
            else:
                messages.append({"role": "user", "content": problems[0][1]})
        out.tokens_in, out.tokens_out = usage.tokens_in, usage.output_tokens
        out.cost_usd = self._cost(usage)
        out.latency_s = round(time.monotonic() - started, 3)
        if checked is not None:
            out.verdict, out.code, out.citations = checked.verdict, checked.code, len(checked.citations)
            out.dropped = checked.dropped
            row.update(
                verdict=checked.verdict,
                tag_class=checked.tag_class,
                subclass=checked.subclass,
                explanation=checked.explanation,
                citations_json=json.dumps(checked.citations),
                dropped_json=json.dumps(checked.dropped),
            )
        return out, row

    def _submitted(self, reply: TurnReply) -> tuple[dict[str, Any] | None, list[tuple[str, str]]]:
        """The first schema-valid submit_review input, else the error to send back for each tool call."""
        if not reply.tool_calls:
            return None, [("", f"Answer by calling the {SUBMIT_TOOL} tool; a text reply is not a review.")]
        problems: list[tuple[str, str]] = []
        for call in reply.tool_calls:
            if call.name != SUBMIT_TOOL:
                problems.append((call.id, f"unknown tool {call.name!r}: the only tool is {SUBMIT_TOOL}"))
            elif call.parse_error:
                problems.append(
                    (call.id, f"{SUBMIT_TOOL}: {call.parse_error}. Send the input again as JSON.")
                )
            else:
                found = schema_problems(call.input, self.prompt.submit_schema)
                if not found:
                    return call.input, []
                problems.append(
                    (
                        call.id,
                        f"{SUBMIT_TOOL} input does not match its schema; fix and call it again:\n"
                        + "\n".join(f"- {p}" for p in found[:10]),
                    )
                )
        return None, problems


def review_episodes(
    ws: Workspace,
    episode_ids: Sequence[int],
    *,
    model: str | None = None,
    prompt_version: str = DEFAULT_VERSION,
    budget_usd: float | None = None,
    concurrency: int = 2,
    again: bool = False,
    cluster: str = "",
    api_key: str | None = None,
    base_url: str | None = None,
    retry: RetryPolicy | None = None,
    on_progress: Callable[[ReviewOutcome | None, int], None] | None = None,
    stop: threading.Event | None = None,
    check_endpoint: bool = True,
) -> ReviewRunResult:
    """Reviews each episode once with ``model`` and stores every review (whatever its status).

    Episodes already reviewed successfully by the same model and prompt version are skipped unless
    ``again``. ``budget_usd`` caps the run: once spent, no further review starts (reviews in flight finish
    their current call). ``on_progress(outcome, done)`` is called after each episode (outcome None when
    it was skipped). ``check_endpoint``: a server that does not answer at all (nothing listening) raises
    :class:`ReviewUnreachable` before any review starts, instead of each review retrying for minutes.
    """
    model = model or ws.config.generator.model
    prompt = load_reviewer_prompt(prompt_version)
    taxonomy = load_taxonomy(ws.root)
    result = ReviewRunResult(
        run_id=uuid.uuid4().hex[:12], model=model, prompt_version=prompt.name, cluster=cluster
    )
    table = PriceTable(ws.root)
    prices: PriceTable | None = table
    try:
        table.price(model)
    except PriceUnknown as exc:
        if budget_usd is not None:
            raise ReviewError(f"--budget-usd cannot be enforced: {exc}") from None
        prices = None
        result.cost_known = False
        result.warnings.append(f"cost unknown: {exc}")
    key, url = resolve_api(ws, api_key, base_url)
    ids = list(dict.fromkeys(episode_ids))
    with session(ws.engine) as s:
        finished = {r.episode.id for r in rq.finished_episodes(s)}
    bad = [e for e in ids if e not in finished]
    if bad:
        raise ReviewError(f"not finished or not existing, nothing to review: {listed('episode', bad)}")
    if not again:
        with session(ws.engine) as s:
            done = {
                r.episode_id
                for r in rq.all_reviews(s, model=model)
                if r.status == "ok" and r.prompt_version == prompt.name
            }
        result.skipped_reviewed = [e for e in ids if e in done]
        ids = [e for e in ids if e not in done]
    spend = _Spend(budget_usd)
    client = MetaClient(model, api_key=key, base_url=url, retry=retry, max_tokens=prompt.max_tokens)
    if check_endpoint and ids:
        dead = client.unreachable()
        if dead is not None:
            client.close()
            raise ReviewUnreachable(
                f"{dead}: is the server running (ANTHROPIC_BASE_URL / [generator] base_url)? "
                f"no review was started"
            )
    reviewer = _Reviewer(ws, client, prompt, taxonomy, prices, spend, stop)
    lock = threading.Lock()
    counter = [0]

    def progress(outcome: ReviewOutcome | None) -> None:
        with lock:
            counter[0] += 1
            n = counter[0]
        if on_progress is not None:
            on_progress(outcome, n)

    def work(eid: int) -> None:
        if stop is not None and stop.is_set():
            with lock:
                result.skipped_cancelled.append(eid)
            progress(None)
            return
        if spend.exhausted():
            with lock:
                result.skipped_budget.append(eid)
            progress(None)
            return
        try:
            outcome, row = reviewer.review(eid)
        except Cancelled:
            with lock:
                result.skipped_cancelled.append(eid)
            progress(None)
            return
        with session(ws.engine) as s:
            stored = rq.add_review(
                s,
                episode_id=eid,
                model=model,
                prompt_version=prompt.name,
                run_id=result.run_id,
                cluster=cluster,
                status=outcome.status,
                tokens_in=outcome.tokens_in,
                tokens_out=outcome.tokens_out,
                cost_usd=outcome.cost_usd,
                latency_s=outcome.latency_s,
                api_retries=outcome.api_retries,
                tool_errors=outcome.tool_errors,
                error=outcome.error[:2000],
                **row,
            )
            outcome.review_id = stored.id
        with lock:
            result.results.append(outcome)
        progress(outcome)

    try:
        with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="review") as pool:
            list(pool.map(work, ids))
    finally:
        client.close()
    order = {e: i for i, e in enumerate(ids)}
    result.results.sort(key=lambda r: order.get(r.episode_id, 0))
    result.skipped_budget.sort(key=lambda e: order.get(e, 0))
    result.spent_usd = spend.spent
    return result


def accept_review(
    ws: Workspace, review_id: int, *, tagger: Tagger | None = None, note: str = ""
) -> FailureTag:
    """The curator accepts a review: its code becomes a tag written by the curator (undoable through the
    tagger), and the review remembers the tag. Refuses reviews that carry no valid code. Idempotent: a
    review already accepted, or an episode already tagged with its code, gets no second tag (the existing
    one is returned and ``tagger.last_added`` is 0)."""
    tagger = tagger or Tagger(ws)
    with session(ws.engine) as s:
        review: ReviewSuggestion | None = rq.get_review(s, review_id)
        if review is None:
            raise ReviewError(f"review {review_id} does not exist")
        s.expunge(review)
    if review.status != "ok":
        raise ReviewError(f"review {review_id} is {review.status}: nothing to accept")
    code = review_code(review)  # true_fail: the valid failure
    if not code:
        raise ReviewError(
            f"review {review_id} suggests no taxonomy code ({review.verdict}): nothing to accept"
        )
    with session(ws.engine) as s:
        already = rq.accepted_tag(s, review)
    if already is not None:  # accepting twice changes nothing (tagger.last_added says so)
        tagger.last_added = 0
        return already
    text = note or f"accepted from review #{review_id} ({review.model}, {review.prompt_version})"
    (tag,) = tagger.tag(review.episode_id, code, note=text)  # an existing tag with the code is kept
    with session(ws.engine) as s:
        rq.set_review_accepted(s, review_id, tag.id)
    return tag
