"""The policy endpoint: any OpenAI-compatible chat-completions server (what ``vllm serve`` exposes).

The SDK's own retries are switched off and replaced by a loop here, because the accounting differs by
cause and must be exact (DESIGN.md, "Outcomes and accounting"): a rate limit or an endpoint that is down
is an *infrastructure* error, excluded from pass@k, while a policy that is too slow for its own deadline is
a *harness* (agent) error. A silent SDK retry would blur both and hide how often it happened.

The API key is read from the environment variable the config names and handed to the SDK only; it never
appears in a repr, an error detail, a log line or a stored step.
"""

from __future__ import annotations

import os
import re
import threading
import time
from dataclasses import dataclass, field, replace
from typing import Any

import httpx
import openai

from ...core.config import Config, PolicyModelConfig
from ...core.errors import InvalidInput

#: Cap on a server's ``retry-after``: a misconfigured proxy asking for an hour must not stall a rollout.
MAX_RETRY_AFTER_S = 60.0
#: Below this much time left before the deadline, another request cannot usefully start.
_MIN_REQUEST_S = 0.05


@dataclass
class Attempt:
    """One HTTP request for one completion: a slow server's wall time is the sum of these, not the last.

    ``error`` is empty for the attempt that answered, else what went wrong (``HTTP 503``, ``timeout``,
    ``connection refused``...); ``wait_s`` is the backoff slept after it before the next attempt."""

    latency_s: float
    error: str = ""
    status: int | None = None
    wait_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        d: dict[str, Any] = {"latency_s": round(self.latency_s, 3)}
        if self.error:
            d["error"] = self.error
        if self.status is not None:
            d["status"] = self.status
        if self.wait_s:
            d["wait_s"] = round(self.wait_s, 3)
        return d


class PolicyInfraError(RuntimeError):
    """The endpoint, not the policy, failed; ``code`` becomes ``infra_error:<code>``.

    Codes: ``rate_limited`` (429 after the retry budget), ``policy_unavailable`` (5xx, connection refused,
    repeated request timeouts), ``policy_auth`` (401/403), ``policy_model_not_found`` (404),
    ``policy_rejected`` (another 4xx: the request itself is wrong, a configuration problem).
    """

    def __init__(self, code: str, detail: str, *, retries: int = 0) -> None:
        self.code = code
        self.detail = detail
        self.retries = retries
        self.attempts: list[Attempt] = []
        super().__init__(f"{code}: {detail}")


class PolicyTimeout(RuntimeError):
    """The policy could not answer before the agent's deadline: ``agent_error:agent_timeout``."""

    def __init__(self, detail: str, *, retries: int = 0) -> None:
        self.detail = detail
        self.retries = retries
        self.attempts: list[Attempt] = []
        super().__init__(detail)


class PolicyContextOverflow(RuntimeError):
    """The server refused the prompt as longer than the model's context: ``agent_error:context_overflow``.

    Our own token estimate can be wrong (it is an estimate); the server's 400 is the ground truth.
    ``window`` is the limit the server states ("maximum context length is N tokens"), when it says.
    """

    def __init__(self, detail: str, window: int | None = None, prompt_tokens: int | None = None) -> None:
        self.detail = detail
        self.window = window
        self.prompt_tokens = prompt_tokens
        self.attempts: list[Attempt] = []
        super().__init__(detail)


@dataclass
class Completion:
    text: str
    prompt_tokens: int
    completion_tokens: int
    latency_s: float  # the successful request only; time lost to retries shows up as ``retries``
    finish_reason: str
    retries: int = 0
    attempts: list[Attempt] = field(default_factory=list)
    max_tokens: int = 0  # what the request asked for (a reply cut below it was cut by the window)


@dataclass
class CheckReport:
    """What ``bandpass policy check`` learned about an endpoint that works."""

    base_url: str
    model: str
    served: list[str] = field(default_factory=list)
    latency_s: float = 0.0
    reply: str = ""
    served_window: int | None = None  # max_model_len from /v1/models (None: the server does not say)
    configured_window: int | None = None  # context_window in bandpass.toml
    tokenizer: bool = False  # the server counts chat prompts exactly (vLLM's /tokenize)
    warnings: list[str] = field(default_factory=list)

    @property
    def window(self) -> int | None:
        """The window Bandpass fits prompts to: the smaller of the two when both are known."""
        known = [w for w in (self.served_window, self.configured_window) if w]
        return min(known) if known else None


