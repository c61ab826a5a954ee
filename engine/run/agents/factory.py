"""The agent a batch row describes, rebuilt anywhere (the head, ``--resume``, a Ray worker).

A batch remembers its agent as data (kind, name, endpoint, parameters) rather than as an object, so any
process that can read the row can run the batch's episodes with the same agent.
"""

from __future__ import annotations

import json
from collections.abc import Callable

from ....store.models import Batch
from ...core.errors import BandpassError
from ...core.workspace import Workspace
from .base import Agent

#: Agent parameters a model batch remembers (so ``--resume`` runs the same agent).
DEFAULT_MAX_STEPS = 20
DEFAULT_REQUEST_TIMEOUT_S = 120.0


class AgentConfigError(BandpassError, ValueError):
    """The batch's agent cannot be rebuilt (unknown built-in, unknown model); the message is one line."""


def batch_agent_factory(ws: Workspace, batch: Batch) -> tuple[Callable[[], Agent], Callable[[], None]]:
    """Rebuilds the batch's agent from what the batch row remembers; returns (factory, close).

    Policy agents share one HTTP client (connection pool, thread-safe) but each try gets a fresh agent:
    an agent carries per-episode state (its learned chars-per-token ratio, its message history).
    """
    params = json.loads(batch.params_json or "{}")
    if batch.kind == "builtin":
        from .builtin import BUILTIN

        cls = BUILTIN.get(batch.agent)
        if cls is None:
            raise AgentConfigError(f"batch {batch.id}: unknown built-in agent {batch.agent!r}")
        return cls, lambda: None

    from ..policy.client import PolicyClient, resolve_model
    from .policy import PolicyAgent

    try:
        cfg = resolve_model(ws.config, batch.agent, batch.base_url or None)
    except ValueError as exc:
        raise AgentConfigError(str(exc)) from None
    client_kw = {k: params[k] for k in ("max_retries", "backoff_base", "backoff_max") if k in params}
    client = PolicyClient(
        cfg, timeout=float(params.get("request_timeout", DEFAULT_REQUEST_TIMEOUT_S)), **client_kw
    )
    agent_kw = {
        k: params[k] for k in ("max_parse_errors", "observation_bytes", "prompt_version") if k in params
    }
    max_steps = int(params.get("max_steps", DEFAULT_MAX_STEPS))

    def factory() -> Agent:
        return PolicyAgent(client, max_steps=max_steps, **agent_kw)

    return factory, client.close
