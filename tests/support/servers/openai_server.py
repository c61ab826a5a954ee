"""A real HTTP server that speaks the OpenAI chat-completions wire protocol the way ``vllm serve`` does.

vLLM cannot run on CI machines (no GPU), yet the policy client must be tested over real HTTP through the
real ``openai`` SDK: retries, status codes, headers and timeouts are exactly what a function-level patch
would hide. Policies are scripted and chosen by the served model name (``script:solve-hello``...), so a
test picks a behaviour just by naming the model, as a curator names a model in ``bandpass.toml``.

Like vLLM it has one context window (``window``, reported as ``max_model_len`` in ``/v1/models`` unless
``report_window`` is off), counts prompts with a chat template and a tokenizer of its own (which a
characters-per-token guess gets wrong, as real tokenizers make it), answers ``POST /tokenize`` with chat
messages at the server root (``tokenizer=False`` makes it a 404, as on servers that are not vLLM),
refuses a prompt longer than the window with vLLM's 400 ("maximum context length is N tokens. However,
your request has P input tokens"), and silently lowers ``max_tokens`` to what the window leaves, cutting
the reply there with ``finish_reason: length``.

A model can also behave per task (``route``): its first reply in an episode is chosen by a marker found
in the task's instruction, rotating through that marker's replies one episode at a time, and every later
turn confirms completion. Stateless per conversation, so it holds with episodes running concurrently: a
task routed to ``[SOLVE, WRONG]`` is solved in exactly every other episode.

Run standalone (``python -m tests.support.servers.openai_server --port 8000``) to poke at the CLI by hand.
"""

from __future__ import annotations

import argparse
import json
import re
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def _action(
    commands: list[tuple[str, float]] | None = None,
    *,
    analysis: str = "",
    plan: str = "",
    task_complete: bool = False,
) -> str:
    return json.dumps(
        {
            "analysis": analysis,
            "plan": plan,
            "commands": [{"keystrokes": k, "duration": d} for k, d in (commands or [])],
            "task_complete": task_complete,
        }
    )


SOLVE_HELLO: list[Any] = [
    # Prose around a fenced block, as small models often answer: the parser must dig the JSON out.
    "Let me start.\n```json\n"
    + _action([("echo hello > hello.txt\n", 1.0)], analysis="empty dir", plan="write the file")
    + "\n```\n",
    _action([("cat hello.txt\n", 0.5)], analysis="file written", plan="check it", task_complete=True),
    _action([], analysis="hello.txt contains hello", plan="done", task_complete=True),
]
GARBAGE = "I would run `ls` and then probably write the file, but I am not sure how."
LOOP = _action([("ls\n", 0.1)], analysis="looking around", plan="keep looking")
#: "I am done": confirms a task_complete (what a routed model answers after its first turn).
CONFIRM = _action([], analysis="the work is done", plan="confirm", task_complete=True)

#: Preset scripts. An item is the reply text, or a dict: {"status", "retry_after", "message"} for an HTTP
#: error, {"sleep", "content"} for a slow reply, {"content", "finish_reason"} for a cut reply. After the
#: last item the script repeats it.
SCRIPTS: dict[str, list[Any]] = {
    "script:solve-hello": SOLVE_HELLO,
    "script:garbage": [GARBAGE],
    "script:garbage-then-recover": [GARBAGE, *SOLVE_HELLO],
    "script:loop": [LOOP],
    "script:sleep": [{"sleep": 30.0, "content": LOOP}],
    "script:flaky": [{"status": 500}, {"status": 429, "retry_after": "0"}, *SOLVE_HELLO],
    "script:rate-limited": [{"status": 429, "retry_after": "0"}],
    "script:down": [{"status": 503}],
    # A reply far longer than any max_tokens: the server stops it there ("length").
    "script:truncated": ['{"analysis": "' + "a very long thought that never ends, " * 2000],
    "script:context-overflow": [
        {
            "status": 400,
            "message": "This model's maximum context length is 4096 tokens. However, you requested 5000 "
            "tokens (4000 in the messages, 1000 in the completion). Please reduce the length of the "
            "messages or completion.",
        }
    ],
}

_ERROR_TYPES = {
    400: "BadRequestError",
    401: "invalid_request_error",
    404: "NotFoundError",
    429: "rate_limit_error",
    500: "InternalServerError",
    503: "ServiceUnavailableError",
}


@dataclass
class Received:
    """One request as the server saw it, so tests can assert what the client really sent."""

    method: str
    path: str
    headers: dict[str, str]
    body: dict[str, Any] | None