def _server_message(exc: openai.APIStatusError) -> str:
    """The server's own error text (vLLM and OpenAI both nest it as ``{"error": {"message": ...}}``)."""
    body: Any = exc.body
    if isinstance(body, dict):
        err = body.get("error", body)
        if isinstance(err, dict) and err.get("message"):
            return str(err["message"])
        if isinstance(err, str):
            return err
    try:
        return exc.response.text[:300] or exc.message
    except Exception:  # noqa: BLE001 - a streamed/closed body: fall back to the SDK's text
        return exc.message


def _retry_after(exc: openai.APIStatusError) -> float | None:
    headers = exc.response.headers
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return float(ms) / 1000
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        from email.utils import parsedate_to_datetime

        try:
            return max(0.0, parsedate_to_datetime(value).timestamp() - time.time())
        except (TypeError, ValueError):
            return None


def _is_context_overflow(message: str) -> bool:
    m = message.lower()
    return "context length" in m or "maximum context" in m or "context window" in m


_WINDOW_IN_MESSAGE = re.compile(r"maximum context length is (\d+)", re.IGNORECASE)
_PROMPT_IN_MESSAGE = re.compile(r"(\d+) input tokens|\((\d+) in the messages", re.IGNORECASE)


def window_from_message(message: str) -> int | None:
    """The window a server's 400 states (vLLM and OpenAI: "maximum context length is N tokens")."""
    m = _WINDOW_IN_MESSAGE.search(message)
    return int(m.group(1)) if m else None


def prompt_tokens_from_message(message: str) -> int | None:
    """The prompt length a server's 400 states ("your request has P input tokens", or the older
    "(P in the messages, M in the completion)"): an exact count, straight from the tokenizer."""
    m = _PROMPT_IN_MESSAGE.search(message)
    return int(m.group(1) or m.group(2)) if m else None


def window_mismatch_warning(configured: int | None, served: int | None, model: str) -> str | None:
    """The one line ``policy check`` and ``run`` print when bandpass.toml and the server disagree."""
    if not configured or not served or configured == served:
        return None
    return (
        f"context_window {configured} in bandpass.toml for {model!r} differs from the served window "
        f"{served} (max_model_len); using {min(configured, served)}"
        + ("; a larger configured window would overflow the server" if configured > served else "")
    )


def server_root(base_url: str) -> str:
    """``http://host:8000/v1`` -> ``http://host:8000``: vLLM serves ``/tokenize`` and ``/health`` there."""
    root = base_url.rstrip("/")
    return root[: -len("/v1")] if root.endswith("/v1") else root


