"""The agent side of an episode (Harbor's separation: environment, agent, verifier).

An agent only ever sees the terminal the harness holds for it; it never touches Docker, the store or the
verifier. The episode runner builds an ``AgentContext``, calls ``Agent.run`` and afterwards runs the
verifier whatever the agent returned, so a harness-side error still leaves the reward as evidence.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from ...core.events import EventBus
    from ...sandbox.asciicast import CastWriter
    from ...sandbox.terminal import TerminalSession
    from ...tasks.taskdir import TaskSpec


@dataclass
class StepRecord:
    """What one policy step leaves behind; persisted as a ``Step`` row (harness evidence)."""

    index: int
    marker_time: float = 0.0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    action: dict[str, Any] = field(default_factory=dict)
    raw_reply: str = ""
    observation: str = ""
    cuts: list[dict[str, Any]] = field(default_factory=list)
    #: Every HTTP request behind this step (latency, error, backoff): a slow server's wall time is here.
    attempts: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class AgentResult:
    """``error_code`` None means the agent finished; else a harness code (``parse_error``, ``turn_limit``,
    ``context_overflow``, ``agent_timeout``...) that becomes ``agent_error:<code>``. ``infra_code`` is for
    failures outside the agent (the policy endpoint rate-limited us, the container died) and becomes
    ``infra_error:<code>``."""

    error_code: str | None = None
    infra_code: str | None = None
    detail: str = ""


@dataclass
class AgentContext:
    task: TaskSpec
    terminal: TerminalSession
    episode_id: int | None
    deadline: float  # time.monotonic() after which the agent must stop (task's [agent] timeout_sec)
    recorder: CastWriter | None = None
    bus: EventBus | None = None
    on_step: Callable[[StepRecord], None] | None = None
    #: Policy steps taken in earlier task steps of a multi-step task: an agent counts its steps from 0 in
    #: each task step, and its markers and records continue the episode's numbering from here.
    step_offset: int = 0

    def time_left(self) -> float:
        return self.deadline - time.monotonic()

    def begin_step(self, index: int) -> float:
        """Writes the step marker into the cast (replay jumps step to step) and returns its cast time."""
        from ...core.events import StepStarted

        t = 0.0
        index += self.step_offset
        if self.recorder is not None:
            t = self.recorder.marker(f"step {index}")
        if self.bus is not None:
            self.bus.publish(StepStarted(episode_id=self.episode_id, index=index, marker_time=t))
        return t

    def record_step(self, step: StepRecord) -> None:
        from ...core.events import StepFinished

        if self.step_offset:
            step = dataclasses.replace(step, index=step.index + self.step_offset)
        if self.on_step is not None:
            self.on_step(step)
        if self.bus is not None:
            self.bus.publish(StepFinished(episode_id=self.episode_id, index=step.index, action=step.action))


class Agent(Protocol):
    name: str

    def run(self, ctx: AgentContext) -> AgentResult: ...
