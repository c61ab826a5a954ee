"""``bandpass generate --check``: can this endpoint serve the meta-agent? Asked before a long batch.

One streamed request of one output token, with one tool offered — the same path every turn takes — proves
the endpoint answers, the key is accepted, the model is served, tools are accepted and the stream ends
with a stop reason. When the request fails, the failure is explained the way a curator needs it: which
of those steps failed and what usually fixes it (a server started without tool-call flags, a base URL
ending in ``/v1``, a model name the server does not serve). A refusal of tools is confirmed by asking
once more without them, so "the server refuses tool use" is a finding, not a guess.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

import anthropic

from ..core.workspace import Workspace
from ..llm.client import (
    ApiFailure,
    MetaClient,
    RetryPolicy,
)
from ..llm.pricing import PriceTable

PING_TOOL = {
    "name": "ping",
    "description": "Answers pong. Used only to check that the server accepts tools.",
    "input_schema": {"type": "object", "properties": {}, "additionalProperties": False},
}
PING_MESSAGES = [{"role": "user", "content": [{"type": "text", "text": "Say ok."}]}]


@dataclass
class CheckStep:
    name: str  # endpoint | auth | model | tools | stream | price
    ok: bool | None  # None: not reached because an earlier step failed
    detail: str = ""


@dataclass
class CheckReport:
    url: str
    model: str
    steps: list[CheckStep] = field(default_factory=list)
    hint: str = ""  # what usually fixes the failure
    error: str = ""  # the one failure line (what, URL, the server's message)
    served_models: list[str] = field(default_factory=list)
    latency_s: float = 0.0

    @property
    def ok(self) -> bool:
        return all(s.ok is not False for s in self.steps if s.name != "price") and not self.error

    def as_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "url": self.url,
            "model": self.model,
            "steps": [s.__dict__ for s in self.steps],
            "error": self.error,
            "hint": self.hint,
            "served_models": self.served_models,
            "latency_s": self.latency_s,
        }


_ORDER = ("endpoint", "auth", "model", "tools", "stream")


def _steps(report: CheckReport, failed: str | None, detail: str = "") -> None:
    """Marks the steps before ``failed`` passed, ``failed`` failed and the rest not reached."""
    reached = True
    for name in _ORDER:
        if name == failed:
            report.steps.append(CheckStep(name, False, detail))
            reached = False
        else:
            report.steps.append(CheckStep(name, True if reached else None))


def check_generator(
    ws: Workspace, model: str, *, api_key: str, base_url: str | None, timeout_s: float = 30.0
) -> CheckReport:
    """Runs the check; never raises for what the server does."""
    client = MetaClient(
        model,
        api_key=api_key,
        base_url=base_url,
        timeout_s=timeout_s,
        retry=RetryPolicy(max_retries=0),
        max_tokens=1,
    )
    report = CheckReport(url=client.messages_url, model=model)
    try:
        started = time.monotonic()
        try:
            reply = client.turn(system=[], tools=[PING_TOOL], messages=PING_MESSAGES)
        except ApiFailure as exc:
            report.error = exc.detail
            _explain(client, report, exc)
        else:
            report.latency_s = round(time.monotonic() - started, 3)
            _steps(report, None)
            report.steps[-1].detail = (
                f"stop_reason {reply.stop_reason}, message {reply.message_id or '(no id)'}, "
                f"{reply.usage.tokens_in} in / {reply.usage.output_tokens} out, {report.latency_s:.2f}s"
            )
    finally:
        client.close()
    try:
        price = PriceTable(ws.root).price(model)
        report.steps.append(CheckStep("price", True, f"${price.input}/${price.output} per MTok in/out"))
    except Exception as exc:  # noqa: BLE001 - a missing price is only a warning here
        report.steps.append(CheckStep("price", False, str(exc)))
    return report


def _explain(client: MetaClient, report: CheckReport, exc: ApiFailure) -> None:
    """Which step failed, and the usual fix."""
    cause = exc.__cause__
    status = getattr(cause, "status_code", None)
    message = report.error
    if status is None:
        if exc.code == "infra.generator_incomplete_stream":
            _steps(report, "stream", message)
            report.hint = "the server ended the stream without a stop reason: check its logs and version"
            return
        _steps(report, "endpoint", message)
        if "refused" in message.lower() or "connect" in message.lower():
            report.hint = (
                "nothing answers there: is the server running, and are ANTHROPIC_BASE_URL / [generator] "
                "base_url host and port right?"
            )
        else:
            report.hint = "the server did not answer in time or broke the connection: check it is healthy"
        return
    if status in (401, 403):
        _steps(report, "auth", message)
        report.hint = "the server refused the key: check the variable [generator] api_key_env names"
        return
    if status == 404:
        served = _served_models(client)
        report.served_models = served
        if report.model in message or "model" in message.lower():
            _steps(report, "model", message)
            report.hint = f"the server does not serve {report.model!r}" + (
                f"; it serves: {', '.join(served)}" if served else ""
            )
        else:
            _steps(report, "endpoint", message)
            report.hint = (
                f"no Messages API at {report.url}: the base URL is the server's root, without /v1 "
                "(the SDK appends /v1/messages)"
            )
        return
    if status == 400:
        # Does the server refuse tools, or the request as such? Ask again without them.
        try:
            client.turn(system=[], tools=[], messages=PING_MESSAGES)
        except ApiFailure:
            _steps(report, "model", message)
            report.hint = "the server refuses even a plain one-token request: read its message above"
            return
        _steps(report, "tools", message)
        report.hint = (
            "the server answers without tools but refuses tool use, which the meta-agent needs; for vLLM "
            "start it with --enable-auto-tool-choice --tool-call-parser <parser for the model>"
        )
        return
    if status == 429 or status == 529 or status >= 500:
        _steps(report, "model", message)
        report.hint = "the server is reachable but overloaded or rate limited now; a batch would retry"
        return
    _steps(report, "model", message)


def _served_models(client: MetaClient) -> list[str]:
    """The models the server lists (``GET /v1/models``), or [] when it cannot say."""
    try:
        page = client._client.models.list(limit=100)  # the SDK client this check owns
        return sorted(m.id for m in page.data)
    except (anthropic.APIError, ValueError, TypeError):
        return []
