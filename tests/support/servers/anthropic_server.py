"""A real HTTP server on 127.0.0.1 that speaks the Anthropic Messages API, for the generator's tests.

Claude cannot be reached from CI, yet the meta-agent must be tested through the real ``anthropic`` SDK over
real HTTP: streaming (SSE), tool_use / tool_result pairing, error bodies and headers (``retry-after``,
``request-id``) are exactly what a function-level patch would hide. The wire format follows the public
API: ``POST /v1/messages`` with ``x-api-key`` (or ``Authorization: Bearer``) and ``anthropic-version``
headers; a stream is
``message_start``, ``ping``, per block ``content_block_start`` / ``content_block_delta`` (``text_delta``
or ``input_json_delta``) / ``content_block_stop``, then ``message_delta`` (stop_reason, output usage) and
``message_stop``; errors are ``{"type": "error", "error": {"type", "message"}, "request_id"}`` with a
``request-id`` header, or an ``event: error`` inside a stream (how overload shows mid-stream).

Requests are validated as the real API does (roles alternate, every ``tool_use`` is answered by a
``tool_result`` in the next user message, tool inputs are objects), so a protocol bug in the loop fails
the test with the same 400 Claude would send.

Failures a real server shows are scriptable too: :class:`Fail` (an HTTP error), :class:`StreamFail` (an
``event: error`` mid-stream), :class:`Cut` (the connection closed mid-body, reset, or stalled past the
client's timeout) and ``Reply(..., no_stop=True)`` (a stream that ends cleanly without a stop reason).
``refuse_tools`` makes the server answer any request with tools 400, the way vLLM does without its
tool-call flags. ``GET /v1/models`` lists the scripted models.

Conversations are scripted per model name. The server is stateless about conversations: the turn to play
is the number of assistant messages in the request, so concurrent conversations of one model each get
the script from the start. A script entry is a :class:`Reply`, a callable ``(request body) -> Reply``
(to react to tool results), or a list of :class:`Fail` / :class:`StreamFail` followed by a Reply, served
in order to repeated requests for that turn (``429 then success``). Past the end the last entry repeats.
Helpers: :func:`malformed` (a tool input that is not valid JSON) and :func:`refusal` (``stop_reason:
"refusal"``), as the reviewer's tests need.
"""

from __future__ import annotations

import json
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

API_VERSION = "2023-06-01"


@dataclass
class Text:
    text: str


@dataclass
class Tool:
    """A tool_use block. ``raw_json`` (sent verbatim as input_json_delta chunks) overrides ``input`` and may
    be invalid JSON, as a model's streamed tool input occasionally is."""

    name: str
    input: dict[str, Any] = field(default_factory=dict)
    raw_json: str | None = None


@dataclass
class Reply:
    blocks: list[Text | Tool]
    stop_reason: str | None = None  # default: tool_use when a Tool block is present, else end_turn
    input_tokens: int | None = None  # default: derived from the request's size
    output_tokens: int | None = None  # default: derived from the reply's size
    cache_read_input_tokens: int = 0
    cache_creation_input_tokens: int = 0
    no_stop: bool = False  # message_delta carries stop_reason null: the server stopped mid-reply


@dataclass
class Fail:
    """An HTTP error response: 429 rate_limit_error, 529 overloaded_error, 500 api_error..."""

    status: int
    type: str
    message: str = "scripted error"
    retry_after: str | None = None
    headers: dict[str, str] = field(default_factory=dict)


@dataclass
class StreamFail:
    """A 200 stream that starts, emits ``partial`` text, then an ``event: error`` (default overloaded)."""

    partial: str = "Let me"
    type: str = "overloaded_error"
    message: str = "Overloaded"


@dataclass
class Cut:
    """A 200 stream that starts, emits ``partial`` text, then breaks: ``how`` is ``close`` (the server
    closes without finishing the chunked body) or ``stall`` (no more bytes for ``stall_s`` seconds, past
    the client's read timeout, then close)."""

    how: str = "close"
    partial: str = "Let me think about "
    stall_s: float = 30.0


#: vLLM's answer when tools are sent but it runs without --enable-auto-tool-choice (an OpenAI-style body).
VLLM_TOOLS_REFUSAL = '"auto" tool choice requires --enable-auto-tool-choice and --tool-call-parser to be set'

