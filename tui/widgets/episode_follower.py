"""EpisodeFollower: live panes for episodes that other processes on this host run.

A batch started by ``bandpass run`` in a terminal (or by another TUI) never reaches this process's event
bus; what it shares with us is the workspace: the store's rows and ``recordings/episode-<id>/``, where each
terminal is written as it happens (``CastWriter`` flushes one line per event). The follower is a thread
that polls the store for the running episodes of the batches it is told to follow and tails their
``agent`` and ``verifier`` casts (:class:`~engine.sandbox.cast_tail.CastTail`, the newest try's file), and
republishes what it reads on the app's bus as ``EpisodeStarted``, ``PtyOutput(stream=...)``,
``StepStarted`` (the agent cast's ``step N`` markers), ``StepFinished`` (the store's step rows: the steps
panel) and, once the row is done (its casts are closed before the row is written), ``EpisodeFinished``
with the stored outcome.
:class:`~tui.widgets.live_episodes.LiveEpisodes` and the Runs panes then show them like our own episodes:
no pane code knows the difference.

Idle, it costs nothing: with no batch to follow the thread sleeps until it is given one; following, it
reads the casts every ``FOLLOW_INTERVAL_S`` while they grow, backing off to ``FOLLOW_CEILING_S`` while
none does, and reads the store only when something was committed to it (``reads.commit_watch``).

Never followed: episodes of this process's own batches (``is_own_batch``) and episodes the registry already
has from the bus (a pane fed twice would print everything twice); batches run on Ray, whose episodes
write on the nodes that run them (their casts reach the workspace only when they end): those are progress
only, in the batch table. An episode that started and ended between two polls still gets its pane (the
whole recording and its outcome), as long as it ended after the follower started.
"""

from __future__ import annotations

import logging
import os
import re
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

from ...engine.app.live import CastError, CastTail
from ...engine.core.events import (
    EpisodeFinished,
    EpisodeStarted,
    Event,
    EventBus,
    PtyOutput,
    StepFinished,
    StepStarted,
)
from ...engine.core.workspace import Workspace
from .backoff import Backoff
from .live_episodes import STREAMS, LiveEpisodes

if TYPE_CHECKING:
    from ...engine.app.reads import FollowedEpisode

log = logging.getLogger(__name__)

#: How often the follower reads the casts (a pane looks live) and the store (new and ended episodes)...
FOLLOW_INTERVAL_S = 0.2
STORE_INTERVAL_S = 0.5
#: ...and the longest it waits between two reads while nothing changes (doubling up to it).
FOLLOW_CEILING_S = 2.0
#: How far before the previous poll the next one looks for ended episodes (stamp-to-commit lag).
ENDED_MARGIN = timedelta(seconds=10)
_CAST = re.compile(r"^(agent|verifier)(?:\.try(\d+))?\.cast$")
_STEP = re.compile(r"^step (\d+)$")  # the marker ``AgentContext.begin_step`` writes


@dataclass
class _Followed:
    episode_id: int
    rec_dir: Path
    #: stream -> (try number, tail of that try's cast); a stream whose cast broke is None
    tails: dict[str, tuple[int, CastTail] | None] = field(default_factory=dict)
    last_step: int = 0  # the highest step id read from the store
    seen_steps: set[int] = field(default_factory=set)  # step ids published (this try)


def newest_casts(rec_dir: Path) -> dict[str, tuple[int, Path]]:
    """``{"agent": (try, path), "verifier": (try, path)}`` of the newest try's casts in ``rec_dir``."""
    out: dict[str, tuple[int, Path]] = {}
    try:
        names = os.listdir(rec_dir)
    except OSError:  # not created yet (the image is still building)
        return out
    for name in names:
        m = _CAST.match(name)
        if m is None:
            continue
        stream, try_no = m.group(1), int(m.group(2) or 0)
        if stream not in out or try_no > out[stream][0]:
            out[stream] = (try_no, rec_dir / name)
    return out


