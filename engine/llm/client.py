"""One meta-agent turn over the Anthropic Messages API: streamed, retried, and accounted.

The SDK's own retries are switched off (``max_retries=0``) and done here instead, because the generator
must *count* them: an overloaded API is an infrastructure fact (``api_retries``, ``infra.*``), never a
failure of the prompt version whose yield is being measured. Waits honour ``retry-after`` /
``retry-after-ms`` when the server sends them, else exponential backoff with jitter.

The stream is read as raw events and accumulated here rather than with the SDK's helper, so that a tool
call whose input is not valid JSON becomes a :class:`ToolCall` with ``parse_error`` set (answered with an
``is_error`` tool_result the model can act on) instead of an exception that loses the whole turn.

Transport failures are classified whatever HTTP layer the SDK uses: before the response the SDK wraps
them (``APIConnectionError``, ``APITimeoutError``); once a stream is being read, anthropic up to 2.16 lets
its HTTP library's own errors through unwrapped (in 2.x that is ``httpx2``: ``RemoteProtocolError`` when
the server closes mid-body, ``ReadTimeout`` when it stalls, ``ReadError`` on a reset), and 2.17 wraps them
in the same ``APIConnectionError`` / ``APITimeoutError``. Both are taken, and a failure while the stream
is being read is a :class:`BrokenStream` (the tokens and message id seen so far kept) whichever way it
arrives. All of them are ``infra.generator_unavailable`` and retried. A stream that ends without a stop
reason is an :class:`IncompleteStream`: retried, never taken as a turn, its tokens reported apart as lost.
Every failure carries one line for the curator (:func:`describe`): what happened, the URL, the server's
own message.
"""

from __future__ import annotations

import email.utils
import json
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import anthropic
import httpx

try:  # the SDK's HTTP layer: httpx2 in anthropic 2.x, httpx before; catch both, whichever is installed
    import httpx2

    _TRANSPORT_ERRORS: tuple[type[Exception], ...] = (httpx.TransportError, httpx2.TransportError)
    _TIMEOUTS: tuple[type[Exception], ...] = (httpx.TimeoutException, httpx2.TimeoutException)
    _PROTOCOL: tuple[type[Exception], ...] = (httpx.RemoteProtocolError, httpx2.RemoteProtocolError)
    _CONNECT: tuple[type[Exception], ...] = (httpx.ConnectError, httpx2.ConnectError)
except ImportError:  # pragma: no cover - an older SDK on plain httpx
    _TRANSPORT_ERRORS = (httpx.TransportError,)
    _TIMEOUTS = (httpx.TimeoutException,)
    _PROTOCOL = (httpx.RemoteProtocolError,)
    _CONNECT = (httpx.ConnectError,)

from ..core.errors import BandpassError
from .pricing import Usage

#: Retryable API conditions → the infra code recorded if retries run out.
RATE_LIMITED = "infra.rate_limited"
OVERLOADED = "infra.generator_overloaded"
UNAVAILABLE = "infra.generator_unavailable"
INCOMPLETE = "infra.generator_incomplete_stream"
#: Reason codes that mean the generator's API failed (not the prompt, not Bandpass): the report counts them
#: apart from Bandpass's own errors, and ``bandpass generate`` exits 3 when an attempt ended with one.
API_CODE_PREFIXES = ("infra.generator_", "infra.rate_limited")


def is_api_code(code: str) -> bool:
    return code.startswith(API_CODE_PREFIXES)


class ApiFailure(BandpassError, RuntimeError):
    """The API could not give a turn: a non-retryable error, or retries exhausted. ``code`` is the infra
    code stored as the generation's reason; ``detail`` the one line for the curator."""

    def __init__(
        self,
        code: str,
        detail: str,
        *,
        retries: int = 0,
        request_id: str | None = None,
        lost: Usage | None = None,
    ) -> None:
        self.code = code
        self.detail = detail
        self.retries = retries
        self.request_id = request_id
        self.lost = lost or Usage()  # tokens of the last, broken stream (earlier ones went to on_retry)
        super().__init__(f"{code}: {detail}")


class IncompleteStream(RuntimeError):
    """The stream ended (or broke) before the server said why the reply stopped: not a turn."""

    def __init__(self, why: str, *, usage: Usage, message_id: str | None, request_id: str | None) -> None:
        self.why = why
        self.usage = usage
        self.message_id = message_id
        self.request_id = request_id
        super().__init__(why)