Entry = Reply | Fail | StreamFail | Cut | Callable[[dict[str, Any]], Reply] | list[Any]

_STATUS_TYPES = {
    400: "invalid_request_error",
    401: "authentication_error",
    403: "permission_error",
    404: "not_found_error",
    413: "request_too_large",
    429: "rate_limit_error",
    500: "api_error",
    529: "overloaded_error",
}


def text(s: str) -> Text:
    return Text(s)


def tool(name: str, **inputs: Any) -> Tool:
    return Tool(name, dict(inputs))


def malformed(name: str, raw_json: str) -> Tool:
    """A tool_use whose streamed input is ``raw_json`` verbatim (may be invalid JSON)."""
    return Tool(name, raw_json=raw_json)


def refusal(text: str = "I can't help with reviewing this.") -> Reply:
    """A reply the way the API ends a turn its classifiers stopped: ``stop_reason: "refusal"``."""
    return Reply([Text(text)], stop_reason="refusal")


@dataclass
class Received:
    """One request as the server saw it (headers lower-cased), with its arrival time."""

    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None
    at: float
    turn: int = -1
    status: int = 200


@dataclass
class AnthropicServer:
    api_key: str = "sk-ant-test-key-0123456789abcdef"
    scripts: dict[str, list[Entry]] = field(default_factory=dict)
    requests: list[Received] = field(default_factory=list)
    #: (model, input_tokens, output_tokens, cache_write, cache_read) of every successful reply sent.
    usage_sent: list[tuple[str, int, int, int, int]] = field(default_factory=list)
    #: Seconds between SSE events, so a test can watch tokens arrive one by one.
    event_delay_s: float = 0.0
    #: When set, any request with tools is answered 400 with this message in vLLM's error shape.
    refuse_tools: str | None = None
    _release: threading.Event = field(default_factory=threading.Event)  # ends stalls on stop()
    _served: dict[tuple[str, int], int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: ThreadingHTTPServer | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        """What ANTHROPIC_BASE_URL takes: the SDK appends /v1/messages itself."""
        return f"http://127.0.0.1:{self.port}"

    def script(self, model: str, entries: list[Entry]) -> None:
        with self._lock:
            self.scripts[model] = list(entries)
            for key in [k for k in self._served if k[0] == model]:
                del self._served[key]

    def message_requests(self, model: str | None = None) -> list[Received]:
        return [
            r
            for r in self.requests
            if r.path.startswith("/v1/messages") and (model is None or (r.body or {}).get("model") == model)
        ]

    def next_entry(self, model: str, turn: int, body: dict[str, Any]) -> Reply | Fail | StreamFail | Cut:
        with self._lock:
            entries = self.scripts[model]
            entry = entries[min(turn, len(entries) - 1)]
            if isinstance(entry, list):
                i = self._served.get((model, turn), 0)
                self._served[(model, turn)] = i + 1
                entry = entry[min(i, len(entry) - 1)]
        if callable(entry) and not isinstance(entry, (Reply, Fail, StreamFail, Cut)):
            entry = entry(body)
        return entry

    def start(self) -> AnthropicServer:
        handler = type("Handler", (_Handler,), {"state": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False
        self._httpd = httpd
        threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="anthropic-server", daemon=True
        ).start()
        return self

    def stop(self) -> None:
        self._release.set()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


@contextmanager
def running_server(**kwargs: Any) -> Iterator[AnthropicServer]:
    server = AnthropicServer(**kwargs).start()
    try:
        yield server
    finally:
        server.stop()


def _tokens(s: str) -> int:
    return max(1, len(s) // 4)


def _request_id() -> str:
    return f"req_{uuid.uuid4().hex[:24]}"


def validate(body: dict[str, Any]) -> str | None:
    """The first problem the real API would answer 400 for, or None."""
    for key in ("model", "max_tokens", "messages"):
        if key not in body:
            return f"{key}: Field required"
    if not isinstance(body["max_tokens"], int) or body["max_tokens"] < 1:
        return "max_tokens: Input should be a positive integer"
    msgs = body["messages"]
    if not isinstance(msgs, list) or not msgs:
        return "messages: at least one message is required"
    if msgs[0].get("role") != "user":
        return 'messages: first message must use the "user" role'
    for i, m in enumerate(msgs):
        role = m.get("role")
        if role not in ("user", "assistant"):
            return f"messages.{i}.role: Input should be 'user' or 'assistant'"
        if i and msgs[i - 1].get("role") == role:
            return f'messages.{i}: roles must alternate between "user" and "assistant"'
        content = m.get("content")
        if isinstance(content, str):
            if not content and i != len(msgs) - 1:
                return f"messages.{i}: all messages must have non-empty content"
            continue
        if not isinstance(content, list) or not content:
            return f"messages.{i}: all messages must have non-empty content"
        for j, b in enumerate(content):
            btype = b.get("type")
            if btype == "text" and not b.get("text"):
                return f"messages.{i}.content.{j}.text: text content blocks must be non-empty"
            if btype == "tool_use":
                if role != "assistant":
                    return f"messages.{i}.content.{j}: tool_use blocks are only allowed in assistant messages"
                if not isinstance(b.get("input"), dict):
                    return f"messages.{i}.content.{j}.tool_use.input: Input should be a valid dictionary"
            if btype == "tool_result" and role != "user":
                return f"messages.{i}.content.{j}: tool_result blocks are only allowed in user messages"
        if role == "assistant":
            ids = [b["id"] for b in content if b.get("type") == "tool_use"]
            if ids:
                if i + 1 >= len(msgs):
                    return f"messages.{i}: the last message cannot be an assistant message with tool_use"
                nxt = msgs[i + 1].get("content")
                results = [b for b in nxt if b.get("type") == "tool_result"] if isinstance(nxt, list) else []
                got = [b.get("tool_use_id") for b in results]
                missing = [x for x in ids if x not in got]
                if missing:
                    return (
                        f"messages.{i + 1}: `tool_use` ids were found without `tool_result` blocks "
                        f"immediately after: {', '.join(missing)}. Each `tool_use` block must have a "
                        "corresponding `tool_result` block in the next message."
                    )
                if isinstance(nxt, list) and nxt[: len(results)] != results:
                    return f"messages.{i + 1}: tool_result blocks must come first in the user message"
        if role == "user" and isinstance(content, list):
            prev = msgs[i - 1].get("content") if i else None
            prev_ids = (
                {b["id"] for b in prev if b.get("type") == "tool_use"} if isinstance(prev, list) else set()
            )
            for b in content:
                if b.get("type") == "tool_result" and b.get("tool_use_id") not in prev_ids:
                    return (
                        f"messages.{i}: unexpected `tool_use_id` found in `tool_result` blocks: "
                        f"{b.get('tool_use_id')}. Each `tool_result` block must have a corresponding "
                        "`tool_use` block in the previous message."
                    )
    for t in body.get("tools") or []:
        if not isinstance(t.get("name"), str) or not isinstance(t.get("input_schema"), dict):
            return "tools: each tool needs a name and an input_schema"
    return None


class _Handler(BaseHTTPRequestHandler):
    state: AnthropicServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
        pass

    # --- plumbing --- #

    def _json(self, status: int, payload: dict[str, Any], headers: dict[str, str]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status, "Overloaded" if status == 529 else None)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in headers.items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def _error(self, status: int, etype: str, message: str, extra: dict[str, str] | None = None) -> None:
        rid = _request_id()
        if self.state.requests:
            self.state.requests[-1].status = status
        self._json(
            status,
            {"type": "error", "error": {"type": etype, "message": message}, "request_id": rid},
            {"request-id": rid, **(extra or {})},
        )

    def _chunk(self, data: bytes) -> None:
        self.wfile.write(b"%x\r\n%s\r\n" % (len(data), data))
        self.wfile.flush()

    def _sse(self, events: Iterator[tuple[str, dict[str, Any]]], rid: str) -> None:
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("cache-control", "no-cache")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("request-id", rid)
            self.end_headers()
            for name, payload in events:
                self._chunk(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
                if self.state.event_delay_s:
                    time.sleep(self.state.event_delay_s)
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except (BrokenPipeError, ConnectionResetError):
            pass

    # --- routes --- #

    def do_GET(self) -> None:  # stdlib naming
        self.state.requests.append(Received(self.path, dict(self.headers.items()), None, time.monotonic()))
        if self.path.split("?")[0].rstrip("/") == "/v1/models":
            ids = sorted(self.state.scripts)
            data = [
                {"type": "model", "id": m, "display_name": m, "created_at": "2025-01-01T00:00:00Z"}
                for m in ids
            ]
            payload = {"data": data, "has_more": False, "first_id": ids[0] if ids else None}
            self._json(200, {**payload, "last_id": ids[-1] if ids else None}, {"request-id": _request_id()})
            return
        self._error(404, "not_found_error", f"Not found: {self.path}")

    def do_POST(self) -> None:  # stdlib naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        headers = {k.lower(): v for k, v in self.headers.items()}
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self.state.requests.append(Received(self.path, headers, None, time.monotonic()))
            self._error(400, "invalid_request_error", f"invalid JSON body: {exc}")
            return
        turn = sum(1 for m in body.get("messages") or [] if m.get("role") == "assistant")
        with self.state._lock:
            self.state.requests.append(Received(self.path, headers, body, time.monotonic(), turn))
        if self.path.split("?")[0].rstrip("/") != "/v1/messages":
            self._error(404, "not_found_error", f"Not found: {self.path}")
            return
        # The API takes the key as ``x-api-key`` or (newer SDKs send this) ``Authorization: Bearer``.
        sent = headers.get("x-api-key") or headers.get("authorization", "").removeprefix("Bearer ")
        if sent != self.state.api_key:
            self._error(401, "authentication_error", "invalid x-api-key")
            return
        if not headers.get("anthropic-version"):
            self._error(400, "invalid_request_error", "anthropic-version: header is required")
            return
        problem = validate(body)
        if problem:
            self._error(400, "invalid_request_error", problem)
            return
        if self.state.refuse_tools and body.get("tools"):
            self.state.requests[-1].status = 400
            vllm_body = {"object": "error", "message": self.state.refuse_tools, "type": "BadRequestError"}
            self._json(400, {**vllm_body, "param": None, "code": 400}, {})
            return
        model = body["model"]
        if model not in self.state.scripts:
            self._error(404, "not_found_error", f"model: {model}")
            return
        entry = self.state.next_entry(model, turn, body)
        if isinstance(entry, Fail):
            extra = dict(entry.headers)
            if entry.retry_after is not None:
                extra["retry-after"] = entry.retry_after
            self._error(entry.status, entry.type, entry.message, extra)
            return
        rid = _request_id()
        if isinstance(entry, StreamFail):
            self._sse(self._failing_events(body, entry), rid)
            return
        if isinstance(entry, Cut):
            self._cut(body, entry, rid)
            return
        if body.get("stream"):
            self._sse(self._events(body, entry), rid)
        else:
            self._json(200, self._message(body, entry), {"request-id": rid})

    def _cut(self, body: dict[str, Any], cut: Cut, rid: str) -> None:
        """Starts a stream, sends part of a reply, then breaks the connection the way ``cut.how`` says."""
        import socket

        start = [
            self._start(body, _tokens(json.dumps(body.get("messages", [])))),
            (
                "content_block_start",
                {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
            ),
            (
                "content_block_delta",
                {
                    "type": "content_block_delta",
                    "index": 0,
                    "delta": {"type": "text_delta", "text": cut.partial},
                },
            ),
        ]
        try:
            self.send_response(200)
            self.send_header("content-type", "text/event-stream; charset=utf-8")
            self.send_header("transfer-encoding", "chunked")
            self.send_header("request-id", rid)
            self.end_headers()
            for name, payload in start:
                self._chunk(f"event: {name}\ndata: {json.dumps(payload)}\n\n".encode())
            if cut.how == "stall":
                self.state._release.wait(cut.stall_s)
        except (BrokenPipeError, ConnectionResetError):
            pass
        self.close_connection = True
        with suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)

    # --- bodies --- #

    def _usage(self, body: dict[str, Any], reply: Reply) -> tuple[int, int]:
        inp = reply.input_tokens
        if inp is None:
            inp = _tokens(json.dumps(body.get("messages", []))) + _tokens(json.dumps(body.get("system", "")))
        out = reply.output_tokens
        if out is None:
            out = sum(
                _tokens(b.text) if isinstance(b, Text) else _tokens(b.raw_json or json.dumps(b.input))
                for b in reply.blocks
            )
        with self.state._lock:
            self.state.usage_sent.append(
                (body["model"], inp, out, reply.cache_creation_input_tokens, reply.cache_read_input_tokens)
            )
        return inp, out

    @staticmethod
    def _stop_reason(reply: Reply) -> str:
        if reply.stop_reason:
            return reply.stop_reason
        return "tool_use" if any(isinstance(b, Tool) for b in reply.blocks) else "end_turn"

    def _message(self, body: dict[str, Any], reply: Reply) -> dict[str, Any]:
        inp, out = self._usage(body, reply)
        content: list[dict[str, Any]] = []
        for b in reply.blocks:
            if isinstance(b, Text):
                content.append({"type": "text", "text": b.text})
            else:
                content.append(
                    {
                        "type": "tool_use",
                        "id": f"toolu_{uuid.uuid4().hex[:24]}",
                        "name": b.name,
                        "input": b.input,
                    }
                )
        return {
            "id": f"msg_{uuid.uuid4().hex[:24]}",
            "type": "message",
            "role": "assistant",
            "model": body["model"],
            "content": content,
            "stop_reason": self._stop_reason(reply),
            "stop_sequence": None,
            "usage": {
                "input_tokens": inp,
                "output_tokens": out,
                "cache_creation_input_tokens": reply.cache_creation_input_tokens,
                "cache_read_input_tokens": reply.cache_read_input_tokens,
            },
        }

    def _start(self, body: dict[str, Any], inp: int, cw: int = 0, cr: int = 0) -> tuple[str, dict[str, Any]]:
        return (
            "message_start",
            {
                "type": "message_start",
                "message": {
                    "id": f"msg_{uuid.uuid4().hex[:24]}",
                    "type": "message",
                    "role": "assistant",
                    "model": body["model"],
                    "content": [],
                    "stop_reason": None,
                    "stop_sequence": None,
                    "usage": {
                        "input_tokens": inp,
                        "output_tokens": 1,
                        "cache_creation_input_tokens": cw,
                        "cache_read_input_tokens": cr,
                    },
                },
            },
        )

    def _events(self, body: dict[str, Any], reply: Reply) -> Iterator[tuple[str, dict[str, Any]]]:
        inp, out = self._usage(body, reply)
        yield self._start(body, inp, reply.cache_creation_input_tokens, reply.cache_read_input_tokens)
        yield "ping", {"type": "ping"}
        for i, b in enumerate(reply.blocks):
            if isinstance(b, Text):
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {"type": "text", "text": ""},
                    },
                )
                for k in range(0, len(b.text), 16):
                    yield (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "text_delta", "text": b.text[k : k + 16]},
                        },
                    )
            else:
                yield (
                    "content_block_start",
                    {
                        "type": "content_block_start",
                        "index": i,
                        "content_block": {
                            "type": "tool_use",
                            "id": f"toolu_{uuid.uuid4().hex[:24]}",
                            "name": b.name,
                            "input": {},
                        },
                    },
                )
                raw = b.raw_json if b.raw_json is not None else json.dumps(b.input)
                # The API opens every tool input with an empty partial_json, then sends pieces of it.
                pieces = [""] + [raw[k : k + 40] for k in range(0, len(raw), 40)]
                for piece in pieces:
                    yield (
                        "content_block_delta",
                        {
                            "type": "content_block_delta",
                            "index": i,
                            "delta": {"type": "input_json_delta", "partial_json": piece},
                        },
                    )
            yield "content_block_stop", {"type": "content_block_stop", "index": i}
        yield (
            "message_delta",
            {
                "type": "message_delta",
                "delta": {
                    "stop_reason": None if reply.no_stop else self._stop_reason(reply),
                    "stop_sequence": None,
                },
                "usage": {"output_tokens": out},
            },
        )
        yield "message_stop", {"type": "message_stop"}

    def _failing_events(self, body: dict[str, Any], fail: StreamFail) -> Iterator[tuple[str, dict[str, Any]]]:
        yield self._start(body, _tokens(json.dumps(body.get("messages", []))))
        yield (
            "content_block_start",
            {
                "type": "content_block_start",
                "index": 0,
                "content_block": {"type": "text", "text": ""},
            },
        )
        yield (
            "content_block_delta",
            {
                "type": "content_block_delta",
                "index": 0,
                "delta": {"type": "text_delta", "text": fail.partial},
            },
        )
        yield "error", {"type": "error", "error": {"type": fail.type, "message": fail.message}}
