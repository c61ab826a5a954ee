"""The policy agent: a model behind an OpenAI-compatible endpoint, driving the terminal step by step.

One step is one policy call, in mini-swe-agent's shape: ``step()`` = query (fit the request to the served
window, fit.py, and ask) -> parse -> execute (type). Every way the loop ends is an :class:`EpisodeEnded`
carrying its ``AgentResult``; an unparsable reply is an :class:`Unparsable` the policy is shown.

Each way an episode can end on the harness side has its own code, because the point of Bandpass is
telling a policy that failed the task from a scaffold that failed the policy (DESIGN.md, "harness
brittleness"): ``parse_error``, ``turn_limit``, ``context_overflow``, ``config_mismatch``,
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

from ...sandbox.keys import translate_keys
from ..policy.client import (
    Completion,
    PolicyClient,
    PolicyContextOverflow,
    PolicyInfraError,
    PolicyTimeout,
)
from ..policy.context import Observation, PromptTemplates, build_observation
from ..policy.fit import PromptCounter, PromptTooLong, fit_request
from ..policy.protocol import Action, ActionParseError, parse_action
from .base import AgentContext, AgentResult, StepRecord

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


class EpisodeEnded(Exception):  # a way the loop ends, not an error
    """Every way the agent's loop ends is one of these, carrying the episode's ``AgentResult``: the loop
    has one exit, and a new ending is a new raise, not another early return threaded through helpers."""

    def __init__(self, result: AgentResult) -> None:
        super().__init__(result.detail)
        self.result = result


class Unparsable(Exception):  # the policy is told, and the loop goes on
    """The reply was not an action: the policy is shown why, and the episode goes on (up to a limit)."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


