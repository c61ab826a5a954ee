"""In-process event bus.

Every arrow of the data flow (DESIGN.md) is also an event here. The TUI subscribes for its live panes, the
store-writing code subscribes to persist, and the recorder is fed from the same stream, so one source of
truth exists per fact. Delivery is synchronous on the publishing thread: subscribers that touch a UI must
hop to their own thread (Textual's ``call_from_thread``). A failing subscriber never breaks the publisher.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeVar

log = logging.getLogger(__name__)


#: The batch id prefix of the oracle episodes that learn a version's footprint before its first rollout
#: (engine/audit/adoption.py); here so the front ends can say what such an episode is for.
FOOTPRINT_BATCH_PREFIX = "footprint-"


@dataclass(frozen=True)
class Event:
    """Base class. ``episode_id`` is None for events that belong to no episode (generation, builds)."""

    episode_id: int | None = None
    at: float = field(default_factory=time.time)


@dataclass(frozen=True)
class EpisodeStarted(Event):
    """``batch_id`` says what the episode is for: a rollout batch's id, or one starting with
    :data:`FOOTPRINT_BATCH_PREFIX` for the oracle episode that learns where a version is verified."""

    task_name: str = ""
    agent: str = ""
    attempt: int = 0
    batch_id: str = ""


@dataclass(frozen=True)
class PtyOutput(Event):
    """Text the container's terminal wrote. ``stream`` is ``"agent"`` or ``"verifier"``: the verifier's
    test output is this event with ``stream="verifier"``, so panes need one subscription for both."""

    stream: str = "agent"
    data: str = ""


@dataclass(frozen=True)
class PtyInput(Event):
    stream: str = "agent"
    data: str = ""


@dataclass(frozen=True)
class StepStarted(Event):
    index: int = 0
    marker_time: float = 0.0


@dataclass(frozen=True)
class StepFinished(Event):
    index: int = 0
    action: dict[str, Any] | None = None


@dataclass(frozen=True)
class EpisodeFinished(Event):
    outcome: str = ""
    reward: float | None = None


@dataclass(frozen=True)
class BuildLog(Event):
    image: str = ""
    line: str = ""


@dataclass(frozen=True)
class GenerationEvent(Event):
    """Meta-agent progress: ``kind`` is started, text (a streamed delta), tool_use, tool_result, api_retry,
    turn or finished; all but text carry a JSON object in ``data``."""

    generation_id: int | None = None
    kind: str = ""
    data: str = ""


Subscriber = Callable[[Event], None]
E = TypeVar("E", bound=Event)


class EventBus:
    """Thread-safe publish/subscribe keyed by event class (subclasses reach base-class subscribers)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subs: list[tuple[type[Event], Subscriber]] = []

    def subscribe(self, kind: type[E], fn: Callable[[E], None]) -> Callable[[], None]:
        """Returns an unsubscribe function. ``fn`` is called only with events of ``kind`` (or a subclass)."""
        entry: tuple[type[Event], Subscriber] = (kind, fn)  # type: ignore[assignment]  # publish matches kind
        with self._lock:
            self._subs.append(entry)

        def unsubscribe() -> None:
            with self._lock:
                if entry in self._subs:
                    self._subs.remove(entry)

        return unsubscribe

    def publish(self, event: Event) -> None:
        with self._lock:
            subs = [fn for kind, fn in self._subs if isinstance(event, kind)]
        for fn in subs:
            try:
                fn(event)
            except Exception:  # a broken pane must not kill an episode
                log.exception("event subscriber failed on %s", type(event).__name__)


#: The process-wide bus. Code that wants isolation (tests, parallel workspaces) passes its own.
bus = EventBus()