class BrokenStream(RuntimeError):
    """A transport error while a stream was being read, with what the stream had delivered so far."""

    def __init__(
        self, cause: BaseException, *, usage: Usage, message_id: str | None, request_id: str | None
    ) -> None:
        self.cause = cause
        self.usage = usage
        self.message_id = message_id
        self.request_id = request_id
        super().__init__(str(cause))


#: What a dead or broken connection raises: the SDK's own error, or its HTTP library's, unwrapped.
_CONNECTION_ERRORS: tuple[type[Exception], ...] = (anthropic.APIConnectionError, *_TRANSPORT_ERRORS)
#: Every failure of one streamed turn that ``turn`` classifies (and retries when it may).
_TURN_ERRORS: tuple[type[Exception], ...] = (
    anthropic.APIError,
    BrokenStream,
    IncompleteStream,
    *_TRANSPORT_ERRORS,
)


class WaitPastDeadline(RuntimeError):
    """The next retry would wait beyond the generation's wall-time budget."""


class Cancelled(BandpassError, RuntimeError):
    pass


@dataclass
class ToolCall:
    id: str
    name: str
    input: dict[str, Any] | None
    raw_json: str = ""
    parse_error: str | None = None


@dataclass
class TurnReply:
    content: list[dict[str, Any]]  # the assistant message's blocks, as they must be sent back
    tool_calls: list[ToolCall]
    text: str
    stop_reason: str | None
    usage: Usage
    request_id: str | None = None
    message_id: str | None = None
    retries: int = 0
    retry_log: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RetryPolicy:
    max_retries: int = 8
    backoff_base_s: float = 1.0
    backoff_max_s: float = 60.0
    max_retry_after_s: float = 300.0


def classify(exc: BaseException) -> tuple[str, bool]:
    """(infra code, retryable) for an SDK exception."""
    if isinstance(exc, anthropic.APIStatusError):
        etype = getattr(exc, "type", None) or ""
        status = exc.status_code
        if status == 429 or etype == "rate_limit_error":
            # A spend cap also says rate_limit_error; waiting will not lift it until next month.
            if getattr(exc, "error_code", None) == "enforced_spend_limit_reached":
                return "infra.generator_spend_limit", False
            return RATE_LIMITED, True
        if status == 529 or etype == "overloaded_error":
            return OVERLOADED, True
        if status >= 500 or etype == "api_error":
            return UNAVAILABLE, True
        if status in (401, 403) or etype in ("authentication_error", "permission_error"):
            return "infra.generator_auth", False
        if status == 404 or etype == "not_found_error":
            return "infra.generator_model_not_found", False
        if status == 408 or status == 409:
            return UNAVAILABLE, True
        return "infra.generator_rejected", False
    if isinstance(exc, BrokenStream):
        return UNAVAILABLE, True
    if isinstance(exc, IncompleteStream):
        return INCOMPLETE, True
    if isinstance(exc, _CONNECTION_ERRORS):
        return UNAVAILABLE, True
    return "infra.generator_error", False


def describe(exc: BaseException, url: str) -> str:
    """One line for the curator: what happened, at which URL, in the server's (or the socket's) words."""
    if isinstance(exc, anthropic.APIStatusError):
        etype = getattr(exc, "type", None) or ""
        msg = _server_message(exc)
        return f"HTTP {exc.status_code}{' ' + etype if etype else ''} from {url}: {msg}"
    if isinstance(exc, IncompleteStream):
        mid = f" (message {exc.message_id})" if exc.message_id else ""
        return f"{url} ended the stream without a stop reason{mid}: {exc.why}"
    broken = isinstance(exc, BrokenStream)
    cause: BaseException | None = exc.cause if isinstance(exc, BrokenStream) else exc
    # The SDK wraps the HTTP library's error: the cause says what really happened.
    while isinstance(cause, anthropic.APIConnectionError) and cause.__cause__ is not None:
        cause = cause.__cause__
    words = _root_words(cause) if cause is not None else ""
    refused = isinstance(exc, anthropic.APIConnectionError) and "refused" in words.lower()
    if isinstance(cause, _CONNECT) or refused:
        return f"cannot connect to {url}: {words or 'connection failed'}"
    if isinstance(cause, _TIMEOUTS) or isinstance(exc, anthropic.APITimeoutError):
        if broken:
            return f"the stream from {url} stalled: no data before the read timeout ({type(cause).__name__})"
        return f"no reply from {url} before the timeout ({type(cause).__name__})"
    if isinstance(cause, _PROTOCOL):
        return f"{url} closed the connection mid-reply: {words}"
    if broken:
        return f"the stream from {url} broke: {type(cause).__name__}: {words}"
    return f"request to {url} failed: {type(cause).__name__ if cause else type(exc).__name__}: {words}"