@dataclass
class OpenAIServer:
    """The server's state; ``start()`` binds 127.0.0.1 on a free port."""

    api_key: str | None = None
    window: int = 32768
    report_window: bool = True
    tokenizer: bool = True
    scripts: dict[str, list[Any]] = field(default_factory=lambda: {k: list(v) for k, v in SCRIPTS.items()})
    extra_models: list[str] = field(default_factory=list)
    requests: list[Received] = field(default_factory=list)
    #: model -> [(marker, first replies)]: see the module docstring (``route``).
    routes: dict[str, list[tuple[str, list[Any]]]] = field(default_factory=dict)
    _counters: dict[str, int] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _httpd: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None

    @property
    def port(self) -> int:
        assert self._httpd is not None, "server not started"
        return self._httpd.server_address[1]

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def models(self) -> list[str]:
        return [*self.scripts, *self.routes, *self.extra_models]

    def route(self, model: str, routes: list[tuple[str, list[Any]]]) -> None:
        """Makes ``model`` behave per task: an episode whose instruction contains ``marker`` opens with
        the marker's next reply (in rotation); every later turn confirms completion."""
        with self._lock:
            self.routes[model] = [(marker, list(replies)) for marker, replies in routes]
            for marker, _ in routes:
                self._counters.pop(f"{model}\0{marker}", None)

    def routed_reply(self, model: str, messages: list[dict[str, Any]]) -> Any:
        if any(m.get("role") == "assistant" for m in messages):
            return CONFIRM
        first_user = next((str(m.get("content", "")) for m in messages if m.get("role") == "user"), "")
        with self._lock:
            for marker, replies in self.routes[model]:
                if marker in first_user:
                    key = f"{model}\0{marker}"
                    i = self._counters.get(key, 0)
                    self._counters[key] = i + 1
                    return replies[i % len(replies)]
        return GARBAGE

    def script(self, model: str, items: list[Any]) -> None:
        """Registers (or replaces) a scripted model and restarts its sequence."""
        with self._lock:
            self.scripts[model] = list(items)
            self._counters.pop(model, None)

    def chat_requests(self, model: str | None = None) -> list[Received]:
        return [
            r
            for r in self.requests
            if r.path.endswith("/chat/completions")
            and (model is None or (r.body or {}).get("model") == model)
        ]

    def next_item(self, model: str) -> Any:
        with self._lock:
            items = self.scripts[model]
            i = self._counters.get(model, 0)
            self._counters[model] = i + 1
        return items[min(i, len(items) - 1)]

    def start(self) -> OpenAIServer:
        handler = type("Handler", (_Handler,), {"state": self})
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), handler)
        httpd.daemon_threads = True
        httpd.block_on_close = False  # a "sleep" script must not hold up the test's teardown
        self._httpd = httpd
        self._thread = threading.Thread(
            target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="openai-server", daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None


@contextmanager
def running_server(**kwargs: Any) -> Iterator[OpenAIServer]:
    server = OpenAIServer(**kwargs).start()
    try:
        yield server
    finally:
        server.stop()


#: The server's tokenizer: a word is one token per 4 characters, punctuation one token each, spaces free.
#: Deliberately unlike a flat characters-per-token ratio ("f\n" lines are 1 token per 2 characters).
_TOKEN = re.compile(r"\w{1,4}|[^\w\s]")
#: Chat template: "<|im_start|>role\n ... <|im_end|>\n" costs 5 tokens a message; the generation prompt 3.
TEMPLATE_TOKENS_PER_MESSAGE = 5
GENERATION_PROMPT_TOKENS = 3


def _tokens(text: str) -> int:
    return len(_TOKEN.findall(text))


def _first_tokens(text: str, n: int) -> str:
    """``text`` up to the end of its n-th token (what a server sends when it stops at n tokens)."""
    if n <= 0:
        return ""
    for i, m in enumerate(_TOKEN.finditer(text), 1):
        if i == n:
            return text[: m.end()]
    return text


def prompt_tokens(messages: list[dict[str, Any]]) -> int:
    """Exactly what this server counts for a chat prompt (what ``/tokenize`` and ``usage`` report)."""
    return (
        sum(_tokens(str(m.get("content", ""))) + TEMPLATE_TOKENS_PER_MESSAGE for m in messages)
        + GENERATION_PROMPT_TOKENS
    )


class _Handler(BaseHTTPRequestHandler):
    state: OpenAIServer
    protocol_version = "HTTP/1.1"

    def log_message(self, format: str, *args: Any) -> None:  # stdlib signature
        pass

    # --- plumbing --- #

    def _send(self, status: int, payload: dict[str, Any], headers: dict[str, str] | None = None) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(data)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):
            pass  # the client gave up (timeout): nothing to answer

    def _error(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        err_type = _ERROR_TYPES.get(status, "APIError")
        self._send(
            status, {"error": {"message": message, "type": err_type, "param": None, "code": status}}, headers
        )

    def _record(self, body: dict[str, Any] | None) -> None:
        with self.state._lock:
            self.state.requests.append(
                Received(self.command, self.path, {k.lower(): v for k, v in self.headers.items()}, body)
            )

    def _authorized(self) -> bool:
        if self.state.api_key is None:
            return True
        if self.headers.get("authorization", "") == f"Bearer {self.state.api_key}":
            return True
        self._send(
            401,
            {
                "error": {
                    "message": "Incorrect API key provided.",
                    "type": "invalid_request_error",
                    "param": None,
                    "code": "invalid_api_key",
                }
            },
        )
        return False

    # --- routes --- #

    def do_GET(self) -> None:  # stdlib naming
        self._record(None)
        if self.path == "/health":
            self._send(200, {})
            return
        if not self._authorized():
            return
        if self.path.rstrip("/") == "/v1/models":
            now = int(time.time())
            data = [
                {
                    "id": m,
                    "object": "model",
                    "created": now,
                    "owned_by": "vllm",
                    "root": m,
                    **({"max_model_len": self.state.window} if self.state.report_window else {}),
                }
                for m in self.state.models
            ]
            self._send(200, {"object": "list", "data": data})
            return
        self._error(404, f"no route {self.path}")

    def do_POST(self) -> None:  # stdlib naming
        length = int(self.headers.get("content-length") or 0)
        raw = self.rfile.read(length) if length else b""
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as e:
            self._record(None)
            self._error(400, f"invalid JSON body: {e}")
            return
        self._record(body)
        if not self._authorized():
            return
        if self.path.rstrip("/") == "/tokenize" and self.state.tokenizer:
            msgs = body.get("messages")
            n = prompt_tokens(msgs) if msgs is not None else _tokens(str(body.get("prompt", "")))
            self._send(200, {"count": n, "max_model_len": self.state.window, "tokens": list(range(n))})
            return
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._error(404, f"no route {self.path}")
            return
        model = body.get("model")
        if model not in self.state.models:
            self._error(404, f"The model `{model}` does not exist.")
            return
        n_prompt = prompt_tokens(body.get("messages", []))
        if n_prompt >= self.state.window:
            self._error(
                400,
                f"This model's maximum context length is {self.state.window} tokens. However, your request "
                f"has {n_prompt} input tokens. Please reduce the length of the input messages.",
            )
            return
        if model in self.state.routes:
            item = self.state.routed_reply(model, body.get("messages", []))
            self._complete(body, item, "stop")
            return
        if model not in self.state.scripts:  # an extra model: answers "ok" (enough for `policy check`)
            self._complete(body, "ok", "stop")
            return
        item = self.state.next_item(model)
        if isinstance(item, str):
            self._complete(body, item, "stop")
            return
        if "status" in item:
            status = int(item["status"])
            headers = {"retry-after": str(item["retry_after"])} if "retry_after" in item else None
            self._error(status, item.get("message", f"scripted {status}"), headers)
            return
        if item.get("sleep"):
            time.sleep(float(item["sleep"]))
        self._complete(body, item.get("content", ""), item.get("finish_reason", "stop"))

    def _complete(self, body: dict[str, Any], content: str, finish_reason: str) -> None:
        n_prompt = prompt_tokens(body.get("messages", []))
        asked = body.get("max_tokens") or body.get("max_completion_tokens")
        room = self.state.window - n_prompt  # vLLM lowers max_tokens to what the window leaves
        limit = room if asked is None else min(int(asked), room)
        if _tokens(content) > limit:
            content = _first_tokens(content, limit)
            finish_reason = "length"
        completion_tokens = _tokens(content)
        self._send(
            200,
            {
                "id": f"chatcmpl-{uuid.uuid4().hex}",
                "object": "chat.completion",
                "created": int(time.time()),
                "model": body["model"],
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": content, "tool_calls": []},
                        "logprobs": None,
                        "finish_reason": finish_reason,
                        "stop_reason": None,
                    }
                ],
                "usage": {
                    "prompt_tokens": n_prompt,
                    "completion_tokens": completion_tokens,
                    "total_tokens": n_prompt + completion_tokens,
                },
            },
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--api-key", default=None)
    parser.add_argument("--window", type=int, default=32768, help="max_model_len")
    args = parser.parse_args()
    state = OpenAIServer(api_key=args.api_key, window=args.window)
    handler = type("Handler", (_Handler,), {"state": state})
    httpd = ThreadingHTTPServer(("127.0.0.1", args.port), handler)
    print(f"serving {', '.join(state.models)} at http://127.0.0.1:{args.port}/v1", flush=True)
    httpd.serve_forever()


if __name__ == "__main__":
    main()
