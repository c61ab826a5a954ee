"""Fitting a chat request into the served context window, with counts that are exact whenever they can be.

A guessed token count is a harness bug waiting to happen: an estimate that overshoots ends episodes the
server would have accepted, one that undershoots sends prompts the server refuses. So the count comes from
the server's own tokenizer (vLLM's ``/tokenize`` applies the model's chat template to the messages) or from
the server's ``usage`` for a prompt it already answered, both cached per prompt prefix (the conversation
only grows, so each step asks about one new prompt). The local characters-per-token estimate is a
fallback only, carries a stated margin, and is never enough to end an episode: with an estimate the request
is sent and the server's 400 decides.

Fitting follows vLLM's own order of preference: drop the oldest turns, then cap the newest observation,
then lower ``max_tokens`` to what the window leaves. Each cut is returned as a record for the step.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from ...core.plural import counted
from .context import DEFAULT_CHARS_PER_TOKEN, MESSAGE_OVERHEAD_TOKENS, cut_middle

Messages = list[dict[str, str]]

#: The estimate's stated margin: a fraction of the estimated tokens plus a constant (chat template,
#: tokenizer differences). Applied only to the part of a prompt that was not counted exactly.
ESTIMATE_MARGIN_FRACTION = 0.15
ESTIMATE_MARGIN_TOKENS = 32
#: A reply needs room: below this many completion tokens the newest observation is capped first.
MIN_REPLY_TOKENS = 256
#: Bounds on the learned characters-per-token ratio: one odd count must not make trimming absurd.
_CPT_RANGE = (1.0, 8.0)


@dataclass
class Count:
    """A prompt's length in tokens; ``exact`` when the server counted it (``source``: tokenize, usage),
    else an estimate that already includes ``margin``."""

    tokens: int
    exact: bool
    source: str
    margin: int = 0

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"tokens": self.tokens, "exact": self.exact, "source": self.source}
        if self.margin:
            d["margin"] = self.margin
        return d


def _chain(messages: Messages) -> list[str]:
    """One key per prefix (``messages[:i+1]``), each hashed from the previous one: O(n) for all."""
    keys: list[str] = []
    h = hashlib.sha256()
    for m in messages:
        h.update(json.dumps([m.get("role", ""), m.get("content", "")], ensure_ascii=False).encode())
        keys.append(h.copy().hexdigest())
    return keys


class PromptCounter:
    """Counts chat prompts for one episode. ``tokenize`` is the server's exact counter (None when it has
    none); exact counts are cached per prompt prefix and teach the fallback estimate its ratio."""

    def __init__(
        self,
        tokenize: Callable[[Messages], int | None] | None,
        chars_per_token: float = DEFAULT_CHARS_PER_TOKEN,
    ) -> None:
        self._tokenize = tokenize
        self._exact: dict[str, int] = {}
        self.chars_per_token = chars_per_token
        self.requests = 0  # tokenizer calls made (the cache's saving is visible in tests and benches)

    def learn(self, messages: Messages, prompt_tokens: int) -> None:
        """Records an exact count (the server's ``usage.prompt_tokens`` for a prompt it answered)."""
        if prompt_tokens <= 0 or not messages:
            return
        self._exact[_chain(messages)[-1]] = prompt_tokens
        chars = sum(len(m.get("content", "")) for m in messages)
        text_tokens = prompt_tokens - MESSAGE_OVERHEAD_TOKENS * len(messages)
        if text_tokens > 0 and chars:
            lo, hi = _CPT_RANGE
            self.chars_per_token = min(hi, max(lo, chars / text_tokens))

    def estimate(self, messages: Messages) -> int:
        """The local guess, no margin: characters over the learned ratio plus a per-message overhead."""
        return sum(
            int(len(m.get("content", "")) / self.chars_per_token) + MESSAGE_OVERHEAD_TOKENS for m in messages
        )

    def count(self, messages: Messages, *, exact: bool = True) -> Count:
        """Exact when cached or when the server can tokenize (``exact=False`` skips the request: a quick
        guess to choose a candidate); else the longest exactly counted prefix plus an estimate of the
        rest, with the stated margin."""
        keys = _chain(messages)
        if keys and keys[-1] in self._exact:
            return Count(self._exact[keys[-1]], True, "cached")
        if exact and self._tokenize is not None and messages:
            self.requests += 1
            n = self._tokenize(messages)
            if n is not None:
                self.learn(messages, n)
                return Count(n, True, "tokenize")
        base, rest = 0, messages
        for i in range(len(keys) - 2, -1, -1):
            if keys[i] in self._exact:
                base, rest = self._exact[keys[i]], messages[i + 1 :]
                break
        guess = self.estimate(rest)
        margin = int(guess * ESTIMATE_MARGIN_FRACTION) + ESTIMATE_MARGIN_TOKENS
        return Count(base + guess + margin, False, "estimate", margin)


@dataclass
class Fit:
    """The request to send: ``messages``, its ``count``, the ``max_tokens`` to ask for, and every cut."""

    messages: Messages
    count: Count
    max_tokens: int
    cuts: list[dict[str, Any]] = field(default_factory=list)


class PromptTooLong(RuntimeError):
    """Even the smallest prompt does not fit the window, *counted exactly*: ``context_overflow``."""

    def __init__(self, detail: str, cut: dict[str, Any]) -> None:
        self.detail = detail
        self.cut = cut
        super().__init__(detail)


_NOTE = re.compile(r"\n\n\[… (\d+) earlier turns? cut to fit the context window\]$")


def _trimmed(messages: Messages, dropped_pairs: int) -> Messages:
    """System + first user message (the task, with a note of what is gone) + the newer turns. A
    conversation trimmed before keeps one note with the running total."""
    if dropped_pairs == 0:
        return messages
    head, turns = messages[:2], messages[2:]
    content = head[1]["content"]
    earlier = _NOTE.search(content)
    total = dropped_pairs + (int(earlier.group(1)) if earlier else 0)
    if earlier:
        content = content[: earlier.start()]
    note = f"\n\n[… {counted(total, 'earlier turn')} cut to fit the context window]"
    return [head[0], {**head[1], "content": content + note}, *turns[2 * dropped_pairs :]]


def fit_request(messages: Messages, *, window: int | None, max_tokens: int, counter: PromptCounter) -> Fit:
    """Fits ``messages`` (system, task, then assistant/user pairs; the last pair is never dropped) and the
    reply into ``window`` tokens. Raises ``PromptTooLong`` only on an exact count; with an estimate the
    smallest request is sent anyway and the server's answer decides."""
    full = counter.count(messages)
    if window is None:
        return Fit(messages, full, max_tokens)
    cuts: list[dict[str, Any]] = []
    budget = window - max_tokens  # the prompt's room when the reply gets all it asks for
    prompt, count = messages, full
    if count.tokens > budget:
        pairs = max(0, (len(messages) - 4) // 2)  # droppable turn pairs: all but the newest
        chosen = 0
        for dropped in range(1, pairs + 1):
            chosen = dropped
            candidate = _trimmed(messages, dropped)
            if counter.count(candidate, exact=False).tokens > budget and dropped < pairs:
                continue  # a quick guess says it cannot fit: do not spend a tokenizer call on it
            c = counter.count(candidate)
            if c.tokens <= budget or dropped == pairs:
                prompt, count = candidate, c
                if c.tokens <= budget:
                    break
        if chosen:
            cuts.append(
                {
                    "kind": "history",
                    "messages_dropped": 2 * chosen,
                    "tokens_before": full.tokens,
                    "tokens_after": count.tokens,
                    "budget": budget,
                    "exact": count.exact,
                }
            )
    reply_room = window - count.tokens
    floor = min(max_tokens, MIN_REPLY_TOKENS)
    # Then the newest observation, then the policy's own previous reply (a reply cut at the window would
    # otherwise fill the next prompt all by itself); the system prompt and the task are never cut.
    for at, part in ((-1, "fit"), (-2, "reply")):
        if reply_room >= floor or len(prompt) < 4:
            break
        prompt, count = _cap(prompt, at, part, count, window - floor, counter, cuts)
        reply_room = window - count.tokens
    if reply_room <= 0:
        if count.exact:
            cut = {"kind": "context_overflow", "tokens": count.tokens, "window": window, "exact": True}
            raise PromptTooLong(
                f"the prompt is {count.tokens} tokens (counted by the server) with every older turn "
                f"dropped and the newest observation capped; the window is {window}",
                cut,
            )
        # An estimate is not evidence enough to end the episode: ask, and let the server's 400 decide.
        cuts.append({"kind": "estimate_over_window", "tokens": count.tokens, "window": window})
        return Fit(prompt, count, floor, cuts)
    sent = min(max_tokens, reply_room)
    if sent < max_tokens:
        cuts.append(
            {
                "kind": "max_tokens",
                "asked": max_tokens,
                "sent": sent,
                "prompt_tokens": count.tokens,
                "window": window,
                "exact": count.exact,
            }
        )
    return Fit(prompt, count, sent, cuts)


def _cap(
    prompt: Messages,
    at: int,
    part: str,
    count: Count,
    target: int,
    counter: PromptCounter,
    cuts: list[dict[str, Any]],
) -> tuple[Messages, Count]:
    """Cuts the middle of ``prompt[at]`` until the prompt is ``target`` tokens or less; a few rounds,
    each re-counted, since bytes map to tokens only roughly."""
    before = count.tokens
    original = prompt[at]["content"]
    keep = len(original.encode("utf-8", errors="replace"))
    total_cut = 0
    for _ in range(4):
        over = count.tokens - target
        if over <= 0 or keep <= 0:
            break
        keep = max(0, keep - int(over * counter.chars_per_token * 1.2) - 64)
        text, total_cut = cut_middle(original, keep)
        prompt = list(prompt)
        prompt[at] = {**prompt[at], "content": text}
        count = counter.count(prompt)
    if total_cut:
        cuts.append(
            {
                "kind": "observation" if part == "fit" else "history",
                "part": part,
                "bytes_cut": total_cut,
                "tokens_before": before,
                "tokens_after": count.tokens,
                "exact": count.exact,
            }
        )
    return prompt, count