class PolicyClient:
    """One policy model behind an OpenAI-compatible endpoint."""

    def __init__(
        self,
        cfg: PolicyModelConfig,
        *,
        timeout: float,
        max_retries: int = 4,
        backoff_base: float = 0.5,
        backoff_max: float = 8.0,
    ) -> None:
        self.cfg = cfg
        self.timeout = timeout
        self.max_retries = max_retries
        self.backoff_base = backoff_base
        self.backoff_max = backoff_max
        self._no_tokenizer = False
        self._lock = threading.Lock()
        self._window_known = False
        self._served_window: int | None = None
        self._sdk = openai.OpenAI(
            base_url=cfg.base_url,
            api_key=os.environ.get(cfg.api_key_env) or "EMPTY",
            max_retries=0,
            timeout=timeout,
        )

    def __repr__(self) -> str:
        return f"PolicyClient(model={self.cfg.served_name!r}, base_url={self.cfg.base_url!r})"

    def close(self) -> None:
        self._sdk.close()

    # --- requests --- #

    def complete(
        self,
        messages: list[dict[str, str]],
        *,
        deadline: float | None = None,
        max_tokens: int | None = None,
    ) -> Completion:
        """One chat completion, retried by cause; ``deadline`` is the agent's ``time.monotonic()`` limit.

        Each request's timeout shrinks to the time left, so a slow policy ends as ``PolicyTimeout`` at the
        deadline instead of overrunning it; earlier request timeouts are retried within the budget. Every
        attempt is kept (``Completion.attempts`` or the exception's ``attempts``) with its latency, error
        and the backoff after it: three timeouts then a success cost the step all four.
        """
        attempts: list[Attempt] = []
        asked = max_tokens or self.cfg.max_tokens
        try:
            return self._complete(messages, deadline, asked, attempts)
        except (PolicyInfraError, PolicyTimeout, PolicyContextOverflow) as e:
            e.attempts = attempts
            raise

    def _complete(
        self, messages: list[dict[str, str]], deadline: float | None, asked: int, attempts: list[Attempt]
    ) -> Completion:
        retries = 0
        timeouts = 0
        while True:
            left = None if deadline is None else deadline - time.monotonic()
            if left is not None and left <= _MIN_REQUEST_S:
                raise PolicyTimeout(
                    f"no time left for a policy request ({retries} retries spent)", retries=retries
                )
            req_timeout = self.timeout if left is None else min(self.timeout, left)
            start = time.monotonic()
            try:
                resp = self._sdk.chat.completions.create(
                    model=self.cfg.served_name,
                    messages=messages,  # type: ignore[arg-type]  # plain JSON dicts; the SDK's are TypedDicts
                    temperature=self.cfg.temperature,
                    max_tokens=asked,
                    timeout=req_timeout,
                )
            except openai.APITimeoutError:
                attempts.append(Attempt(time.monotonic() - start, f"timeout after {req_timeout:.1f}s"))
                timeouts += 1
                if deadline is not None and deadline - time.monotonic() <= _MIN_REQUEST_S:
                    raise PolicyTimeout(
                        "policy did not answer before the agent deadline "
                        f"(request timeout {req_timeout:.1f}s, "
                        f"{retries} retries)",
                        retries=retries,
                    ) from None
                if retries >= self.max_retries:
                    raise PolicyInfraError(
                        "policy_unavailable",
                        f"{timeouts} requests in a row timed out after {self.timeout:.1f}s "
                        f"at {self.cfg.base_url}",
                        retries=retries,
                    ) from None
                retries += 1
                continue
            except openai.APIConnectionError as e:
                why = _connection_reason(e)
                attempts.append(Attempt(time.monotonic() - start, why))
                if retries >= self.max_retries:
                    raise PolicyInfraError(
                        "policy_unavailable",
                        f"cannot reach {self.cfg.base_url}: {why} (after {retries} retries)",
                        retries=retries,
                    ) from None
                retries += 1
                self._sleep(self._backoff(retries), deadline, "policy_unavailable", why, retries, attempts)
                continue
            except openai.APIStatusError as e:
                msg = _server_message(e)
                status = e.status_code
                attempts.append(Attempt(time.monotonic() - start, f"HTTP {status}", status=status))
                if status == 429:
                    if retries >= self.max_retries:
                        raise PolicyInfraError(
                            "rate_limited",
                            f"HTTP 429 from {self.cfg.base_url} after {retries} retries: {msg}",
                            retries=retries,
                        ) from None
                    retries += 1
                    wait = _retry_after(e)
                    wait = self._backoff(retries) if wait is None else min(wait, MAX_RETRY_AFTER_S)
                    self._sleep(wait, deadline, "rate_limited", f"HTTP 429: {msg}", retries, attempts)
                    continue
                if status >= 500:
                    if retries >= self.max_retries:
                        raise PolicyInfraError(
                            "policy_unavailable",
                            f"HTTP {status} from {self.cfg.base_url} after {retries} retries: {msg}",
                            retries=retries,
                        ) from None
                    retries += 1
                    self._sleep(
                        self._backoff(retries),
                        deadline,
                        "policy_unavailable",
                        f"HTTP {status}",
                        retries,
                        attempts,
                    )
                    continue
                if status == 400 and _is_context_overflow(msg):
                    raise PolicyContextOverflow(
                        f"server refused the prompt: {msg}",
                        window_from_message(msg),
                        prompt_tokens_from_message(msg),
                    ) from None
                raise PolicyInfraError(
                    _status_code(status), f"HTTP {status} from {self.cfg.base_url}: {msg}", retries=retries
                ) from None
            latency = time.monotonic() - start
            attempts.append(Attempt(latency))
            choice = resp.choices[0] if resp.choices else None
            usage = resp.usage
            return Completion(
                text=(choice.message.content or "") if choice else "",
                prompt_tokens=usage.prompt_tokens if usage else 0,
                completion_tokens=usage.completion_tokens if usage else 0,
                latency_s=latency,
                finish_reason=(choice.finish_reason or "") if choice else "",
                retries=retries,
                attempts=attempts,
                max_tokens=asked,
            )

    def _backoff(self, attempt: int) -> float:
        doubling: int = 2 ** (attempt - 1)  # attempts count from 1
        return min(self.backoff_max, self.backoff_base * doubling)

    def _sleep(
        self,
        seconds: float,
        deadline: float | None,
        code: str,
        why: str,
        retries: int,
        attempts: list[Attempt] | None = None,
    ) -> None:
        """Waits before a retry, unless the wait would outlast the agent: then the endpoint's failure is
        the cause and the episode is charged to infrastructure, not to the policy's clock."""
        if deadline is not None and time.monotonic() + seconds >= deadline:
            raise PolicyInfraError(
                code,
                f"{why}; the next retry (in {seconds:.1f}s) would pass the agent deadline "
                f"({retries - 1} retries)",
                retries=retries - 1,
            )
        if attempts:
            attempts[-1].wait_s = seconds
        if seconds > 0:
            time.sleep(seconds)

    # --- what the server knows: its window and its tokenizer --- #

    def served_windows(self) -> dict[str, int | None]:
        """Served model ids with their window (vLLM's ``max_model_len`` in ``/v1/models``; None when the
        server does not say, as OpenAI's API does not)."""
        out: dict[str, int | None] = {}
        for m in self._sdk.models.list(timeout=self.timeout).data:
            extra = m.model_extra or {}
            raw = extra.get("max_model_len", extra.get("context_length", extra.get("context_window")))
            out[m.id] = int(raw) if isinstance(raw, int | float) and not isinstance(raw, bool) else None
        return out

    def served_window(self) -> int | None:
        """This model's served window, or None (unknown, or the endpoint could not be asked); asked once
        per client (a batch shares one), since a server's window does not change while it runs."""
        with self._lock:
            if not self._window_known:
                try:
                    self._served_window = self.served_windows().get(self.cfg.served_name)
                    self._window_known = True
                except openai.OpenAIError:
                    return None
            return self._served_window

    def tokenize(self, messages: list[dict[str, str]]) -> int | None:
        """The exact prompt length of ``messages`` with the server's own chat template (vLLM's
        ``POST /tokenize``, which sits at the server root, not under ``/v1``); None when the server has
        no such endpoint or it fails: the caller falls back to an estimate and says so."""
        if self._no_tokenizer:
            return None
        try:
            resp = self._sdk.post(
                f"{server_root(self.cfg.base_url)}/tokenize",
                cast_to=httpx.Response,
                body={
                    "model": self.cfg.served_name,
                    "messages": messages,
                    "add_generation_prompt": True,
                },
                options={"timeout": min(self.timeout, 30.0)},
            )
            count = resp.json().get("count")
        except openai.APIStatusError as e:
            if e.status_code in (404, 405, 501):  # not vLLM: stop asking
                self._no_tokenizer = True
            return None
        except (openai.OpenAIError, ValueError, AttributeError):
            return None
        return int(count) if isinstance(count, int) else None

    # --- endpoint check --- #

    def served_models(self) -> list[str]:
        return list(self.served_windows())

    def check(self) -> CheckReport:
        """Lists the served models (and their windows) and asks for one token; raises
        ``PolicyInfraError`` with a sentence a curator can act on (what is wrong and what to do), never a
        traceback. A window in bandpass.toml that differs from the served one is a warning in the report.
        """
        base = self.cfg.base_url
        try:
            windows = self.served_windows()
        except openai.APIConnectionError as e:
            raise PolicyInfraError("policy_unavailable", explain_connection(base, e)) from None
        except openai.APIStatusError as e:
            raise PolicyInfraError(
                _status_code(e.status_code), self._explain_status(e, "GET /models")
            ) from None
        served = list(windows)
        if not self.cfg.served_name and served:  # --base-url alone: check the first model it serves
            self.cfg = replace(self.cfg, name=served[0], served_name=served[0], model_path=served[0])
        if self.cfg.served_name not in served:
            listing = ", ".join(served) or "no models"
            raise PolicyInfraError(
                "policy_model_not_found",
                f"model {self.cfg.served_name!r} is not served at {base} (it serves: {listing}); "
                "set served_name in bandpass.toml or pass the served name",
            )
        saved, self.max_retries = self.max_retries, 0
        try:
            c = self.complete([{"role": "user", "content": "Say OK."}], max_tokens=1)
        except PolicyInfraError as e:
            raise PolicyInfraError(
                e.code, f"listing models worked but a 1-token completion failed: {e.detail}"
            ) from None
        except (PolicyTimeout, PolicyContextOverflow) as e:
            raise PolicyInfraError("policy_unavailable", f"1-token completion failed: {e}") from None
        finally:
            self.max_retries = saved
        report = CheckReport(
            base_url=base,
            model=self.cfg.served_name,
            served=served,
            latency_s=c.latency_s,
            reply=c.text,
            served_window=windows.get(self.cfg.served_name),
            configured_window=self.cfg.context_window,
            tokenizer=self.tokenize([{"role": "user", "content": "Say OK."}]) is not None,
        )
        warning = window_mismatch_warning(report.configured_window, report.served_window, self.cfg.name)
        if warning:
            report.warnings.append(warning)
        if report.window is None:
            report.warnings.append(
                f"{base} does not report its context window and none is configured: set context_window "
                f"for {self.cfg.name or self.cfg.served_name!r} in bandpass.toml, or history is never trimmed"
            )
        return report

    def _explain_status(self, e: openai.APIStatusError, what: str) -> str:
        msg = _server_message(e)
        base = self.cfg.base_url
        if e.status_code in (401, 403):
            key = "is not set" if not os.environ.get(self.cfg.api_key_env) else "does not match"
            return (
                f"{base} rejected the API key (HTTP {e.status_code}: {msg}); ${self.cfg.api_key_env} {key} "
                "the key the server was started with (vllm serve --api-key)"
            )
        if e.status_code == 404:
            return (
                f"{what} at {base} returned HTTP 404 ({msg}); is the base URL right (it usually ends in /v1)?"
            )
        return f"{what} at {base} returned HTTP {e.status_code}: {msg}"