class EpisodeFollower:
    def __init__(
        self,
        ws: Workspace,
        bus: EventBus,
        live: LiveEpisodes,
        *,
        is_own_batch: Callable[[str], bool] = lambda _b: False,
        interval: float = FOLLOW_INTERVAL_S,
    ) -> None:
        from ...engine.app.reads import utcnow

        self.ws, self.bus, self.live = ws, bus, live
        self.is_own_batch = is_own_batch
        self.interval = interval
        self.since = utcnow()  # episodes that ended before we started are history, not live
        self._window = self.since  # ended at or after this: not yet seen by a poll
        self._lock = threading.Lock()
        self._batches: set[str] = set()
        self._ending: set[str] = set()  # finished batches: dropped after the next store read
        self._followed: dict[int, _Followed] = {}
        self._finished: set[int] = set()  # followed to their end (the follower's thread only)
        self._stop = threading.Event()
        self._wake = threading.Event()  # set by follow() and stop(): the thread looks at once
        self._thread: threading.Thread | None = None
        self._events = 0  # events published so far: a poll that published none found nothing new

    # --- control (any thread) --- #

    def follow(self, batch_ids: Iterable[str], *, finished: Iterable[str] = ()) -> None:
        """Adds batches whose episodes to follow (batches this process runs are skipped anyway).
        ``finished`` names batches seen with every episode done: each is read one last time (its last
        episodes to their end), then dropped, so a long session does not poll old batches."""
        with self._lock:
            self._batches.update(batch_ids)
            self._ending.update(b for b in finished if b in self._batches)
        self._wake.set()

    @property
    def batches(self) -> list[str]:
        with self._lock:
            return sorted(self._batches)

    @property
    def following(self) -> list[int]:
        """Ids of the episodes followed now (running, not yet seen done)."""
        with self._lock:
            return sorted(self._followed)

    @property
    def stopped(self) -> bool:
        return self._stop.is_set()

    def start(self) -> EpisodeFollower:
        if self._thread is None:
            self._thread = threading.Thread(target=self._run, name="episode-follower", daemon=True)
            self._thread.start()
        return self

    def stop(self, timeout: float | None = None) -> None:
        self._stop.set()
        self._wake.set()
        if self._thread is not None and timeout:
            self._thread.join(timeout)

    @property
    def idle(self) -> bool:
        """Nothing to follow: no other process's batch, no episode (the thread sleeps until follow())."""
        with self._lock:
            return not self._followed and all(self.is_own_batch(b) for b in self._batches)

    def _run(self) -> None:
        from ...engine.app import reads

        commits = reads.commit_watch(self.ws)  # this thread's own: the store is read after a commit only
        delay = Backoff(self.interval, max(self.interval, FOLLOW_CEILING_S))
        last_store = 0.0
        try:
            while not self._stop.is_set():
                if self.idle:
                    self._wake.wait()
                    self._wake.clear()
                    delay.reset()
                    continue
                if self._wake.wait(delay.delay):
                    self._wake.clear()  # told of new batches: look now
                    delay.reset()
                if self._stop.is_set():
                    break
                store = time.monotonic() - last_store >= STORE_INTERVAL_S
                if store:
                    last_store = time.monotonic()
                    store = commits.changed()
                try:
                    changed = self.poll(store)
                except Exception:  # a thread, not a handler: logged, and the next poll may work
                    log.exception("following other processes' episodes failed")
                    changed = False
                delay.after(changed)
        finally:
            commits.close()

    # --- one round (the follower's thread, or a test) --- #

    def poll(self, store: bool = True) -> bool:
        """One round: the store (new, requeued and finished episodes, steps) unless ``store`` is False,
        then the casts of the episodes followed. Returns whether it found anything new (published an
        event, or started or stopped following an episode)."""
        events = self._events
        with self._lock:
            before = set(self._followed)
        self._poll(store)
        with self._lock:
            return self._events != events or set(self._followed) != before

    def _poll(self, store: bool) -> None:
        from ...engine.app import reads

        with self._lock:
            batches = [b for b in self._batches if not self.is_own_batch(b)]
            ending = set(self._ending)  # seen done before this read: it reads their last rows
            followed = list(self._followed)
        if not batches and not followed:
            return
        if not store and not ending:  # a batch seen done is read once more even when nothing was committed
            for each in list(self._followed.values()):
                self._read(each)
            return
        from ...engine.app.reads import utcnow

        now = utcnow()
        rows = reads.followed_episodes(self.ws, batches, also=followed, ended_since=self._window)
        # the next poll looks back to just before this one (a row is stamped before its commit lands)
        self._window = max(self.since, now - ENDED_MARGIN)
        current: list[tuple[FollowedEpisode, _Followed]] = []
        for row in rows:
            f = self._followed.get(row.id)
            if f is None:
                if row.status == "queued" or self.is_own_batch(row.batch_id):
                    continue
                if row.status == "done" and row.id in self._finished:
                    continue  # shown to its end already (a row run again, `run --retry`, is followed again)
                if row.id not in self.live.followed and self.live.get(row.id) is not None:
                    continue  # on the bus already: this process runs it
                f = self._start(row)
            if row.status == "queued":  # requeued (a dead runner, then --resume): followed again when it runs
                with self._lock:
                    self._followed.pop(row.id, None)
                continue
            current.append((row, f))
        for _row, f in current:  # after the status was read: a done row's casts are complete
            if self._stop.is_set():
                return
            self._read(f)
        # a step's row is written after its output: read after the casts
        steps = reads.steps_after(self.ws, {f.episode_id: f.last_step for _row, f in current})
        for eid, sid, index, action in steps:
            f = self._followed[eid]
            f.last_step = max(f.last_step, sid)
            if sid not in f.seen_steps:
                f.seen_steps.add(sid)
                self._emit(StepFinished(episode_id=eid, index=index, action=action))
        for row, _f in current:
            if row.status == "done":  # no longer followed by the time anyone hears it ended
                with self._lock:
                    self._followed.pop(row.id, None)
                self._finished.add(row.id)
                self._emit(EpisodeFinished(episode_id=row.id, outcome=row.outcome, reward=row.reward))
        with self._lock:
            self._batches -= ending
            self._ending -= ending

    def _emit(self, event: Event) -> None:
        self._events += 1
        self.bus.publish(event)

    def _start(self, row: FollowedEpisode) -> _Followed:
        eid = row.id
        f = _Followed(eid, self.ws.recordings_dir / f"episode-{eid}")
        with self._lock:
            self._followed[eid] = f
        self.live.followed.add(eid)
        self._emit(
            EpisodeStarted(
                episode_id=eid,
                task_name=row.task_name,
                agent=row.agent,
                attempt=row.attempt,
                batch_id=row.batch_id,
            )
        )
        return f

    def _read(self, f: _Followed) -> None:
        newest = newest_casts(f.rec_dir)
        for stream in STREAMS:
            current = f.tails.get(stream, (-1, None))
            if current is None or stream not in newest:
                continue  # broken, or not written yet
            try_no, path = newest[stream]
            old_try, tail = current
            if tail is not None and try_no != old_try:
                self._publish(f, stream, tail)  # the rest of the try before, then the new one
                tail = None
                if stream == "agent":  # the new try deleted the old one's steps before it began
                    f.last_step, f.seen_steps = 0, set()
            if tail is None:
                tail = CastTail(path)
                f.tails[stream] = (try_no, tail)
            self._publish(f, stream, tail)

    def _publish(self, f: _Followed, stream: str, tail: CastTail) -> None:
        """The tail's new output as ``PtyOutput``; the agent's ``step N`` markers as ``StepStarted``, in
        order (the output before a marker is published before it)."""
        try:
            events = tail.poll()
        except CastError as exc:
            log.warning("episode %s: stopped following its %s terminal: %s", f.episode_id, stream, exc)
            f.tails[stream] = None
            return
        text: list[str] = []
        for ev in events:
            if ev.code == "o":
                text.append(ev.data)
            elif ev.code == "m" and stream == "agent" and (m := _STEP.match(ev.data)):
                self._output(f, stream, text)
                self._emit(StepStarted(episode_id=f.episode_id, index=int(m.group(1)), marker_time=ev.time))
        self._output(f, stream, text)

    def _output(self, f: _Followed, stream: str, text: list[str]) -> None:
        if text:
            self._emit(PtyOutput(episode_id=f.episode_id, stream=stream, data="".join(text)))
            text.clear()
