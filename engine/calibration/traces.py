"""Traces out: episodes as chat trajectories for SFT, filtering and reward modelling.

Harbor's ``traces export`` gives trajectories but no way to tell a policy failure from an infrastructure
failure; a trainer fine-tuning on "failures" would learn from crashed containers. Every row here carries
the columns to mask with: ``outcome``, ``reward`` (the reward the episode counts for: an agent error's is
0 even when its verifier paid out — a forged 1 after ``verifier_tamper`` is never a success — and an infra
error's is null; the verifier's own is ``verifier_reward``, evidence; ``rewards`` is every key of its
reward.json, the reward's dimensions), ``infra_ok`` (False: an infra error,
no valid reward — never a negative example), ``blocking_tags`` (uncleared invalidity/misalignment tags
on the task version: the task itself is suspect) and ``task_exported`` (the task passed every export
gate).

Turns are rebuilt from the stored steps exactly as the policy saw them: the system prompt and the first
user message from the episode's prompt version (``engine/prompts/policy``), then per step the assistant's
raw reply and the next observation as the user turn (``step``, ``parse_error`` or ``confirm`` template,
chosen from what the previous action was). Imported Harbor episodes (ATIF trajectories) have no Bandpass
prompt: their turns are the instruction, then reply / tool output pairs.

Rows are ordered by task then episode id and written with the export's pinned Parquet options, so the
same database gives byte-identical files.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from collections.abc import Set as AbstractSet
from typing import Any

import pyarrow as pa

from ...store.models import pk
from ...store.queries import TraceSource, episode_rewards
from ..core import outcomes
from ..core.errors import InvalidInput
from ..run.policy.context import PromptTemplates

FILTERS = ("all", "success", "failure")
DEFAULT_PROMPT_VERSION = "terminus-v1"

TRACE_SCHEMA = pa.schema(
    [
        ("episode_id", pa.int64()),
        ("task", pa.string()),
        ("version_hash", pa.string()),
        ("model", pa.string()),
        ("attempt", pa.int64()),
        ("outcome", pa.string()),
        ("reward", pa.float64()),
        ("verifier_reward", pa.float64()),
        # every key of the verifier's reward.json (Harbor's rewards): reward dimensions, in file order
        ("rewards", pa.list_(pa.struct([("name", pa.string()), ("value", pa.float64())]))),
        ("infra_ok", pa.bool_()),
        ("blocking_tags", pa.list_(pa.string())),
        ("episode_tags", pa.list_(pa.string())),
        ("task_exported", pa.bool_()),
        ("source", pa.string()),
        ("steps", pa.int64()),
        ("messages", pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))),
    ]
)


def keep(outcome: str, how: str) -> bool:
    """``success``: passed. ``failure``: everything else (infra errors included, flagged ``infra_ok``
    False so a trainer masks them). ``all``: every finished episode."""
    if how == "success":
        return outcome == outcomes.PASSED
    if how == "failure":
        return outcome != outcomes.PASSED
    return True


def _action(step_action_json: str) -> dict[str, Any]:
    try:
        value = json.loads(step_action_json or "{}")
    except json.JSONDecodeError:
        return {}
    return value if isinstance(value, dict) else {}


def messages_for(src: TraceSource, prompts: PromptTemplates) -> list[dict[str, str]]:
    """The conversation of one episode (see the module docstring)."""
    steps = src.steps
    if src.episode.source:  # imported (Harbor): no Bandpass prompt was involved
        msgs = [{"role": "user", "content": src.instruction.strip()}]
        for st in steps:
            msgs.append({"role": "assistant", "content": st.raw_reply})
            if st.observation:
                msgs.append({"role": "user", "content": st.observation})
        return msgs
    first_obs = steps[0].observation if steps else ""
    msgs = [
        {"role": "system", "content": prompts.render("system")},
        {
            "role": "user",
            "content": prompts.render("first", instruction=src.instruction.strip(), observation=first_obs),
        },
    ]
    for i, st in enumerate(steps):
        if not st.raw_reply:  # the step ended before the policy answered (timeout, overflow, infra)
            break
        msgs.append({"role": "assistant", "content": st.raw_reply})
        if i + 1 < len(steps):
            nxt = steps[i + 1]
            act = _action(st.action_json)
            if "parse_error" in act:
                content = prompts.render(
                    "parse_error", error=str(act.get("parse_error")), observation=nxt.observation
                )
            elif act.get("task_complete"):
                content = prompts.render("confirm", observation=nxt.observation)
            else:
                content = prompts.render("step", notes="", observation=nxt.observation)
            msgs.append({"role": "user", "content": content})
    return msgs


def trace_rows(
    sources: Iterable[TraceSource],
    how: str,
    exported: set[str],
    excluded_tasks: AbstractSet[str] = frozenset(),
    prompt_version: str = DEFAULT_PROMPT_VERSION,
) -> list[dict[str, Any]]:
    """Rows for the episodes ``how`` keeps; tasks in ``excluded_tasks`` (decontaminated) are left out."""
    if how not in FILTERS:
        raise InvalidInput(f"--filter: expected one of {', '.join(FILTERS)}, got {how!r}")
    prompts = PromptTemplates(prompt_version)
    rows = []
    for src in sources:
        ep = src.episode
        if src.task in excluded_tasks or not keep(ep.outcome, how):
            continue
        rows.append(
            {
                "episode_id": pk(ep),
                "task": src.task,
                "version_hash": src.version_hash,
                "model": ep.agent,
                "attempt": ep.attempt,
                "outcome": ep.outcome,
                "reward": outcomes.counted_reward(ep.outcome, ep.reward),
                "verifier_reward": ep.reward,
                "rewards": [{"name": k, "value": v} for k, v in episode_rewards(ep).items()],
                "infra_ok": not outcomes.is_infra(ep.outcome),
                "blocking_tags": src.blocking_tags,
                "episode_tags": src.episode_tags,
                "task_exported": src.task in exported,
                "source": ep.source,
                "steps": len(src.steps),
                "messages": messages_for(src, prompts),
            }
        )
    return rows