def _root_words(exc: BaseException) -> str:
    """The innermost message: ``[Errno 111] Connection refused`` rather than ``Connection error.``."""
    words = str(exc)
    inner = exc.__cause__ or exc.__context__
    depth = 0
    while inner is not None and depth < 5:
        if str(inner):
            words = str(inner)
        inner = inner.__cause__ or inner.__context__
        depth += 1
    return words.strip() or type(exc).__name__


def _server_message(exc: anthropic.APIStatusError) -> str:
    """The server's own message from an error body: Anthropic's ``error.message``, vLLM's / FastAPI's
    ``message`` or ``detail``, else the raw text."""
    body = exc.body
    if isinstance(body, dict):
        err = body.get("error")
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        for key in ("message", "detail"):
            if body.get(key):
                return str(body[key])
    msg = getattr(exc, "api_message", None) or exc.message or ""
    return str(msg).strip() or "(no message)"


def retry_after_s(exc: BaseException) -> float | None:
    """The server's requested wait: ``retry-after-ms``, else ``retry-after`` (seconds or HTTP date)."""
    response = getattr(exc, "response", None)
    headers = getattr(response, "headers", None)
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    ra = headers.get("retry-after")
    if not ra:
        return None
    try:
        return max(0.0, float(ra))
    except ValueError:
        parsed = email.utils.parsedate_to_datetime(ra) if ra else None
        if parsed is None:
            return None
        return max(0.0, parsed.timestamp() - time.time())


def cut_line(stop_reason: str | None, usage: Usage, max_tokens: int) -> str:
    """Why a reply ended at ``max_tokens``, named right: a reply that used its whole requested
    ``max_tokens`` hit the output limit; one that stopped short of it was clamped by the context window
    (vLLM lowers ``max_tokens`` silently to what the window leaves). "" when the reply was not cut."""
    if stop_reason != "max_tokens":
        return ""
    if usage.output_tokens >= max_tokens:
        return f"cut off at the output limit (max_tokens {max_tokens})"
    return (
        f"cut off at the context window: the conversation ({usage.tokens_in} tokens) left room for only "
        f"{usage.output_tokens} tokens of reply"
    )


