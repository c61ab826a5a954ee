"""Traces out in Harbor's own schema (``export --format traces --traces-schema harbor``).

A trainer that reads Harbor's ``harbor traces export`` output reads these rows unchanged: the same columns
in the same order (``conversations``, ``agent``, ``model``, ``model_provider``, ``date``, ``task``,
``episode``, ``run_id``, ``trial_name``, ``result``), one row per episode, built as Harbor 0.25's
``harbor/utils/traces_utils.py`` builds its ``--episodes last`` row:

- ``conversations``: the trajectory up to its last agent step — system and user steps as role ``user``
  (tool definitions embedded ``<tools>…</tools>`` in the first), each agent step as ``assistant``
  (``<think>reasoning</think>``, the message, each tool call as ``<tool_call>{name, arguments}</tool_call>``),
  each observation but the last as ``user``. An imported Harbor trial is converted from its own ATIF
  trajectory (kept at import); an episode Bandpass ran, from what its policy saw (its prompt version's
  system prompt and first message, each reply, each next observation).
- ``result``: Harbor's semantics — the exception type when the trial has one, else the reward as text
  (``"1.0"``), else null; ``--filter success`` keeps ``float(result) > 0``. A Bandpass outcome maps to the
  Harbor exception of the same meaning where there is one (``agent_error:agent_timeout`` →
  ``AgentTimeoutError``, ``infra_error:image_build_failed`` → ``SandboxBuildFailedError``…), else to a
  ``Bandpass<Code>Error`` name: a tampered episode (``BandpassVerifierTamperError``, its forged reward 1
  notwithstanding) or an infra error is never a float, so never a success.

An episode with no agent step yields no row, as a Harbor trial without one does.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa

from ...store.queries import TraceSource
from ..core import outcomes
from ..run.policy.context import PromptTemplates

__all__ = ["HARBOR_TRACE_SCHEMA", "harbor_result", "harbor_rows", "is_success"]

HARBOR_TRACE_SCHEMA = pa.schema(
    [
        ("conversations", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
        ("agent", pa.string()),
        ("model", pa.string()),
        ("model_provider", pa.string()),
        ("date", pa.string()),
        ("task", pa.string()),
        ("episode", pa.string()),
        ("run_id", pa.string()),
        ("trial_name", pa.string()),
        ("result", pa.string()),
    ]
)

#: Bandpass outcome codes with a Harbor exception of the same meaning.
_HARBOR_NAMES = {
    "agent_error:agent_timeout": "AgentTimeoutError",
    "agent_error:context_overflow": "ContextLengthExceededError",
    "agent_error:output_limit": "OutputTokenExceededError",
    "agent_error:refused": "AgentSafetyRefusalError",
    "agent_error:agent_crashed": "NonZeroAgentExitCodeError",
    "infra_error:agent_crashed": "NonZeroAgentExitCodeError",
    "infra_error:image_build_failed": "SandboxBuildFailedError",
    "infra_error:env_start_timeout": "EnvironmentStartTimeoutError",
    "infra_error:verifier_timeout": "VerifierTimeoutError",
    "infra_error:reward_missing": "RewardFileNotFoundError",
    "infra_error:rate_limited": "ApiRateLimitError",
    "infra_error:policy_auth": "AgentAuthenticationError",
    "infra_error:policy_model_not_found": "ModelNotFoundError",
    "infra_error:cancelled": "CancelledError",
}


def harbor_result(outcome: str, reward: float | None) -> str | None:
    """Harbor's ``result`` for a Bandpass episode: an exception name for every error outcome."""
    if outcomes.is_infra(outcome) or outcomes.is_agent_error(outcome):
        if outcome in _HARBOR_NAMES:
            return _HARBOR_NAMES[outcome]
        code = outcomes.code_of(outcome)
        if code[:1].isupper():  # an imported unknown Harbor exception kept as infra_error:<Type>
            return code
        return "Bandpass" + "".join(w.capitalize() for w in code.split("_")) + "Error"
    return str(float(reward)) if reward is not None else None


def is_success(result: str | None) -> bool:
    """Harbor's ``--filter success``: the result reads as a number above 0."""
    try:
        return result is not None and float(result) > 0.0
    except ValueError:
        return False


def _content(value: Any) -> str:
    """Harbor's ``normalize_message_content``: text parts of a list joined, anything else as text."""
    if isinstance(value, str):
        return value
    if isinstance(value, list):
        return "\n".join(
            p.get("text", "") if isinstance(p, dict) else str(p) for p in value if not isinstance(p, dict) or
            p.get("type", "text") == "text"
        )  # fmt: skip
    return "" if value is None else str(value)


