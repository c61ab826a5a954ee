"""The meta-agent's turn loop, read top to bottom the way mini-swe-agent's agent loop reads:

    while True:
        check the budgets        -> End
        ask the model for a turn -> a reply (API trouble raises; ``attempt.end_for`` maps it)
        record and charge it
        no tool call?            -> nudge, or End after ``max_no_tool_turns``
        run the tools            -> End on accept, final rejection or Docker gone

Each step is one method; the state they share lives on the :class:`~engine.generator.attempt.Attempt`.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from typing import Any

import docker

from ..llm.client import TurnReply, cut_line
from ..sandbox.docker_engine import DockerUnavailable
from .attempt import Attempt, End, GeneratorContext
from .tools import Accepted, FinalRejection, ToolError, validate_input

log = logging.getLogger(__name__)

EVENT_RESULT_CHARS = 4000

NUDGE_NO_TOOL = (
    "You have not submitted a task yet. Continue with the tools: finish the files, run the audit, fix what "
    "it reports, and call submit once it accepts the task."
)
NUDGE_CUT = "Your reply was {cut}. Continue, and write large files in smaller parts."


class TextRedactingBuffer:
    """Streams text deltas on, but only up to the last whitespace seen: a key split across two deltas
    (keys hold no whitespace) is then always redacted whole before the TUI sees it."""

    def __init__(self, emit: Callable[[str], None]) -> None:
        self._emit = emit
        self._buf = ""

    def feed(self, delta: str) -> None:
        self._buf += delta
        cut = max(self._buf.rfind(c) for c in " \n\t")
        if cut >= 0:
            ready, self._buf = self._buf[: cut + 1], self._buf[cut + 1 :]
            self._emit(ready)

    def flush(self) -> None:
        if self._buf:
            ready, self._buf = self._buf, ""
            self._emit(ready)


def system_blocks(text: str) -> list[dict[str, Any]]:
    # One cache breakpoint on the system prompt: tools + system are the same on every turn.
    return [{"type": "text", "text": text, "cache_control": {"type": "ephemeral"}}]


def with_cache_breakpoint(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """A copy whose last block carries ``cache_control``, so each turn reads the previous turns from the
    prompt cache instead of paying for them again (a 30-turn loop re-sends its history 30 times)."""
    out = [dict(m) for m in messages]
    last = dict(out[-1])
    content = last["content"]
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    content = [dict(b) for b in content]
    content[-1]["cache_control"] = {"type": "ephemeral"}
    last["content"] = content
    out[-1] = last
    return out


class TurnLoop:
    """The conversation of one attempt. :meth:`run` returns the :class:`End` it reached, or raises a
    typed error that :func:`~engine.generator.attempt.end_for` turns into one."""

    def __init__(self, ctx: GeneratorContext, attempt: Attempt, system_text: str, user_text: str) -> None:
        self.ctx = ctx
        self.attempt = attempt
        self.system_text = system_text
        self.tools = ctx.prompt.tools
        self.schemas = {t["name"]: t["input_schema"] for t in self.tools}
        self.messages: list[dict[str, Any]] = [
            {"role": "user", "content": [{"type": "text", "text": user_text}]}
        ]
        self.no_tool_turns = 0
        self.text_out = TextRedactingBuffer(lambda t: attempt.publish("text", t))

    def run(self) -> End:
        while True:
            self.check_budgets()
            try:
                reply = self.ask()
            finally:
                self.text_out.flush()
            self.take(reply)
            if reply.stop_reason == "refusal":
                raise End("rejected", ["generator.refusal"])
            if not reply.tool_calls:
                self.nudge(reply)
                continue
            self.run_tools(reply)

    # --- the steps ---------------------------------------------------------------------------------------

    def check_budgets(self) -> None:
        """Raises the End a spent budget (or the curator's stop) calls for, before more is spent."""
        a, b = self.attempt, self.ctx.budget
        if self.ctx.cancel.is_set():
            raise End("cancelled", ["generator.cancelled", *a.audit_codes()])
        if a.turns >= b.max_turns:
            over = "budget.turns"
        elif a.usage.tokens_in + a.usage.output_tokens >= b.max_tokens:
            over = "budget.tokens"
        elif a.cost >= b.max_usd:
            over = "budget.usd"
        elif self.ctx.spend.exhausted():
            over = "budget.batch_usd"
        elif time.monotonic() >= a.deadline:
            over = "budget.wall"
        else:
            return
        a.record({"type": "budget", "exhausted": over})
        raise End("budget_exhausted", [over, *a.audit_codes()])

    def ask(self) -> TurnReply:
        return self.ctx.client.turn(
            system=system_blocks(self.system_text),
            tools=self.tools,
            messages=with_cache_breakpoint(self.messages),
            on_text=self.text_out.feed,
            on_retry=self.attempt.on_retry,
            deadline=self.attempt.deadline,
            stop=self.ctx.cancel,
        )

    def take(self, reply: TurnReply) -> None:
        """Charges the turn, appends it to the conversation and the transcript, and announces it."""
        a = self.attempt
        turn_cost = a.charge(reply.usage)
        # The API refuses an empty assistant message; an empty reply still has to keep its turn.
        content = reply.content or [{"type": "text", "text": "(empty reply)"}]
        self.messages.append({"role": "assistant", "content": content})
        a.record(
            {
                "type": "message",
                "role": "assistant",
                "content": reply.content,
                "stop_reason": reply.stop_reason,
                "request_id": reply.request_id,
                "message_id": reply.message_id,
                "usage": reply.usage.__dict__,
                "cost_usd": round(turn_cost, 6),
            }
        )
        a.publish(
            "turn",
            {
                "turn": a.turns,
                "stop_reason": reply.stop_reason,
                "tokens_in": a.usage.tokens_in,
                "tokens_out": a.usage.output_tokens,
                "cost_usd": round(a.cost, 6),
                "api_retries": a.retries,
            },
        )

    def say(self, content: list[dict[str, Any]]) -> None:
        msg = {"role": "user", "content": content}
        self.messages.append(msg)
        self.attempt.record({"type": "message", **msg})

    def nudge(self, reply: TurnReply) -> None:
        """A reply without a tool call — cut at max_tokens or not — counts toward ``max_no_tool_turns``;
        past it the attempt ends ``rejected`` (``generator.no_tool_use``), else the model is nudged on."""
        a = self.attempt
        self.no_tool_turns += 1
        if self.no_tool_turns >= self.ctx.budget.max_no_tool_turns:
            limit = self.ctx.budget.max_no_tool_turns
            n = self.no_tool_turns
            detail = f"{n} {'reply' if n == 1 else 'replies'} without a tool call (limit {limit})"
            raise End("rejected", [*a.audit_codes(), "generator.no_tool_use"], detail=detail)
        # a cut names its cause: the output limit, or the context window that clamped the reply
        cut = cut_line(reply.stop_reason, reply.usage, self.ctx.client.max_tokens)
        nudge = NUDGE_CUT.format(cut=cut) if cut else NUDGE_NO_TOOL
        self.say([{"type": "text", "text": nudge}])
        a.save()

    def run_tools(self, reply: TurnReply) -> None:
        """Runs every tool call in order and answers each one (the API requires a result per call, even
        after the attempt has ended); raises the End an accept, a final rejection or Docker calls for."""
        a, wb = self.attempt, self.attempt.workbench
        results: list[dict[str, Any]] = []
        end: End | None = None
        for call in reply.tool_calls:
            a.publish("tool_use", {"id": call.id, "name": call.name, "input": call.input})
            audits_before = wb.audits
            if end is not None:
                text, is_error = "not run: the generation already ended with an earlier call", True
            elif call.parse_error:
                text, is_error = f"{call.parse_error}. Send the call again with a valid JSON object.", True
            elif call.name not in self.schemas:
                text, is_error = f"unknown tool {call.name!r}; the tools are: {', '.join(self.schemas)}", True
            else:
                text, is_error, end = self.execute(call.name, call.input)
            if wb.audits > audits_before and wb.last_audit is not None:
                rep = wb.last_audit[1]
                a.record(
                    {
                        "type": "audit",
                        "version_hash": rep.version_hash,
                        "verdict": rep.verdict,
                        "reasons": rep.reasons,
                        "findings": rep.checks.get("findings", []),
                        "duration_s": rep.duration_s,
                    }
                )
            block: dict[str, Any] = {"type": "tool_result", "tool_use_id": call.id, "content": text}
            if is_error:
                block["is_error"] = True
            results.append(block)
            a.publish(
                "tool_result",
                {
                    "id": call.id,
                    "name": call.name,
                    "is_error": is_error,
                    "content": text[:EVENT_RESULT_CHARS],
                },
            )
        self.say(results)
        if end is not None:
            raise end
        a.save()

    def execute(self, name: str, raw_input: Any) -> tuple[str, bool, End | None]:
        """(result text, is_error, the End this call brings). Malformed input and tool failures are the
        model's to fix; only Docker going away and a bug of ours are not."""
        try:
            out = self.attempt.workbench.execute(name, validate_input(self.schemas[name], raw_input))
        except ToolError as exc:
            return str(exc), True, None
        except FinalRejection as exc:
            return (
                f"rejected: {exc.detail} ({exc.code})",
                True,
                End("rejected", [exc.code], detail=exc.detail),
            )
        except (DockerUnavailable, docker.errors.DockerException) as exc:
            detail = f"Docker is unavailable: {exc}"
            return detail, True, End("error", ["infra.daemon_unavailable"], detail=detail)
        except Exception as exc:  # a bug in a tool must not lose the generation's record
            log.exception("generation %s: tool %s failed", self.attempt.gid, name)
            return f"internal error in {name}: {type(exc).__name__}: {exc}", True, None
        if isinstance(out, Accepted):
            text = f"accepted: task {out.name!r} is now in the workspace (version {out.version_hash[:12]})"
            return text, False, End("accepted", [], accepted=out)
        return out, False, None
