"""The policy model's endpoint: check it (``bandpass policy check``: list the served models, the window,
ask for one token) and serve it with vLLM (``bandpass policy serve``).

Why here: a check is a use case of its own (``bandpass run`` and the Runs screen run the same check
before planning, through ``engine.app.batches``). Its refusals are one line each: a model that
bandpass.toml cannot resolve is ``InvalidInput``, an endpoint that fails is ``EndpointNotReady`` with the
client's own sentence. The OpenAI client is imported when a check runs (serving vLLM needs none of it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..core.errors import InvalidInput
from ..run.policy.serve import (
    VllmProcess,
    find_vllm,
    missing_vllm_message,
    owns_port,
    port_taken,
    serve_argv,
    wait_for_health,
)
from .errors import EndpointNotReady

if TYPE_CHECKING:
    from ..core.config import Config

__all__ = [
    "EndpointNotReady",
    "PolicyCheck",
    "VllmProcess",
    "check",
    "find_vllm",
    "missing_vllm_message",
    "owns_port",
    "port_taken",
    "serve_argv",
    "wait_for_health",
]


@dataclass(frozen=True)
class PolicyCheck:
    """A working endpoint: the line that says what it serves, and what the check warns about (e.g.
    bandpass.toml's window larger than the served ``max_model_len``)."""

    line: str
    warnings: list[str]


def check(config: Config, model: str | None, base_url: str | None, *, timeout: float = 30.0) -> PolicyCheck:
    """Checks ``model`` (bandpass.toml's, or the served name at ``base_url``). Raises ``InvalidInput``
    (the model does not resolve) or ``EndpointNotReady`` (the endpoint failed), each with one line."""
    from ..run.policy.client import (
        PolicyInfraError,
        check_endpoint,
        describe_check,
        resolve_model,
    )

    try:
        cfg = resolve_model(config, model, base_url)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    try:
        report = check_endpoint(cfg, timeout=timeout)
    except PolicyInfraError as exc:
        raise EndpointNotReady(exc.detail) from None
    return PolicyCheck(describe_check(report), list(report.warnings))