def conversation(steps: list[dict[str, Any]], tool_definitions: Any = None) -> list[dict[str, str]]:
    """The ``--episodes last`` conversation of ATIF ``steps`` (Harbor's ``_extract_single_episode_
    conversation`` over the steps up to the last agent step that is not copied context)."""
    agent_idx = [
        i for i, st in enumerate(steps) if st.get("source") == "agent" and not st.get("is_copied_context")
    ]
    if not agent_idx:
        return []
    steps = steps[: agent_idx[-1] + 1]
    last_agent = max(i for i, st in enumerate(steps) if st.get("source") == "agent")
    out: list[dict[str, str]] = []
    tools_added = False
    for i, st in enumerate(steps):
        source, message = st.get("source"), st.get("message", "")
        if source == "system":
            content = message
            if tool_definitions and not tools_added:
                tools = json.dumps(tool_definitions, ensure_ascii=False, indent=2)
                content, tools_added = f"<tools>\n{tools}\n</tools>\n\n{message}", True
            out.append({"role": "user", "content": content})
        elif source == "user":
            out.append({"role": "user", "content": message})
        elif source == "agent":
            parts = []
            if st.get("reasoning_content"):
                parts.append(f"<think>{st['reasoning_content']}</think>")
            if message:
                if "</think>" in message and "<think>" not in message:
                    message = "<think>" + message
                parts.append(message)
            for call in st.get("tool_calls") or []:
                obj = {"name": call.get("function_name"), "arguments": call.get("arguments", {})}
                parts.append(f"<tool_call>\n{json.dumps(obj, ensure_ascii=False)}\n</tool_call>")
            out.append({"role": "assistant", "content": "\n".join(parts)})
            if i != last_agent:
                results = (st.get("observation") or {}).get("results") or []
                texts = [_content(r["content"]) for r in results if isinstance(r, dict) and "content" in r]
                if texts:
                    out.append({"role": "user", "content": "\n".join(texts)})
    return out


def _native_steps(src: TraceSource, prompts: PromptTemplates) -> list[dict[str, Any]]:
    """An episode Bandpass ran, as ATIF steps: what its policy saw (engine/calibration/traces.py)."""
    from .traces import messages_for

    msgs = messages_for(src, prompts)
    steps: list[dict[str, Any]] = []
    for m in msgs:
        if m["role"] == "assistant":
            steps.append({"source": "agent", "message": m["content"]})
        elif steps and steps[-1]["source"] == "agent":
            steps[-1]["observation"] = {"results": [{"content": m["content"]}]}
        else:
            steps.append({"source": "system" if m["role"] == "system" else "user", "message": m["content"]})
    return steps


Trajectory = tuple[list[dict[str, Any]], Any, str | None, str | None]


def _imported_trajectories(ws_root: Path, harbor: dict[str, Any]) -> list[Trajectory]:
    """The kept ATIF trajectories of an imported trial, in order: (steps, tool definitions, model name,
    agent name) — Harbor numbers episodes across a trajectory and its continuations."""
    out: list[Trajectory] = []
    for rel in harbor.get("trajectories") or []:
        try:
            data = json.loads((ws_root / rel).read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        agent = data.get("agent") if isinstance(data.get("agent"), dict) else {}
        steps = [s for s in data.get("steps", []) if isinstance(s, dict)]
        out.append((steps, agent.get("tool_definitions"), agent.get("model_name"), agent.get("name")))
    return out


def harbor_rows(
    ws_root: Path,
    sources: list[TraceSource],
    how: str,
    excluded_tasks: set[str],
    prompt_version: str,
) -> list[dict[str, Any]]:
    """One Harbor-schema row per episode ``how`` keeps (all | success | failure, Harbor's rule)."""
    prompts = PromptTemplates(prompt_version)
    rows: list[dict[str, Any]] = []
    for src in sources:
        ep = src.episode
        if src.task in excluded_tasks:
            continue
        imported = json.loads(ep.imported_json or "{}").get("harbor") if ep.imported_json else None
        if imported:
            convs: list[dict[str, str]] = []
            n_episodes, model, agent = 0, imported["model"], imported["agent"]
            for steps, tools, traj_model, traj_agent in _imported_trajectories(ws_root, imported):
                n = sum(1 for s in steps if s.get("source") == "agent" and not s.get("is_copied_context"))
                if n:
                    convs = conversation(steps, tools)
                    n_episodes += n
                    model, agent = traj_model or imported["model"], traj_agent or imported["agent"]
            row = {
                "conversations": convs,
                "agent": agent,
                "model": model,
                "model_provider": imported["model_provider"],
                "date": imported["date"],
                "task": imported["task"],
                "episode": f"episode-{n_episodes - 1}",
                "run_id": imported["run_id"],
                "trial_name": imported["trial_name"],
                "result": imported["result"],
            }
        else:
            steps = _native_steps(src, prompts)
            n = sum(1 for s in steps if s["source"] == "agent")
            row = {
                "conversations": conversation(steps),
                "agent": "bandpass",
                "model": ep.agent,
                "model_provider": "openai-compatible",
                "date": ep.started_at.isoformat() if ep.started_at else "",
                "task": src.task,
                "episode": f"episode-{n - 1}",
                "run_id": ep.batch_id or "bandpass",
                "trial_name": f"{src.task.rsplit('/', 1)[-1][:32]}__{ep.id}",
                "result": harbor_result(ep.outcome, ep.reward),
            }
        if not row["conversations"]:
            continue  # no agent step: Harbor exports no row for such a trial
        success = is_success(row["result"])
        if (how == "success" and not success) or (how == "failure" and success):
            continue
        rows.append(row)
    return rows
