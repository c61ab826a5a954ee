"""LiveEpisodes: the app-wide record of episodes running now, fed from the event bus.

Why a registry and not subscriptions inside the Runs screen: Textual creates a mode's screen the first
time the curator opens it, and a batch (or an audit) may have started before that. The registry
subscribes when the app starts, keeps an emulated screen per episode and stream (policy, verifier), and
the Runs screen attaches panes to those screens whenever it is shown, history included.

Everything here runs on the publishing (worker) thread except what listeners do. Screens are fed on the
shared feed-pump thread (``tui.widgets.feed_pump``), so output bytes never cross into the UI thread and
the publisher only appends to a list. A "please repaint" (``TerminalView.request_paint``) goes to the
frame-clock thread (``tui.widgets.frame_clock``), which builds the pane's next frame when it is due and
visible; the UI thread receives finished frames only.
"""

from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

from ...engine.app.live import COLS, ROWS, live_screen  # COLS, ROWS: every episode's terminal size
from ...engine.app.terminal import Screen
from ...engine.core.events import (
    FOOTPRINT_BATCH_PREFIX,
    EpisodeFinished,
    EpisodeStarted,
    Event,
    EventBus,
    PtyOutput,
    StepFinished,
    StepStarted,
)
from .feed_pump import pump

STREAMS = ("agent", "verifier")


@dataclass
class LiveEpisode:
    episode_id: int
    task_name: str = ""
    agent: str = ""
    attempt: int = 0
    batch_id: str = ""
    started_at: float = field(default_factory=time.time)
    status: str = "running"  # running | done
    outcome: str = ""
    reward: float | None = None
    step_index: int | None = None
    steps: list[tuple[int, dict[str, Any]]] = field(default_factory=list)
    screens: dict[str, Screen] = field(default_factory=dict)
    #: TerminalViews showing this episode, by stream; set on the UI thread, read by the feeder.
    views: dict[str, Any] = field(default_factory=dict)
    verifier_seen: bool = False
    bytes_in: int = 0
    _callbacks: dict[str, Callable[[], None]] = field(default_factory=dict, repr=False)

    @property
    def learns_footprint(self) -> bool:
        """The oracle episode run before a version's first rollout to learn where it is verified."""
        return self.batch_id.startswith(FOOTPRINT_BATCH_PREFIX)

    def paint_callback(self, stream: str) -> Callable[[], None]:
        """One stable callable per stream (the pump de-duplicates callbacks by identity)."""
        cb = self._callbacks.get(stream)
        if cb is None:  # setdefault is atomic: racing threads end up with the same callable
            cb = self._callbacks.setdefault(stream, partial(self._paint, stream))
        return cb

    def _paint(self, stream: str) -> None:
        view = self.views.get(stream)
        if view is not None:
            view.request_paint()

    def screen(self, stream: str) -> Screen:
        scr = self.screens.get(stream)
        if scr is None:
            shared = live_screen(self.episode_id, stream)
            if shared is not None:  # the session runs in this process: show its screen, parse once
                return self.screens.setdefault(stream, shared)
            # The bus thread (feeding) and the UI thread (building a pane) both ask; setdefault is atomic,
            # so both get the one Screen the pump feeds (a plain check-then-set lost output to a twin).
            scr = self.screens.setdefault(stream, Screen(COLS, ROWS))
        return scr


Listener = Callable[[str, LiveEpisode], None]


class LiveEpisodes:
    """Thread-safe registry of recent episodes. Listeners are told ``started|step|verifier|finished``."""

    def __init__(self, bus: EventBus, *, keep: int = 48) -> None:
        self.bus = bus
        self.keep = keep
        self._lock = threading.Lock()
        self._eps: OrderedDict[int, LiveEpisode] = OrderedDict()
        self._listeners: list[Listener] = []
        self._unsubscribe: Callable[[], None] | None = None
        #: Episodes another process runs, fed by an ``EpisodeFollower`` from their casts (not our runners).
        self.followed: set[int] = set()

    def start(self) -> None:
        if self._unsubscribe is None:
            self._unsubscribe = self.bus.subscribe(Event, self._on_event)

    def stop(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None

    def add_listener(self, fn: Listener) -> Callable[[], None]:
        with self._lock:
            self._listeners.append(fn)

        def remove() -> None:
            with self._lock:
                if fn in self._listeners:
                    self._listeners.remove(fn)

        return remove

    def episodes(self) -> list[LiveEpisode]:
        with self._lock:
            return list(self._eps.values())

    def get(self, episode_id: int) -> LiveEpisode | None:
        with self._lock:
            return self._eps.get(episode_id)

    def forget_finished(self) -> list[int]:
        with self._lock:
            gone = [i for i, e in self._eps.items() if e.status == "done"]
            for i in gone:
                del self._eps[i]
        return gone

    # --- bus side (publishing thread) --- #

    def _episode(self, episode_id: int) -> LiveEpisode:
        with self._lock:
            ep = self._eps.get(episode_id)
            if ep is None:
                ep = self._eps[episode_id] = LiveEpisode(episode_id)
                self._trim()
            return ep

    def _trim(self) -> None:
        """Drops the oldest *finished* episodes past ``keep``; running ones are never dropped."""
        over = len(self._eps) - self.keep
        if over <= 0:
            return
        for i in [i for i, e in self._eps.items() if e.status == "done"][:over]:
            del self._eps[i]

    def _tell(self, kind: str, ep: LiveEpisode) -> None:
        with self._lock:
            listeners = list(self._listeners)
        for fn in listeners:
            fn(kind, ep)

    def _on_event(self, ev: Event) -> None:
        if ev.episode_id is None:
            return
        if isinstance(ev, PtyOutput):
            ep = self._episode(ev.episode_id)
            stream = ev.stream if ev.stream in STREAMS else "agent"
            ep.bytes_in += len(ev.data)
            scr = ep.screen(stream)
            if scr is live_screen(ev.episode_id, stream):
                ep.paint_callback(stream)()  # the session already fed it: just repaint
            else:
                pump.submit(scr, ev.data, ep.paint_callback(stream))
            if stream == "verifier" and not ep.verifier_seen:
                ep.verifier_seen = True
                self._tell("verifier", ep)
        elif isinstance(ev, EpisodeStarted):
            ep = self._episode(ev.episode_id)
            ep.task_name, ep.agent, ep.attempt = ev.task_name, ev.agent, ev.attempt
            ep.batch_id = ev.batch_id
            ep.status, ep.outcome, ep.reward = "running", "", None
            self._tell("started", ep)
        elif isinstance(ev, StepStarted):
            ep = self._episode(ev.episode_id)
            ep.step_index = ev.index
        elif isinstance(ev, StepFinished):
            ep = self._episode(ev.episode_id)
            ep.steps.append((ev.index, dict(ev.action or {})))
            self._tell("step", ep)
        elif isinstance(ev, EpisodeFinished):
            ep = self._episode(ev.episode_id)
            ep.status, ep.outcome, ep.reward = "done", ev.outcome, ev.reward
            self._tell("finished", ep)
