"""The episode as a reviewer reads it: one function builds it from stored data only.

Why one function: the prompt, the quote check and the tests must agree on what "the stored record" is.
:func:`build_episode_context` returns both the excerpted text the model is shown (sections in a fixed
order) and the *full* per-source records each citation is checked against, so a quote taken from a part
the excerpt shortened is still found, and a quote that exists nowhere is caught.

Two sections come from other features and are optional, with clearly named hooks:

* ``diagnosis`` — the deterministic diagnosis (issue #15). Passed in by the caller, else read from a
  stored diagnosis table when one exists (:func:`diagnosis_section`).
* ``end_state`` — end-state changes and guard findings (issue #14). Passed in by the caller, else
  :func:`end_state_section`, which has no source yet and returns None.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.models import Episode, Step
from ...store.queries import reviews as rq
from ..core.errors import InvalidInput
from ..core.workspace import Workspace
from .tagging import failing_tests

_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)|\x1b[@-Z\\-_]")
_CTRL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")
_WS = re.compile(r"\s+")


def clean(raw: str) -> str:
    """Terminal bytes as readable text: escape sequences and control characters removed, CRLF -> LF."""
    return _CTRL.sub("", _ANSI.sub("", raw.replace("\r\n", "\n").replace("\r", "\n")))


def normalise(s: str) -> str:
    """What quote matching compares: cleaned text with every run of whitespace as one space."""
    return _WS.sub(" ", clean(s)).strip()


@dataclass(frozen=True)
class ContextLimits:
    max_steps: int = 40
    analysis_chars: int = 600
    observation_chars: int = 1200
    verifier_tail_chars: int = 4000
    instruction_chars: int = 6000


@dataclass
class EpisodeContext:
    episode_id: int
    task: str
    version_hash: str
    agent: str
    outcome: str
    reward: float | None
    step_count: int
    sections: list[tuple[str, str]] = field(default_factory=list)  # (title, text), in prompt order
    #: Full stored text per citation source: "instruction", "verifier", "outcome", and "step:N".
    records: dict[str, str] = field(default_factory=dict)

    def render(self) -> str:
        return "\n\n".join(f"=== {title} ===\n{body}" for title, body in self.sections)

    def section(self, title: str) -> str | None:
        return next((body for t, body in self.sections if t == title), None)


def _head(s: str, n: int) -> str:
    return s if len(s) <= n else s[:n] + f"\n[… {len(s) - n} chars cut]"


def _tail(s: str, n: int) -> str:
    return s if len(s) <= n else f"[… {len(s) - n} chars cut]\n" + s[-n:]


def _action(step: Step) -> dict[str, Any]:
    try:
        action = json.loads(step.action_json or "{}")
    except json.JSONDecodeError:
        return {}
    return action if isinstance(action, dict) else {}


def _keystrokes(action: dict[str, Any]) -> list[str]:
    out = []
    for c in action.get("commands") or []:
        if isinstance(c, dict) and isinstance(c.get("keystrokes"), str):
            out.append(c["keystrokes"])
    return out


def step_record(step: Step) -> str:
    """Everything stored for a step that a quote may come from."""
    action = _action(step)
    parts = [
        str(action.get("analysis", "")),
        str(action.get("plan", "")),
        *_keystrokes(action),
        step.observation,
        step.raw_reply,
    ]
    return "\n".join(clean(p) for p in parts if p)


def _step_text(step: Step, limits: ContextLimits) -> str:
    action = _action(step)
    lines = [f"--- step {step.index} ---"]
    if step.observation:  # stored per step: what the policy was shown *before* acting at this step
        lines.append("screen and output the policy was shown before this step (tail):")
        lines.append(_tail(clean(step.observation), limits.observation_chars))
    try:
        cuts = json.loads(step.cuts_json or "[]")
    except json.JSONDecodeError:
        cuts = []
    if cuts:
        lines.append("harness cuts: " + json.dumps(cuts)[:300])
    if action.get("analysis"):
        lines.append("analysis: " + _head(clean(str(action["analysis"])), limits.analysis_chars))
    if action.get("plan"):
        lines.append("plan: " + _head(clean(str(action["plan"])), limits.analysis_chars))
    for k in _keystrokes(action):
        lines.append("keystrokes: " + json.dumps(k)[:400])
    if action.get("task_complete"):
        lines.append("task_complete: true")
    if not action and step.raw_reply:
        lines.append("unparsed reply: " + _head(clean(step.raw_reply), limits.analysis_chars))
    return "\n".join(lines)


def diagnosis_section(s: Any, episode_id: int) -> str | None:
    """HOOK (issue #15): the deterministic diagnosis as text. Reads a stored diagnosis row when the
    workspace has a diagnosis table; the diagnosis feature may replace this with its own renderer."""
    row = rq.stored_diagnosis(s, episode_id)
    if row is None:
        return None
    if "evidence_json" in row:  # issue 15's table: rendered as the curator reads it
        import json

        lines = [f"code: {row['code']}", f"confidence: {row['confidence']:.2f}", f"summary: {row['summary']}"]
        if row.get("tag"):
            lines.insert(1, f"suggested tag: {row['tag']}")
        for e in json.loads(row["evidence_json"] or "[]"):
            where = f"[step {e['step']} @ {e['time']:.1f}s] " if e.get("step") is not None else ""
            quote = f" | {e['quote']}" if e.get("quote") else ""
            lines.append(f"evidence: {where}{e['what']}{quote}")
        for c in json.loads(row.get("checks_json") or "[]"):
            lines.append(f"failing check: {c['name']}" + (f" — {c['message']}" if c.get("message") else ""))
        return "\n".join(lines)
    skip = {"id", "episode_id", "created_at"}
    return "\n".join(f"{k}: {v}" for k, v in row.items() if k not in skip and v not in (None, ""))


def end_state_section(s: Any, episode_id: int) -> str | None:  # hook signature
    """HOOK (issue #14): end-state changes and guard findings as text. No source exists yet."""
    return None


def build_episode_context(
    ws: Workspace,
    episode_id: int,
    *,
    limits: ContextLimits | None = None,
    diagnosis: str | None = None,
    end_state: str | None = None,
) -> EpisodeContext:
    """The reviewer's view of one finished episode, from the store alone (no Docker, no recordings).

    Sections, in order: TASK INSTRUCTION, OUTCOME, STEPS, VERIFIER, then the optional DIAGNOSIS
    (deterministic) and END STATE AND GUARD FINDINGS when a caller passes them or their hook finds them.
    """
    limits = limits or ContextLimits()
    with session(ws.engine) as s:
        ep: Episode | None = queries.get_episode(s, episode_id)
        if ep is None:
            raise InvalidInput(f"episode {episode_id} does not exist")
        if ep.status != "done":
            raise InvalidInput(f"episode {episode_id} has not finished (status {ep.status})")
        tv = queries.get_version(s, ep.task_version_id)
        task = queries.episode_task_name(s, episode_id)
        steps = queries.steps(s, episode_id)
        if diagnosis is None:
            diagnosis = diagnosis_section(s, episode_id)
        if end_state is None:
            end_state = end_state_section(s, episode_id)
        s.expunge_all()
    instruction = tv.instruction if tv is not None else ""
    ctx = EpisodeContext(
        episode_id=episode_id,
        task=task,
        version_hash=tv.hash if tv is not None else "",
        agent=ep.agent,
        outcome=ep.outcome,
        reward=ep.reward,
        step_count=len(steps),
    )
    ctx.sections.append(("TASK INSTRUCTION", _head(instruction.strip(), limits.instruction_chars)))
    outcome_lines = [
        f"task: {task} (version {ctx.version_hash[:12]})",
        f"agent: {ep.agent}",
        f"outcome: {ep.outcome}",
        f"reward: {ep.reward if ep.reward is not None else 'none'}",
        f"steps: {len(steps)}",
    ]
    if ep.retries:
        outcome_lines.append(f"infra retries: {ep.retries}")
    if ep.error:
        outcome_lines.append("detail: " + _head(clean(ep.error), 1500))
    ctx.sections.append(("OUTCOME", "\n".join(outcome_lines)))

    shown = steps
    note = ""
    if len(steps) > limits.max_steps:
        half = limits.max_steps // 2
        shown = steps[:half] + steps[-(limits.max_steps - half) :]
        note = f"[{len(steps) - len(shown)} middle steps omitted; steps {half}..{len(steps) - half - 1}]\n"
    body = note + "\n".join(_step_text(st, limits) for st in shown) if steps else "(no policy steps)"
    ctx.sections.append(("STEPS", body))

    output = clean(ep.verifier_output or "")
    failing = failing_tests(output)
    verifier = [f"failing checks: {', '.join(failing) if failing else '(none parsed)'}"]
    verifier.append("output tail:")
    verifier.append(_tail(output.strip(), limits.verifier_tail_chars) if output.strip() else "(no output)")
    ctx.sections.append(("VERIFIER", "\n".join(verifier)))

    if diagnosis:
        ctx.sections.append(("DIAGNOSIS (deterministic, no model)", diagnosis.strip()))
    if end_state:
        ctx.sections.append(("END STATE AND GUARD FINDINGS", end_state.strip()))

    ctx.records["instruction"] = clean(instruction)
    ctx.records["verifier"] = output
    ctx.records["outcome"] = clean(
        "\n".join(outcome_lines[:-1] if ep.error else outcome_lines) + "\n" + ep.error
    )
    for st in steps:
        ctx.records[f"step:{st.index}"] = step_record(st)
    return ctx
