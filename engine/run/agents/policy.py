"""The policy agent: a model behind an OpenAI-compatible endpoint, driving the terminal step by step.

One step is one policy call: build the observation, fit the request to the served window (fit.py), ask,
parse, type. Each way an episode can end on the harness side has its own code, because the point of
Bandpass is telling a policy that failed the task from a scaffold that failed the policy (DESIGN.md,
"harness brittleness"): ``parse_error``, ``turn_limit``, ``context_overflow``, ``config_mismatch``,
``agent_timeout`` are agent errors; a rate-limited or unreachable endpoint is an infra error and never
counts against the model.

Everything the policy was shown and everything it said is put on the step, including each cut (of the
observation, of the history, of ``max_tokens``, of a reply stopped by the window or by ``max_tokens``,
with its true cause) and every HTTP attempt, so a curator replaying the episode can see the failure was
the harness's.
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
from engine.run.policy.context import PromptTemplates, build_observation
from engine.run.policy.fit import PromptCounter, PromptTooLong, fit_request
from engine.run.policy.protocol import Action, ActionParseError, parse_action
from engine.sandbox.keys import translate_keys

DEFAULT_OBSERVATION_BYTES = 16_000


@dataclass
class _Window:
    """The context window of one episode: the configured one, the served one (from ``/v1/models`` or a
    server's 400), and the smaller of the two, which is what prompts are fitted to."""

    configured: int | None
    served: int | None

    @property
    def tokens(self) -> int | None:
        known = [w for w in (self.configured, self.served) if w]
        return min(known) if known else None

    @property
    def mismatch(self) -> dict[str, Any] | None:
        if not self.configured or not self.served or self.configured == self.served:
            return None
        return {
            "kind": "config_mismatch",
            "configured": self.configured,
            "served": self.served,
            "using": self.tokens,
        }


def truncation_message(cut: dict[str, Any]) -> str:
    """What the policy is told about its cut reply: the true cause, so it knows what to change."""
    if cut.get("cause") == "context_window":
        return (
            f"your reply was cut off at the context window: the conversation ({cut['prompt_tokens']} "
            f"tokens) left room for only {cut['completion_tokens']} tokens of reply; answer more briefly"
        )
    return f"your reply was cut off at max_tokens={cut['max_tokens']}; answer more briefly"


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
        window = _Window(configured=cfg.context_window, served=self.client.served_window())
        counter = PromptCounter(self.client.tokenize)
        for index in range(self.max_steps):  # 0-based, like the builtin agents' step markers
            if ctx.time_left() <= 0:
                return AgentResult(
                    error_code="agent_timeout", detail=f"agent deadline passed before step {index}"
                )
            step = StepRecord(index=index, marker_time=ctx.begin_step(index), observation=obs.text)
            step.cuts.extend(obs.cuts)
            if index == 0 and window.mismatch:
                step.cuts.append(window.mismatch)
            reply, ended = self._ask(ctx, step, messages, window, counter)
            if ended is not None:
                return ended
            assert reply is not None
            step.prompt_tokens = reply.prompt_tokens
            step.completion_tokens = reply.completion_tokens
            step.latency_s = reply.latency_s
            step.raw_reply = reply.text
            messages.append({"role": "assistant", "content": reply.text})
            meta: dict[str, Any] = {
                "finish_reason": reply.finish_reason,
                "retries": reply.retries,
                "max_tokens": reply.max_tokens,
                "prompt_count": step.action.pop("prompt_count", None),
            }
            cut_by = self._truncation(reply, window.tokens, cfg.max_tokens)
            if cut_by is not None:
                step.cuts.append(cut_by)

            try:
                action = parse_action(reply.text)
            except ActionParseError as e:
                parse_failures += 1
                step.action = {"parse_error": e.message, "consecutive": parse_failures, **meta}
                ctx.record_step(step)
                if parse_failures >= self.max_parse_errors:
                    return AgentResult(
                        error_code="parse_error",
                        detail=f"{parse_failures} unparsable replies in a row; "
                        f"last (step {index}): {e.message}",
                    )
                error = e.message
                if cut_by is not None:
                    error += f" ({truncation_message(cut_by)})"
                obs = build_observation(term.screen_text(), "", self.observation_bytes)
                messages.append(
                    {"role": "user", "content": self._user_message(_Turn("parse_error", error), obs.text)}
                )
                continue
            parse_failures = 0
            if cut_by is not None:  # parsed anyway, but the policy was cut: still evidence
                cut_by["parsed"] = True

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

    def _ask(
        self,
        ctx: AgentContext,
        step: StepRecord,
        messages: list[dict[str, str]],
        window: _Window,
        counter: PromptCounter,
    ) -> tuple[Completion | None, AgentResult | None]:
        """Fits the request to the window and sends it; returns (reply, None) or (None, how it ended).

        A 400 "maximum context length is N tokens" is the ground truth: it teaches the window (or the
        exact prompt length) and the request is refitted and sent again, at most twice per step."""
        cfg = self.client.cfg
        index = step.index
        for tries in range(3):
            try:
                fit = fit_request(messages, window=window.tokens, max_tokens=cfg.max_tokens, counter=counter)
            except PromptTooLong as e:
                step.cuts.append(e.cut)
                return None, self._overflow(ctx, step, window, e.detail)
            step.cuts.extend(fit.cuts)
            step.action["prompt_count"] = fit.count.as_dict()
            try:
                reply = self.client.complete(fit.messages, deadline=ctx.deadline, max_tokens=fit.max_tokens)
            except PolicyTimeout as e:
                step.attempts.extend(a.as_dict() for a in e.attempts)
                step.action = {"error": "agent_timeout", "retries": e.retries}
                ctx.record_step(step)
                return None, AgentResult(error_code="agent_timeout", detail=f"step {index}: {e.detail}")
            except PolicyContextOverflow as e:
                step.attempts.extend(a.as_dict() for a in e.attempts)
                learned: dict[str, Any] = {"kind": "server_overflow", "server": e.detail}
                retry = False
                if e.window and (window.tokens is None or e.window < window.tokens):
                    learned["window"] = e.window
                    window.served = e.window
                    retry = True
                if e.prompt_tokens and e.prompt_tokens > fit.count.tokens:
                    learned["prompt_tokens"] = e.prompt_tokens
                    learned["counted"] = fit.count.tokens
                    counter.learn(fit.messages, e.prompt_tokens)
                    retry = True
                step.cuts.append(learned)
                if retry and tries < 2:
                    if window.mismatch and window.mismatch not in step.cuts:
                        step.cuts.append(window.mismatch)
                    continue
                return None, self._overflow(ctx, step, window, e.detail)
            except PolicyInfraError as e:
                step.attempts.extend(a.as_dict() for a in e.attempts)
                step.action = {"error": e.code, "retries": e.retries}
                ctx.record_step(step)
                return None, AgentResult(infra_code=e.code, detail=f"step {index}: {e.detail}")
            step.attempts.extend(a.as_dict() for a in reply.attempts)
            counter.learn(fit.messages, reply.prompt_tokens)
            # The conversation continues from what the policy was actually shown: turns cut stay cut
            # and a capped observation stays capped, so the next prompt's prefix is counted exactly.
            messages[:] = fit.messages
            return reply, None
        raise AssertionError("unreachable")  # pragma: no cover - the loop always returns

    def _overflow(self, ctx: AgentContext, step: StepRecord, window: _Window, detail: str) -> AgentResult:
        """Ends the episode on a prompt that cannot fit; a configured window larger than the served one
        is the harness's misconfiguration (two limits that disagree), not the policy's failure."""
        step.action = {"error": "context_overflow", "prompt_count": step.action.get("prompt_count")}
        if window.configured and window.served and window.configured > window.served:
            step.action["error"] = "config_mismatch"
            ctx.record_step(step)
            return AgentResult(
                error_code="config_mismatch",
                detail=f"step {step.index}: context_window {window.configured} in bandpass.toml is larger "
                f"than the served window {window.served}: {detail}",
            )
        ctx.record_step(step)
        return AgentResult(error_code="context_overflow", detail=f"step {step.index}: {detail}")

    @staticmethod
    def _truncation(reply: Completion, window: int | None, configured_max: int) -> dict[str, Any] | None:
        """Why a reply stopped short: ``finish_reason: length`` below the ``max_tokens`` we configured
        means the context window cut it (vLLM lowers max_tokens to what the window leaves; so do we)."""
        if reply.finish_reason != "length":
            return None
        cut: dict[str, Any] = {
            "kind": "reply_truncated",
            "max_tokens": reply.max_tokens,
            "completion_tokens": reply.completion_tokens,
            "prompt_tokens": reply.prompt_tokens,
        }
        by_window = (
            reply.completion_tokens < reply.max_tokens  # the server lowered max_tokens (vLLM does)
            or reply.max_tokens < configured_max  # we lowered it to what the window left
            or (window is not None and reply.prompt_tokens + reply.completion_tokens >= window)
        )
        cut["cause"] = "context_window" if by_window else "max_tokens"
        if window is not None:
            cut["window"] = window
        return cut