@dataclass
class _Conversation:
    """The state one episode's loop carries from step to step."""

    messages: list[dict[str, str]]
    observation: Observation  # the text shown next and the cuts made to it
    window: _Window
    counter: PromptCounter
    parse_failures: int = 0
    awaiting_confirmation: bool = False


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

    # --- the loop: step() until an EpisodeEnded --- #

    def run(self, ctx: AgentContext) -> AgentResult:
        cfg = self.client.cfg
        obs = build_observation(ctx.terminal.screen_text(), "", self.observation_bytes)
        conv = _Conversation(
            messages=[
                {"role": "system", "content": self.prompts.render("system")},
                {
                    "role": "user",
                    "content": self.prompts.render(
                        "first", instruction=ctx.task.instruction.strip(), observation=obs.text
                    ),
                },
            ],
            observation=obs,
            window=_Window(configured=cfg.context_window, served=self.client.served_window()),
            counter=PromptCounter(self.client.tokenize),
        )
        try:
            for index in range(self.max_steps):  # 0-based, like the builtin agents' step markers
                self.step(ctx, conv, index)
        except EpisodeEnded as ended:
            return ended.result
        return AgentResult(
            error_code="turn_limit",
            detail=f"{self.max_steps} steps without a confirmed task_complete"
            + (" (confirmation pending)" if conv.awaiting_confirmation else ""),
        )

    def step(self, ctx: AgentContext, conv: _Conversation, index: int) -> None:
        """One policy call: query, parse, execute. Returns when the episode goes on; raises
        :class:`EpisodeEnded` when it ends (done, out of time, out of window, endpoint gone...)."""
        if ctx.time_left() <= 0:
            raise EpisodeEnded(
                AgentResult(error_code="agent_timeout", detail=f"agent deadline passed before step {index}")
            )
        step = StepRecord(index=index, marker_time=ctx.begin_step(index), observation=conv.observation.text)
        step.cuts.extend(conv.observation.cuts)
        if index == 0 and conv.window.mismatch:
            step.cuts.append(conv.window.mismatch)
        reply = self._query(ctx, step, conv)
        meta, cut_by = self._take_reply(step, reply, conv)
        try:
            action = self._parse(reply, cut_by)
        except Unparsable as e:
            self._tell_unparsable(ctx, step, conv, meta, cut_by, e)
            return
        conv.parse_failures = 0
        results, output, notes, out_of_time = self._execute(ctx, action)
        step.action = {**action.as_dict(), "results": results, **meta}
        ctx.record_step(step)
        if out_of_time:
            raise EpisodeEnded(
                AgentResult(
                    error_code="agent_timeout",
                    detail=f"agent deadline passed while running step {index}'s commands",
                )
            )
        if action.task_complete and conv.awaiting_confirmation:
            raise EpisodeEnded(AgentResult(detail=f"task_complete confirmed at step {index}"))
        conv.awaiting_confirmation = action.task_complete
        conv.observation = build_observation(ctx.terminal.screen_text(), output, self.observation_bytes)
        turn = _Turn("confirm" if action.task_complete else "step", notes=notes)
        conv.messages.append({"role": "user", "content": self._user_message(turn, conv.observation.text)})

    # --- pieces --- #

    def _take_reply(
        self, step: StepRecord, reply: Completion, conv: _Conversation
    ) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """Puts the reply on the step and the conversation; returns its metadata and how it was cut."""
        step.prompt_tokens = reply.prompt_tokens
        step.completion_tokens = reply.completion_tokens
        step.latency_s = reply.latency_s
        step.raw_reply = reply.text
        conv.messages.append({"role": "assistant", "content": reply.text})
        meta: dict[str, Any] = {
            "finish_reason": reply.finish_reason,
            "retries": reply.retries,
            "max_tokens": reply.max_tokens,
            "prompt_count": step.action.pop("prompt_count", None),
        }
        cut_by = self._truncation(reply, conv.window.tokens, self.client.cfg.max_tokens)
        if cut_by is not None:
            step.cuts.append(cut_by)
        return meta, cut_by

    @staticmethod
    def _parse(reply: Completion, cut_by: dict[str, Any] | None) -> Action:
        try:
            action = parse_action(reply.text)
        except ActionParseError as e:
            raise Unparsable(e.message) from e
        if cut_by is not None:  # parsed anyway, but the policy was cut: still evidence
            cut_by["parsed"] = True
        return action

    def _tell_unparsable(
        self,
        ctx: AgentContext,
        step: StepRecord,
        conv: _Conversation,
        meta: dict[str, Any],
        cut_by: dict[str, Any] | None,
        e: Unparsable,
    ) -> None:
        """Records the unparsable step and shows the policy why, or ends the episode after too many."""
        conv.parse_failures += 1
        step.action = {"parse_error": e.message, "consecutive": conv.parse_failures, **meta}
        ctx.record_step(step)
        if conv.parse_failures >= self.max_parse_errors:
            raise EpisodeEnded(
                AgentResult(
                    error_code="parse_error",
                    detail=f"{conv.parse_failures} unparsable replies in a row; "
                    f"last (step {step.index}): {e.message}",
                )
            )
        error = e.message
        if cut_by is not None:
            error += f" ({truncation_message(cut_by)})"
        conv.observation = build_observation(ctx.terminal.screen_text(), "", self.observation_bytes)
        conv.messages.append(
            {
                "role": "user",
                "content": self._user_message(_Turn("parse_error", error), conv.observation.text),
            }
        )

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

    def _query(self, ctx: AgentContext, step: StepRecord, conv: _Conversation) -> Completion:
        """Fits the request to the window and sends it; raises :class:`EpisodeEnded` when it cannot.

        A 400 "maximum context length is N tokens" is the ground truth: it teaches the window (or the
        exact prompt length) and the request is refitted and sent again, at most twice per step."""
        cfg = self.client.cfg
        index = step.index
        messages, window, counter = conv.messages, conv.window, conv.counter
        for tries in range(3):
            try:
                fit = fit_request(messages, window=window.tokens, max_tokens=cfg.max_tokens, counter=counter)
            except PromptTooLong as e:
                step.cuts.append(e.cut)
                raise EpisodeEnded(self._overflow(ctx, step, window, e.detail)) from e
            step.cuts.extend(fit.cuts)
            step.action["prompt_count"] = fit.count.as_dict()
            try:
                reply = self.client.complete(fit.messages, deadline=ctx.deadline, max_tokens=fit.max_tokens)
            except PolicyTimeout as e:
                step.attempts.extend(a.as_dict() for a in e.attempts)
                step.action = {"error": "agent_timeout", "retries": e.retries}
                ctx.record_step(step)
                raise EpisodeEnded(
                    AgentResult(error_code="agent_timeout", detail=f"step {index}: {e.detail}")
                ) from e
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
                raise EpisodeEnded(self._overflow(ctx, step, window, e.detail)) from e
            except PolicyInfraError as e:
                step.attempts.extend(a.as_dict() for a in e.attempts)
                step.action = {"error": e.code, "retries": e.retries}
                ctx.record_step(step)
                raise EpisodeEnded(AgentResult(infra_code=e.code, detail=f"step {index}: {e.detail}")) from e
            step.attempts.extend(a.as_dict() for a in reply.attempts)
            counter.learn(fit.messages, reply.prompt_tokens)
            # The conversation continues from what the policy was actually shown: turns cut stay cut
            # and a capped observation stays capped, so the next prompt's prefix is counted exactly.
            messages[:] = fit.messages
            return reply
        raise AssertionError("unreachable")  # pragma: no cover - the loop always returns or raises

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