def _status_code(status: int) -> str:
    if status in (401, 403):
        return "policy_auth"
    if status == 404:
        return "policy_model_not_found"
    return "policy_rejected"


def _connection_reason(e: openai.APIConnectionError) -> str:
    cause: BaseException | None = e.__cause__
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused"
        text = str(cause)
        if "Connection refused" in text or "Errno 111" in text:
            return "connection refused"
        if "Name or service not known" in text or "nodename nor servname" in text:
            return "unknown host"
        cause = cause.__cause__ or cause.__context__
    return str(e) or "connection error"


def explain_connection(base_url: str, e: openai.APIConnectionError) -> str:
    if isinstance(e, openai.APITimeoutError):
        return f"{base_url} did not answer in time; is the server overloaded or still loading the model?"
    why = _connection_reason(e)
    if why == "connection refused":
        return (
            f"cannot connect to {base_url}: connection refused; nothing listens there "
            "(start one with: bandpass policy serve MODEL)"
        )
    return f"cannot connect to {base_url}: {why}"


def resolve_model(config: Config, name: str | None, base_url: str | None) -> PolicyModelConfig:
    """The model a command talks to: from ``bandpass.toml``, with ``--base-url`` overriding the URL, or
    made up from ``--base-url`` alone so an endpoint can be used without any config file."""
    if name and name in config.models:
        cfg = config.models[name]
        return replace(cfg, base_url=base_url) if base_url else cfg
    if base_url:
        return PolicyModelConfig(name=name or "", base_url=base_url)
    if name:
        known = ", ".join(sorted(config.models)) or "none configured"
        raise InvalidInput(
            f"model {name!r} is not in bandpass.toml (models: {known}); "
            "pass --base-url URL to use an endpoint directly"
        )
    if len(config.models) == 1:
        return next(iter(config.models.values()))
    if not config.models:
        raise InvalidInput("no policy model: add [models.NAME] to bandpass.toml or pass --base-url URL")
    raise InvalidInput(f"several models in bandpass.toml ({', '.join(sorted(config.models))}); name one")


def check_endpoint(cfg: PolicyModelConfig, *, timeout: float = 30.0) -> CheckReport:
    """``bandpass policy check`` as a function (``run`` reuses it to fail fast before queueing):
    raises ``PolicyInfraError`` with a one-line ``detail`` when the endpoint does not work."""
    client = PolicyClient(cfg, timeout=timeout, max_retries=0)
    try:
        return client.check()
    finally:
        client.close()


def describe_check(report: CheckReport) -> str:
    """The one line ``policy check`` prints for an endpoint that works."""
    others = [m for m in report.served if m != report.model]
    also = f" (also serves: {', '.join(others)})" if others else ""
    window = (
        f"served window {report.served_window} tokens"
        if report.served_window
        else "served window unknown (the server does not report max_model_len)"
    )
    counts = "exact token counts via /tokenize" if report.tokenizer else "token counts estimated"
    return (
        f"ok: {report.model} at {report.base_url} answered a 1-token request in {report.latency_s:.2f}s; "
        f"{window}; {counts}{also}"
    )