class MetaClient:
    """A streaming Messages client for one model. Thread-safe: concurrent generations share it."""

    def __init__(
        self,
        model: str,
        *,
        api_key: str,
        base_url: str | None = None,
        timeout_s: float = 600.0,
        retry: RetryPolicy | None = None,
        max_tokens: int = 8192,
    ) -> None:
        self.model = model
        self.max_tokens = max_tokens
        self.retry = retry or RetryPolicy()
        self.base_url = base_url
        # max_retries=0: retries are ours, so they can be counted and can honour the wall budget.
        self._client = anthropic.Anthropic(
            api_key=api_key, base_url=base_url, max_retries=0, timeout=timeout_s
        )

    def close(self) -> None:
        self._client.close()

    @property
    def messages_url(self) -> str:
        """The URL every turn is posted to, as the curator should see it in an error line."""
        return str(self._client.base_url).rstrip("/") + "/v1/messages"

    def unreachable(self, timeout_s: float = 10.0) -> str | None:
        """One cheap request (``GET /v1/models``) before a batch: None when the server answers at all
        (any HTTP status, even 404: something listens), else the one line ``describe`` gives for the
        connection failure. Why: a batch against a dead endpoint used to retry every attempt's first
        turn (``--api-retries``, 8) with backoff for minutes before the batch halted; ``bandpass run``
        checks its policy endpoint first, and generation and review now do too. It sends no Messages
        request: no tokens, no cost, and a scripted server's replies are untouched."""
        try:
            self._client.with_options(timeout=timeout_s).models.list(limit=1)
        except anthropic.APIStatusError:
            return None
        except _CONNECTION_ERRORS as exc:
            return describe(exc, self.messages_url)
        except Exception:  # noqa: BLE001 - a reply the SDK cannot parse still came from a live server
            return None
        return None

    def turn(
        self,
        *,
        system: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        on_text: Callable[[str], None] | None = None,
        on_retry: Callable[[dict[str, Any]], None] | None = None,
        deadline: float | None = None,
        stop: threading.Event | None = None,
    ) -> TurnReply:
        retries = 0
        log: list[dict[str, Any]] = []
        while True:
            if stop is not None and stop.is_set():
                raise Cancelled("generation cancelled")
            try:
                reply = self._stream_once(system=system, tools=tools, messages=messages, on_text=on_text)
                reply.retries = retries
                reply.retry_log = log
                return reply
            except _TURN_ERRORS as exc:
                code, retryable = classify(exc)
                request_id = getattr(exc, "request_id", None)
                detail = describe(exc, self.messages_url)
                lost = _lost_usage(exc)
                if not retryable or retries >= self.retry.max_retries:
                    raise ApiFailure(
                        code,
                        detail if retryable is False else f"{detail} (gave up after {retries} retries)",
                        retries=retries,
                        request_id=request_id,
                        lost=lost,
                    ) from exc
                wait = retry_after_s(exc)
                honoured = wait is not None
                if wait is None:
                    base = self.retry.backoff_base_s * (2**retries)
                    wait = min(self.retry.backoff_max_s, base) * (0.5 + random.random() / 2)
                wait = min(wait, self.retry.max_retry_after_s)
                if deadline is not None and time.monotonic() + wait > deadline:
                    raise WaitPastDeadline(
                        f"{code}: retry in {wait:.1f}s would pass the wall budget ({detail})"
                    ) from exc
                retries += 1
                entry = {
                    "code": code,
                    "status": getattr(exc, "status_code", None),
                    "request_id": request_id,
                    "message_id": getattr(exc, "message_id", None),
                    "wait_s": round(wait, 3),
                    "retry_after_honoured": honoured,
                    "attempt": retries,
                    "detail": detail[:500],
                }
                if lost.tokens_in or lost.output_tokens:
                    entry["lost_usage"] = lost.__dict__
                log.append(entry)
                if on_retry is not None:
                    on_retry(entry)
                if stop is not None:
                    if stop.wait(wait):
                        raise Cancelled("generation cancelled") from exc
                else:
                    time.sleep(wait)

    def _stream_once(
        self,
        *,
        system: list[dict[str, Any]],
        tools: list[dict[str, Any]],
        messages: list[dict[str, Any]],
        on_text: Callable[[str], None] | None,
    ) -> TurnReply:
        blocks: dict[int, dict[str, Any]] = {}
        json_bufs: dict[int, str] = {}
        usage = Usage()
        stop_reason: str | None = None
        message_id: str | None = None
        # The blocks are plain JSON dicts; the SDK types each kind as a TypedDict.
        stream = self._client.messages.create(  # type: ignore[call-overload]  # plain dicts, see above
            model=self.model,
            max_tokens=self.max_tokens,
            messages=messages,
            stream=True,
            # Left out when empty: some servers refuse an empty tools list or an empty system.
            **({"system": system} if system else {}),
            **({"tools": tools} if tools else {}),
        )
        request_id = stream.response.headers.get("request-id")
        events = 0
        try:
            with stream:
                for event in stream:
                    events += 1
                    stop_reason, message_id = self._take_event(
                        event, blocks, json_bufs, usage, on_text, stop_reason, message_id
                    )
        except anthropic.APIStatusError as exc:  # an error event mid-stream (overloaded...): tokens lost
            exc.lost_usage = usage  # type: ignore[attr-defined]  # the lost tokens ride on the SDK's error
            raise
        except _CONNECTION_ERRORS as exc:  # 2.17+ wraps them mid-stream too
            raise BrokenStream(exc, usage=usage, message_id=message_id, request_id=request_id) from exc
        except (json.JSONDecodeError, UnicodeDecodeError) as exc:
            why = f"garbled event after {events} events: {exc}"
            raise IncompleteStream(why, usage=usage, message_id=message_id, request_id=request_id) from exc
        if stop_reason is None:
            why = f"{events} events, no message_delta with a stop_reason"
            raise IncompleteStream(why, usage=usage, message_id=message_id, request_id=request_id)
        return self._assemble(blocks, json_bufs, stop_reason, usage, request_id, message_id, self.max_tokens)

    @staticmethod
    def _take_event(
        event: Any,
        blocks: dict[int, dict[str, Any]],
        json_bufs: dict[int, str],
        usage: Usage,
        on_text: Callable[[str], None] | None,
        stop_reason: str | None,
        message_id: str | None,
    ) -> tuple[str | None, str | None]:
        """Accumulates one stream event; returns the (stop reason, message id) known so far."""
        etype = event.type
        if etype == "message_start":
            message_id = event.message.id
            _take_usage(usage, event.message.usage)
        elif etype == "content_block_start":
            blocks[event.index] = event.content_block.model_dump(exclude_none=True)
            if blocks[event.index].get("type") == "tool_use":
                json_bufs[event.index] = ""
        elif etype == "content_block_delta":
            block = blocks.setdefault(event.index, {"type": "text", "text": ""})
            delta = event.delta
            if delta.type == "text_delta":
                block["text"] = block.get("text", "") + delta.text
                if on_text is not None and delta.text:
                    on_text(delta.text)
            elif delta.type == "input_json_delta":
                json_bufs[event.index] = json_bufs.get(event.index, "") + delta.partial_json
            elif delta.type == "thinking_delta":
                block["thinking"] = block.get("thinking", "") + delta.thinking
            elif delta.type == "signature_delta":
                block["signature"] = delta.signature
        elif etype == "message_delta":
            stop_reason = event.delta.stop_reason or stop_reason
            _take_usage(usage, event.usage, cumulative_output=True)
        return stop_reason, message_id

    @staticmethod
    def _assemble(
        blocks: dict[int, dict[str, Any]],
        json_bufs: dict[int, str],
        stop_reason: str | None,
        usage: Usage,
        request_id: str | None,
        message_id: str | None,
        max_tokens: int = 0,
    ) -> TurnReply:
        """The assistant message (as it must be sent back) and its tool calls, from the accumulated blocks."""
        content: list[dict[str, Any]] = []
        calls: list[ToolCall] = []
        text_parts: list[str] = []
        for index in sorted(blocks):
            block = blocks[index]
            if block.get("type") == "text":
                block.pop("citations", None)
                if not block.get("text"):
                    continue  # the API refuses empty text blocks when they are sent back
                text_parts.append(block["text"])
                content.append({"type": "text", "text": block["text"]})
            elif block.get("type") == "tool_use":
                raw = json_bufs.get(index, "")
                call = ToolCall(id=block["id"], name=block["name"], input=None, raw_json=raw)
                if raw.strip():
                    try:
                        parsed = json.loads(raw)
                    except json.JSONDecodeError as exc:
                        call.parse_error = f"tool input is not valid JSON ({exc.msg} at char {exc.pos})"
                        cut = cut_line(stop_reason, usage, max_tokens)
                        if cut:
                            call.parse_error += f"; your reply was {cut}: write big files in parts"
                        parsed = None
                else:
                    parsed = block.get("input") or {}
                if parsed is not None and not isinstance(parsed, dict):
                    call.parse_error = f"tool input must be a JSON object, got {type(parsed).__name__}"
                    parsed = None
                call.input = parsed
                calls.append(call)
                # What goes back to the API must be an object even when the model's JSON was broken.
                content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": parsed or {}})
            elif block.get("type") in ("thinking", "redacted_thinking"):
                content.append(block)
        return TurnReply(
            content=content,
            tool_calls=calls,
            text="".join(text_parts),
            stop_reason=stop_reason,
            usage=usage,
            request_id=request_id,
            message_id=message_id,
        )


def _take_usage(usage: Usage, raw: Any, *, cumulative_output: bool = False) -> None:
    """message_start carries the input side; message_delta carries the (cumulative) output count and,
    on some servers, a final input count: take the larger so neither event is double-counted."""
    if raw is None:
        return
    inp = getattr(raw, "input_tokens", None)
    if inp:
        usage.input_tokens = max(usage.input_tokens, int(inp))
    cw = getattr(raw, "cache_creation_input_tokens", None)
    if cw:
        usage.cache_write_tokens = max(usage.cache_write_tokens, int(cw))
    cr = getattr(raw, "cache_read_input_tokens", None)
    if cr:
        usage.cache_read_tokens = max(usage.cache_read_tokens, int(cr))
    out = getattr(raw, "output_tokens", None)
    if out:
        usage.output_tokens = int(out) if cumulative_output else max(usage.output_tokens, int(out))


def _lost_usage(exc: BaseException) -> Usage:
    """Tokens a failed stream had already reported (message_start's input, output so far)."""
    usage = getattr(exc, "usage", None) or getattr(exc, "lost_usage", None)
    return usage if isinstance(usage, Usage) else Usage()
