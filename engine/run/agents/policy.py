"""The policy agent: a model behind an OpenAI-compatible endpoint, driving the terminal step by step.

One step is one policy call: build the observation, trim the history, ask, parse, type. Each way an
episode can end on the harness side has its own code, because the point of Bandpass is telling a policy
that failed the task from a scaffold that failed the policy (DESIGN.md, "harness brittleness"):
``parse_error``, ``turn_limit``, ``context_overflow``, ``agent_timeout`` are agent errors; a rate-limited
or unreachable endpoint is an infra error and never counts against the model.

Everything the policy was shown and everything it said is put on the step, including each cut (of the
observation, of the history, of a reply stopped by ``max_tokens``), so a curator replaying the episode can
see the failure was the harness's.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from engine.run.agents.base import AgentContext, AgentResult, StepRecord
from engine.run.policy.client import (
    Completion,
    PolicyClient,
    PolicyContextOverflow,
    PolicyInfraError,
    PolicyTimeout,
)
from engine.run.policy.context import (
    DEFAULT_CHARS_PER_TOKEN,
    ContextOverflow,
    PromptTemplates,
    build_observation,
    trim_history,
)
from engine.run.policy.protocol import Action, ActionParseError, parse_action
from engine.sandbox.keys import translate_keys

DEFAULT_OBSERVATION_BYTES = 16_000
#: Bounds on the learned characters-per-token ratio: one odd usage report must not make trimming absurd.
_CPT_RANGE = (1.5, 8.0)


@dataclass
class _Turn:
    """What the next user message must carry: the observation, and why it is being asked."""

    kind: str = "step"  # "step" | "parse_error" | "confirm"
    error: str = ""
    notes: list[str] = field(default_factory=list)


class PolicyAgent:
    name = "policy"

    def __init__(
        self,
        client: PolicyClient,
        *,
        max_steps: int = 20,
        max_parse_errors: int = 3,
        observation_bytes: int = DEFAULT_OBSERVATION_BYTES,
        prompt_version: str = "terminus-v1",
        quiescence: float = 2.0,
    ) -> None:
        self.client = client
        self.max_steps = max_steps
        self.max_parse_errors = max_parse_errors
        self.observation_bytes = observation_bytes
        self.prompts = PromptTemplates(prompt_version)
        self.prompt_version = prompt_version
        self.quiescence = quiescence
        self.name = f"policy:{client.cfg.name or client.cfg.served_name}"
        self._chars_per_token = DEFAULT_CHARS_PER_TOKEN

    # --- the loop --- #

    def run(self, ctx: AgentContext) -> AgentResult:
        term = ctx.terminal
        cfg = self.client.cfg
        obs = build_observation(term.screen_text(), "", self.observation_bytes)
        messages: list[dict[str, str]] = [
            {"role": "system", "content": self.prompts.render("system")},
            {
                "role": "user",
                "content": self.prompts.render(
                    "first", instruction=ctx.task.instruction.strip(), observation=obs.text
                ),
            },
        ]
        parse_failures = 0
        awaiting_confirmation = False
        for index in range(self.max_steps):  # 0-based, like the builtin agents' step markers
            if ctx.time_left() <= 0:
                return AgentResult(
                    error_code="agent_timeout", detail=f"agent deadline passed before step {index}"
                )
            step = StepRecord(index=index, marker_time=ctx.begin_step(index), observation=obs.text)
            step.cuts.extend(obs.cuts)
            try:
                prompt, history_cuts = trim_history(
                    messages,
                    context_window=cfg.context_window,
                    max_tokens=cfg.max_tokens,
                    chars_per_token=self._chars_per_token,
                )
            except ContextOverflow as e:
                step.cuts.append(e.cut)
                step.action = {"error": "context_overflow"}
                ctx.record_step(step)
                return AgentResult(error_code="context_overflow", detail=f"step {index}: {e.detail}")
            step.cuts.extend(history_cuts)

            try:
                reply = self.client.complete(prompt, deadline=ctx.deadline)
            except PolicyTimeout as e:
                step.action = {"error": "agent_timeout", "retries": e.retries}
                ctx.record_step(step)
                return AgentResult(error_code="agent_timeout", detail=f"step {index}: {e.detail}")
            except PolicyContextOverflow as e:
                step.cuts.append({"kind": "context_overflow", "server": e.detail})
                step.action = {"error": "context_overflow"}
                ctx.record_step(step)
                return AgentResult(error_code="context_overflow", detail=f"step {index}: {e.detail}")
            except PolicyInfraError as e:
                step.action = {"error": e.code, "retries": e.retries}
                ctx.record_step(step)
                return AgentResult(infra_code=e.code, detail=f"step {index}: {e.detail}")
            self._learn_ratio(prompt, reply)
            step.prompt_tokens = reply.prompt_tokens
            step.completion_tokens = reply.completion_tokens
            step.latency_s = reply.latency_s
            step.raw_reply = reply.text
            messages.append({"role": "assistant", "content": reply.text})
            meta: dict[str, Any] = {"finish_reason": reply.finish_reason, "retries": reply.retries}

            try:
                action = parse_action(reply.text)
            except ActionParseError as e:
                parse_failures += 1
                if reply.finish_reason == "length":
                    step.cuts.append(
                        {
                            "kind": "reply_truncated",
                            "max_tokens": cfg.max_tokens,
                            "completion_tokens": reply.completion_tokens,
                        }
                    )
                step.action = {"parse_error": e.message, "consecutive": parse_failures, **meta}
                ctx.record_step(step)
                if parse_failures >= self.max_parse_errors:
                    return AgentResult(
                        error_code="parse_error",
                        detail=f"{parse_failures} unparsable replies in a row; "
                        f"last (step {index}): {e.message}",
                    )
                error = e.message
                if reply.finish_reason == "length":
                    error += f" (your reply was cut off at max_tokens={cfg.max_tokens}; answer more briefly)"
                obs = build_observation(term.screen_text(), "", self.observation_bytes)
                messages.append(
                    {"role": "user", "content": self._user_message(_Turn("parse_error", error), obs.text)}
                )
                continue
            parse_failures = 0
            if reply.finish_reason == "length":  # parsed anyway, but the policy was cut: still evidence
                step.cuts.append({"kind": "reply_truncated", "max_tokens": cfg.max_tokens, "parsed": True})

            results, output, notes, out_of_time = self._execute(ctx, action)
            step.action = {**action.as_dict(), "results": results, **meta}
            ctx.record_step(step)
            if out_of_time:
                return AgentResult(
                    error_code="agent_timeout",
                    detail=f"agent deadline passed while running step {index}'s commands",
                )
            if action.task_complete and awaiting_confirmation:
                return AgentResult(detail=f"task_complete confirmed at step {index}")
            awaiting_confirmation = action.task_complete
            obs = build_observation(term.screen_text(), output, self.observation_bytes)
            turn = _Turn("confirm" if action.task_complete else "step", notes=notes)
            messages.append({"role": "user", "content": self._user_message(turn, obs.text)})
        return AgentResult(
            error_code="turn_limit",
            detail=f"{self.max_steps} steps without a confirmed task_complete"
            + (" (confirmation pending)" if awaiting_confirmation else ""),
        )

    # --- pieces --- #

    def _execute(
        self, ctx: AgentContext, action: Action
    ) -> tuple[list[dict[str, Any]], str, list[str], bool]:
        """Types each command and waits for it (marker, silence, or its duration, whichever is first)."""
        results: list[dict[str, Any]] = []
        outputs: list[str] = []
        notes: list[str] = []
        for i, cmd in enumerate(action.commands):
            left = ctx.time_left()
            if left <= 0:
                return results, "".join(outputs), notes, True
            wait = min(cmd.duration, left)
            r = ctx.terminal.send_and_wait(
                translate_keys(cmd.keystrokes), timeout=wait, quiescence=self.quiescence
            )
            outputs.append(r.output)
            results.append(
                {
                    "completed": r.completed,
                    "exit_code": r.exit_code,
                    "timed_out": r.timed_out,
                    "quiescent": r.quiescent,
                    "duration": round(r.duration, 3),
                }
            )
            if r.timed_out:
                if wait < cmd.duration:
                    return results, "".join(outputs), notes, True
                notes.append(
                    f"commands[{i}] was still running after its duration of {cmd.duration:g}s; "
                    "it may still be running (send C-c to stop it, or wait longer)."
                )
        return results, "".join(outputs), notes, False

    def _user_message(self, turn: _Turn, observation: str) -> str:
        if turn.kind == "parse_error":
            return self.prompts.render("parse_error", error=turn.error, observation=observation)
        if turn.kind == "confirm":
            return self.prompts.render("confirm", observation=observation)
        notes = "".join(f"Note: {n}\n\n" for n in turn.notes)
        return self.prompts.render("step", notes=notes, observation=observation)

    def _learn_ratio(self, prompt: list[dict[str, str]], reply: Completion) -> None:
        """Calibrates characters per token from the server's usage numbers, which beat any estimate."""
        if reply.prompt_tokens <= 0:
            return
        chars = sum(len(m.get("content", "")) for m in prompt)
        lo, hi = _CPT_RANGE
        self._chars_per_token = min(hi, max(lo, chars / reply.prompt_tokens))
