"""Replay of asciicast recordings: a keyframe index for instant seek and a UI-free player clock.

Why keyframes: even at the native emulator's 20-170 MB/s (bench/BENCHMARKS.md) rebuilding the screen of
a one-hour, 24 MB agent session from the first byte takes up to a second, and a curator scrubbing a timeline
seeks dozens of times a minute. A restored keyframe decodes none of its rows until a repaint reads the
ones a pane shows (``engine.sandbox.emulator``).

Memory: keyframes are kept zlib-compressed (~5x smaller; inflating one is part of its ~0.3 ms restore)
and the cast's events are the reader's compact :class:`~engine.sandbox.asciicast.EventLog`; the index
scans codes, times and lengths without inflating any event data, so a 30 MB one-hour cast read, indexed
and seeked costs ~8 MB (bench/bench_seek.py). One pass over the cast takes an emulator snapshot every
``KEYFRAME_EVERY`` characters of output and right after every marker (the places a curator jumps to
most: step boundaries); a seek then restores the nearest keyframe at or before the target (~0.3 ms) and
feeds at most ``KEYFRAME_EVERY`` characters. The index can be built incrementally, in a background
thread, while the player already works: until it is complete, a seek simply starts from the furthest
keyframe built so far, which is still correct, only slower. A complete index is saved beside its cast
(:meth:`KeyframeIndex.save`, keyframes are snapshot bytes) and read back by :meth:`KeyframeIndex.open`.

Why a UI-free player: the Replay screen, ``bandpass replay --print-at`` and the tests all drive the same
:class:`Player`, so what the tests prove (seeking to t shows exactly what playing to t shows) is what
the curator sees.

Event times are taken as a running maximum: casts merged by other tools (Terminal-Bench inserts its
markers after the fact) can carry a time slightly smaller than the event before it, and the screen at
time t must be "every event up to here in file order", never a reordering.
"""

from __future__ import annotations

import bisect
import gc
import hashlib
import json
import re
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..core.errors import BandpassError
from ..sandbox.asciicast import Cast, CastEvent, EventLog
from ..sandbox.emulator import Screen, ScreenSnapshot, SnapshotError

if TYPE_CHECKING:
    from ..core.workspace import Workspace

#: Output characters between two keyframes. At ~2-5 MB/s ingest this bounds the replay a seek does to
#: ~15-30 ms, and a 20 MB cast holds ~320 keyframes of a few tens of KB each.
KEYFRAME_EVERY = 64 * 1024
#: Playback speeds offered by faster/slower, in order.
SPEEDS: tuple[float, ...] = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0, 16.0)
#: Events whose application changes the screen: frame-step moves between these.
VISUAL = frozenset({"o", "r"})

_STEP_LABEL = re.compile(r"^\s*step[\s#:_-]*(\d+)\s*$", re.IGNORECASE)
_SIZE = re.compile(r"^\s*(\d+)\s*x\s*(\d+)\s*$")


def step_of_label(label: str) -> int | None:
    """The step number of a Bandpass marker (``"step 3"``); None for other tools' labels."""
    m = _STEP_LABEL.match(label)
    return int(m.group(1)) if m else None


@dataclass(frozen=True, slots=True)
class Marker:
    time: float
    label: str
    event_index: int  # index of the "m" event in the cast
    step: int | None  # parsed from a "step N" label, None for foreign markers


@dataclass(frozen=True, slots=True)
class Keyframe:
    """The screen after applying ``events[:event_index]``."""

    event_index: int
    time: float
    snapshot: ScreenSnapshot


def _items(events: Sequence[CastEvent], start: int, end: int) -> Iterator[tuple[str, str]]:
    if isinstance(events, EventLog):
        return events.items(start, end)
    return ((events[i].code, events[i].data) for i in range(start, end))


def apply_events(screen: Screen, events: Sequence[CastEvent], start: int, end: int) -> None:
    """Feeds ``events[start:end]`` into ``screen``, joining runs of output into one feed call (per-call
    overhead dominates on casts made of many tiny writes)."""
    buf: list[str] = []
    for code, data in _items(events, start, end):
        if code == "o":
            buf.append(data)
        elif code == "r":
            m = _SIZE.match(data)
            if m and int(m.group(1)) > 0 and int(m.group(2)) > 0:
                if buf:
                    screen.feed("".join(buf))
                    buf = []
                screen.resize(int(m.group(1)), int(m.group(2)))
    if buf:
        screen.feed("".join(buf))


#: Version of the saved keyframe index file (bump when the layout or the emulator's snapshot changes).
INDEX_FORMAT = "bandpass-keyframes-2/libghostty-vt-0.1.3"  # 2: keyframes zlib-compressed


def index_path(cast_path: Path) -> Path:
    """Where a cast's keyframe index is kept: beside it, ``agent.cast`` -> ``agent.cast.kfi``."""
    return cast_path.with_name(cast_path.name + ".kfi")


#: Where indexes of casts from outside the workspace are kept, under the workspace root.
INDEX_CACHE = Path("cache") / "keyframes"


def index_path_in(workspace_root: Path | None, cast_path: Path) -> Path | None:
    """Where the keyframe index of ``cast_path`` lives: beside a cast the workspace holds (its own
    recordings), in the workspace's ``cache/keyframes/`` for any other cast — never beside a file of the
    curator's — and nowhere (built in memory, not saved) without a workspace."""
    if workspace_root is None:
        return None
    root = Path(workspace_root).resolve()
    cast = Path(cast_path).resolve()
    if cast.is_relative_to(root):
        return index_path(cast)
    digest = hashlib.sha1(str(cast).encode()).hexdigest()[:16]
    return root / INDEX_CACHE / f"{cast.name}.{digest}.kfi"


class KeyframeIndex:
    """Emulator snapshots along one cast; thread-safe to build in one thread while others seek."""

    def __init__(self, cast: Cast, *, every: int = KEYFRAME_EVERY) -> None:
        if every < 1:
            raise ValueError(f"keyframe spacing must be positive, got {every}")
        self.cast = cast
        self.events = cast.events
        self.every = every
        events = self.events
        if isinstance(events, EventLog):  # read without inflating the recorded data
            codes, raw_times, lengths = events.codes, events.times(), events.lengths()
        else:
            codes = [e.code for e in events]
            raw_times = [e.time for e in events]
            lengths = [len(e.data) for e in events]
        #: Each event's code (``codes[i] == events[i].code``), for scans that need no data.
        self.codes: Sequence[str] = codes
        self.times: list[float] = []
        self.offsets: list[int] = [0]  # offsets[i]: output characters in events[:i]
        now = 0.0
        total = 0
        for t, code, length in zip(raw_times, codes, lengths, strict=True):
            now = max(now, t)
            self.times.append(now)
            if code == "o":
                total += length
            self.offsets.append(total)
        self.duration = now
        self.markers: list[Marker] = []
        for i, code in enumerate(codes):
            if code == "m":
                label = events[i].data
                self.markers.append(Marker(self.times[i], label, i, step_of_label(label)))
        self.marker_times = [m.time for m in self.markers]
        self._lock = threading.Lock()
        self._builder = Screen(cast.cols, cast.rows)
        self._kf_index: list[int] = [0]
        self.keyframes: list[Keyframe] = [Keyframe(0, 0.0, self._builder.snapshot().packed())]
        self._built = 0  # events[:_built] have been fed to the builder screen

    # --- building --- #

    @property
    def complete(self) -> bool:
        return self._built >= len(self.events)

    @property
    def progress(self) -> float:
        """Fraction of output characters indexed so far (what build time is proportional to)."""
        total = self.offsets[-1]
        return 1.0 if self.complete or total == 0 else self.offsets[self._built] / total

    def build(self, *, budget_s: float | None = None, cancel: threading.Event | None = None) -> bool:
        """Indexes more of the cast; stops after ``budget_s`` seconds (None: until done) or on ``cancel``.
        Returns whether the index is complete. Safe to call repeatedly from one thread."""
        deadline = None if budget_s is None else time.monotonic() + budget_s
        events, codes = self.events, self.codes
        last_kf_offset = self.offsets[self._kf_index[-1]]
        i = self._built
        n = len(events)
        while i < n:
            if cancel is not None and cancel.is_set():
                break
            # Feed up to the next keyframe boundary: the next marker or `every` characters further.
            j = i
            while j < n:
                code = codes[j]
                j += 1
                if code == "m" or self.offsets[j] - last_kf_offset >= self.every:
                    break
            apply_events(self._builder, events, i, j)
            i = j
            self._built = i
            at_marker = codes[i - 1] == "m"
            if (at_marker or self.offsets[i] - last_kf_offset >= self.every) and i != self._kf_index[-1]:
                try:
                    kf: Keyframe | None = Keyframe(i, self.times[i - 1], self._builder.snapshot().packed())
                except SnapshotError:  # rare native refusal: no keyframe here, seeks stay exact
                    kf = None
                if kf is not None:
                    with self._lock:
                        self.keyframes.append(kf)
                        self._kf_index.append(i)
                last_kf_offset = self.offsets[i]
            if deadline is not None and time.monotonic() >= deadline:
                break
        return self.complete

    # --- persistence --- #

    def save(self, path: Path) -> bool:
        """Writes a complete index beside its cast, so re-opening the cast seeks at once (no rebuild).
        Keyframes are libghostty-vt snapshots (bytes). Best effort: returns False when it cannot write."""
        if not self.complete:
            return False
        with self._lock:
            frames = list(self.keyframes)
        header = {
            "format": INDEX_FORMAT,
            "events": len(self.events),
            "output_chars": self.offsets[-1],
            "every": self.every,
            "frames": [
                [
                    k.event_index,
                    k.time,
                    k.snapshot.cols,
                    k.snapshot.rows,
                    len(k.snapshot.data),
                    k.snapshot.pending,
                ]
                for k in frames
            ],
        }
        blob = json.dumps(header).encode() + b"\n" + b"".join(k.snapshot.data for k in frames)
        tmp = path.with_name(path.name + ".tmp")
        try:
            path.parent.mkdir(parents=True, exist_ok=True)  # the workspace's cache/keyframes/
            tmp.write_bytes(blob)
            tmp.replace(path)
        except OSError:
            return False
        return True

    @classmethod
    def open(cls, cast: Cast, path: Path | None, *, every: int = KEYFRAME_EVERY) -> KeyframeIndex:
        """The index of ``cast``: read from ``path`` when a saved one matches this cast, else a new one to
        build. A stale, foreign or damaged file is ignored (and later overwritten), never trusted."""
        index = cls(cast, every=every)
        if path is None:
            return index
        try:
            raw = path.read_bytes()
            head, _, body = raw.partition(b"\n")
            header = json.loads(head)
            if (
                header.get("format") != INDEX_FORMAT
                or header.get("events") != len(index.events)
                or header.get("output_chars") != index.offsets[-1]
            ):
                return index
            frames: list[Keyframe] = []
            pos = 0
            for ev_index, t, cols, rows, size, pending in header["frames"]:
                data = body[pos : pos + size]
                if len(data) != size:
                    return index
                pos += size
                snapshot = ScreenSnapshot(data, cols, rows, pending, compressed=True)
                frames.append(Keyframe(int(ev_index), float(t), snapshot))
        except (OSError, ValueError, KeyError, TypeError):
            return index
        if not frames or frames[0].event_index != 0:
            return index
        index.keyframes = frames
        index._kf_index = [k.event_index for k in frames]
        index._built = len(index.events)
        return index

    # --- seeking --- #

    def index_at(self, t: float) -> int:
        """How many events are applied at cast time ``t``: every event whose time is <= t."""
        return bisect.bisect_right(self.times, t)

    def keyframe_for(self, n: int) -> Keyframe:
        """The last keyframe at or before ``events[:n]``."""
        with self._lock:
            k = bisect.bisect_right(self._kf_index, n) - 1
            return self.keyframes[max(k, 0)]

    def screen_at_index(self, n: int) -> Screen:
        """A new screen showing ``events[:n]``: restore the nearest keyframe, feed the rest."""
        n = max(0, min(n, len(self.events)))
        kf = self.keyframe_for(n)
        screen = Screen.restore(kf.snapshot)
        apply_events(screen, self.events, kf.event_index, n)
        return screen

    def screen_at(self, t: float) -> Screen:
        return self.screen_at_index(self.index_at(t))

    def time_of(self, n: int) -> float:
        """Cast time of the state ``events[:n]``."""
        return self.times[n - 1] if n > 0 else 0.0


def settle_gc() -> None:
    """Moves every object alive now out of the cyclic garbage collector's reach (``gc.freeze``).

    Why: a full collection walks every tracked object while holding the GIL, and a seek that happens to
    trigger one stalls (0.3-0.8 s measured when keyframes were Python objects; bench/BENCHMARKS.md,
    "Seek"). Keyframes are now compressed bytes and a cast's events sit in arrays, which the collector
    does not track, but an application's own start-up objects remain. Frozen objects are still freed by
    reference counting; only cyclic garbage among them would wait. Call it once an index is complete,
    from the application (it is process-wide), never from library code paths that run per seek.
    """
    gc.freeze()


def replay_from_start(cast: Cast, t: float) -> Screen:
    """The reference the keyframe seek must equal (and the benchmark's baseline): feed everything up to
    ``t`` into a fresh screen."""
    screen = Screen(cast.cols, cast.rows)
    events = cast.events
    times = events.times() if isinstance(events, EventLog) else [e.time for e in events]
    now = 0.0
    end = 0
    for i, at in enumerate(times):
        now = max(now, at)
        if now > t:
            break
        end = i + 1
    apply_events(screen, events, 0, end)
    return screen


@dataclass
class TickResult:
    changed: bool = False  # the screen content may differ: redraw
    paused_at: Marker | None = None  # playback stopped at this marker (pause-at-markers)
    ended: bool = False


@dataclass
class Player:
    """The clock and state of one cast's playback. Pure logic: a UI calls :meth:`tick` from a timer.

    ``screen`` can be *replaced* by a seek (a keyframe restore yields a new Screen object);
    ``screen_generation`` increments when it is, so a view knows to re-attach.
    """

    index: KeyframeIndex
    idle_limit: float | None = None
    pause_at_markers: bool = False
    speed: float = 1.0
    playing: bool = False
    position: float = 0.0
    screen: Screen = field(init=False)
    screen_generation: int = field(default=0, init=False)
    applied: int = field(default=0, init=False)  # events[:applied] are on the screen
    on_seek: list[Callable[[float], None]] = field(default_factory=list, repr=False)

    def __post_init__(self) -> None:
        self.screen = Screen(self.index.cast.cols, self.index.cast.rows)
        if self.idle_limit is None:
            limit = self.index.cast.header.get("idle_time_limit")
            if isinstance(limit, int | float) and not isinstance(limit, bool) and limit > 0:
                self.idle_limit = float(limit)

    @classmethod
    def for_cast(cls, cast: Cast, **kwargs: Any) -> Player:
        return cls(KeyframeIndex(cast), **kwargs)

    # --- facts --- #

    @property
    def duration(self) -> float:
        return self.index.duration

    @property
    def markers(self) -> list[Marker]:
        return self.index.markers

    @property
    def at_end(self) -> bool:
        return self.applied >= len(self.index.events) and self.position >= self.duration

    def current_marker(self) -> Marker | None:
        """The last marker at or before the playhead: the step being shown."""
        k = bisect.bisect_right(self.index.marker_times, self.position) - 1
        return self.markers[k] if k >= 0 else None

    # --- transport --- #

    def play(self) -> None:
        if self.at_end:
            self.seek(0.0)
        self.playing = True

    def pause(self) -> None:
        self.playing = False

    def toggle(self) -> None:
        if self.playing:
            self.pause()
        else:
            self.play()

    def faster(self) -> float:
        self.speed = next((s for s in SPEEDS if s > self.speed), SPEEDS[-1])
        return self.speed

    def slower(self) -> float:
        self.speed = next((s for s in reversed(SPEEDS) if s < self.speed), SPEEDS[0])
        return self.speed

    # --- seeking --- #

    def _go_to_index(self, n: int) -> None:
        idx = self.index
        n = max(0, min(n, len(idx.events)))
        if n >= self.applied and idx.keyframe_for(n).event_index <= self.applied:
            apply_events(self.screen, idx.events, self.applied, n)  # the current state is closest
        else:
            self.screen = idx.screen_at_index(n)
            self.screen_generation += 1
        self.applied = n

    def seek(self, t: float) -> None:
        """Shows the screen at cast time ``t`` (clamped to the cast)."""
        t = max(0.0, min(float(t), self.duration))
        self._go_to_index(self.index.index_at(t))
        self.position = t
        for cb in self.on_seek:
            cb(t)

    def skip(self, delta: float) -> None:
        self.seek(self.position + delta)

    def seek_fraction(self, fraction: float) -> None:
        self.seek(self.duration * max(0.0, min(1.0, fraction)))

    def next_marker(self) -> Marker | None:
        m = next((m for m in self.markers if m.time > self.position + 1e-6), None)
        if m is not None:
            self.seek(m.time)
        return m

    def prev_marker(self) -> Marker | None:
        m = next((m for m in reversed(self.markers) if m.time < self.position - 1e-6), None)
        self.seek(m.time if m is not None else 0.0)
        return m

    def seek_step(self, step: int) -> Marker | None:
        m = next((m for m in self.markers if m.step == step), None)
        if m is not None:
            self.seek(m.time)
        return m

    def frame_forward(self) -> None:
        """Applies events up to and including the next one that changes the screen."""
        codes = self.index.codes
        k = next((i for i in range(self.applied, len(codes)) if codes[i] in VISUAL), None)
        if k is None:
            self.seek(self.duration)
            return
        self._go_to_index(k + 1)
        self.position = self.index.times[k]

    def frame_back(self) -> None:
        """Goes back to just before the last screen-changing event shown."""
        codes = self.index.codes
        k = next((i for i in range(self.applied - 1, -1, -1) if codes[i] in VISUAL), None)
        if k is None:
            self.seek(0.0)
            return
        self._go_to_index(k)
        self.position = self.index.time_of(k)

    # --- playing --- #

    def tick(self, dt: float) -> TickResult:
        """Advances the clock by ``dt`` wall seconds at the current speed and applies what came due.

        Idle gaps longer than ``idle_limit`` (cast time) are shortened to the limit, as ``asciinema play
        -i`` does; with ``pause_at_markers`` playback stops right after crossing a marker.
        """
        res = TickResult()
        if not self.playing or dt <= 0:
            return res
        idx = self.index
        events, times = idx.events, idx.times
        n = len(events)
        remaining = dt * self.speed
        start_applied = self.applied
        while remaining > 0:
            if self.applied >= n:
                self.position = min(self.position + remaining, self.duration)
                break
            nxt = times[self.applied]
            last = idx.time_of(self.applied)
            if self.idle_limit is not None and nxt - last > self.idle_limit:
                idle_end = last + self.idle_limit
                if self.position < idle_end:
                    step = min(remaining, idle_end - self.position)
                    self.position += step
                    remaining -= step
                    if remaining <= 0:
                        break
                self.position = max(self.position, nxt)  # the rest of the gap costs nothing
            else:
                step = min(remaining, nxt - self.position)
                self.position += max(step, 0.0)
                remaining -= max(step, 0.0)
                if self.position < nxt:
                    break
            # Apply everything due now, stopping after a marker when asked to.
            end = bisect.bisect_right(times, self.position, lo=self.applied)
            if self.pause_at_markers:
                for i in range(self.applied, end):
                    if idx.codes[i] == "m":
                        end = i + 1
                        res.paused_at = next(m for m in idx.markers if m.event_index == i)
                        break
            apply_events(self.screen, events, self.applied, end)
            self.applied = end
            if res.paused_at is not None:
                self.position = res.paused_at.time
                self.playing = False
                break
        res.changed = self.applied != start_applied
        if self.applied >= n and self.position >= self.duration:
            self.position = self.duration
            self.playing = False
            res.ended = True
        return res


# --- what to replay ---------------------------------------------------------------------------------


@dataclass
class StepView:
    """What the step panel shows for one policy step (parsed once from its Step row)."""

    index: int
    marker_time: float
    analysis: str = ""
    plan: str = ""
    keystrokes: list[str] = field(default_factory=list)
    task_complete: bool = False
    notes: list[str] = field(default_factory=list)
    observation: str = ""
    raw_reply: str = ""
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    cuts: list[dict[str, object]] = field(default_factory=list)


def time_of_text(index: KeyframeIndex, text: str) -> float | None:
    """The cast time by which ``text`` (its last non-blank line; escape sequences and whitespace runs
    ignored) has been printed, or None when the cast never prints it. Why: a diagnosis cites the
    verifier's failing check by its output line, not by a time (the verifier has no step markers);
    Replay's ``e`` seeks the verifier's terminal to where that line appears."""
    from .text import strip_controls

    lines = [ln for ln in text.splitlines() if ln.strip()]
    if not lines:
        return None
    needle = " ".join(lines[-1].split())[:120]
    seen = ""
    keep = 4 * len(needle) + 256
    for i, ev in enumerate(index.events):
        if ev.code != "o":
            continue
        seen = (seen + strip_controls(ev.data))[-keep:]
        if needle in " ".join(seen.split()):
            return index.times[i]
    return None


@dataclass(frozen=True)
class TaskStepView:
    """One task step of a multi-step episode (Harbor's ``[[steps]]``): where its marker is in the agent's
    cast (``task step N/M: name``) and what its own verifier said."""

    position: int
    name: str
    outcome: str
    reward: float | None
    marker_time: float
    verifier_cast: Path | None = None

    def label(self, total: int) -> str:
        reward = "" if self.reward is None else f" {self.reward:g}"
        return f"task step {self.position + 1}/{total} {self.name}: {self.outcome}{reward}"


@dataclass
class ReplaySource:
    """An episode's recordings and evidence, or a bare cast file (then only ``agent_cast`` is set)."""

    title: str
    agent_cast: Path | None = None
    verifier_cast: Path | None = None
    episode_id: int | None = None
    outcome: str = ""
    reward: float | None = None
    verifier_output: str = ""
    steps: list[StepView] = field(default_factory=list)
    attribution: str = ""  # who ended the sandbox (engine/sandbox/attribution/), "" when nobody did
    #: A multi-step task's steps (their markers sit beside the policy's ``step K`` markers); [] otherwise
    task_steps: list[TaskStepView] = field(default_factory=list)

    def task_step_at(self, t: float) -> TaskStepView | None:
        """The task step running at agent-cast time ``t`` (the last one whose marker is at or before it)."""
        ran = [ts for ts in self.task_steps if ts.outcome != "skipped"]
        k = bisect.bisect_right([ts.marker_time for ts in ran], t) - 1
        return ran[k] if k >= 0 else None

    def step_at(self, t: float) -> StepView | None:
        """The step whose marker is the last one at or before cast time ``t``."""
        times = [s.marker_time for s in self.steps]
        k = bisect.bisect_right(times, t) - 1
        return self.steps[k] if k >= 0 else None


def _step_view(row: object) -> StepView:
    def loads(text: str, default: object) -> object:
        try:
            return json.loads(text or "")
        except ValueError:
            return default

    action = loads(getattr(row, "action_json", "{}"), {})
    action = action if isinstance(action, dict) else {}
    commands = action.get("commands") or []
    keys = [str(c.get("keystrokes", "")) for c in commands if isinstance(c, dict)]
    if not keys and isinstance(action.get("keystrokes"), str):
        keys = [action["keystrokes"]]  # built-in agents record a bare {"keystrokes": ...}
    cuts = loads(getattr(row, "cuts_json", "[]"), [])
    return StepView(
        index=int(getattr(row, "index", 0)),
        marker_time=float(getattr(row, "marker_time", 0.0)),
        analysis=str(action.get("analysis", "")),
        plan=str(action.get("plan", "")),
        keystrokes=keys,
        task_complete=bool(action.get("task_complete", False)),
        notes=[str(n) for n in action.get("notes", []) or []]
        + [f"{k}: {action[k]}" for k in ("parse_error", "error") if action.get(k)]
        + _attempts_note(loads(getattr(row, "attempts_json", "[]"), [])),
        observation=str(getattr(row, "observation", "")),
        raw_reply=str(getattr(row, "raw_reply", "")),
        prompt_tokens=int(getattr(row, "prompt_tokens", 0)),
        completion_tokens=int(getattr(row, "completion_tokens", 0)),
        latency_s=float(getattr(row, "latency_s", 0.0)),
        cuts=[c for c in cuts if isinstance(c, dict)] if isinstance(cuts, list) else [],
    )


def _attempts_note(attempts: object) -> list[str]:
    """One line when a step needed more than one request: a slow or flaky server's cost, visible."""
    if not isinstance(attempts, list) or len(attempts) < 2:
        return []
    parts = [str(a.get("error") or "ok") for a in attempts if isinstance(a, dict)]
    total = sum(
        float(a.get("latency_s", 0)) + float(a.get("wait_s", 0)) for a in attempts if isinstance(a, dict)
    )
    return [f"requests: {len(parts)} ({', '.join(parts)}), {total:.1f} s in all"]


class ReplaySourceError(BandpassError, ValueError):
    """Nothing to replay under that name; the message says what was looked for."""


def load_source(ws: Workspace | None, ref: str | int | Path) -> ReplaySource:
    """``ref`` is an episode id (needs a workspace) or a path to a ``.cast`` file."""
    path = Path(str(ref)).expanduser()
    if path.is_file() or not str(ref).strip().isdigit():
        if not path.is_file():
            raise ReplaySourceError(f"{ref}: no such cast file (and not an episode id)")
        return ReplaySource(title=path.name, agent_cast=path)
    if ws is None:
        raise ReplaySourceError(f"episode {ref}: no workspace to look it up in")
    from ...store import queries
    from ...store.db import session

    eid = int(str(ref))
    with session(ws.engine) as s:
        ep = queries.get_episode(s, eid)
        if ep is None:
            raise ReplaySourceError(f"episode {eid} does not exist in {ws.root}")
        name = queries.episode_task_name(s, eid)
        rows = queries.steps(s, eid)
        from ...store.queries import task_steps as task_steps_store

        task_rows = task_steps_store.task_steps(s, eid)
    from ..sandbox.attribution import summary as attribution_line

    why = attribution_line(ep.evidence_json)
    by = f" (by {why.split(':', 1)[0]})" if why else ""
    return ReplaySource(
        title=f"episode {eid} · {name} · {ep.agent} · {ep.outcome or ep.status}{by}",
        attribution=why,
        agent_cast=ws.abs(ep.agent_cast) if ep.agent_cast else None,
        verifier_cast=ws.abs(ep.verifier_cast) if ep.verifier_cast else None,
        episode_id=eid,
        outcome=ep.outcome,
        reward=ep.reward,
        verifier_output=ep.verifier_output,
        steps=sorted((_step_view(r) for r in rows), key=lambda v: (v.marker_time, v.index)),
        task_steps=[
            TaskStepView(
                position=t.position,
                name=t.name,
                outcome=t.outcome,
                reward=t.reward,
                marker_time=t.marker_time,
                verifier_cast=ws.abs(t.verifier_cast) if t.verifier_cast else None,
            )
            for t in task_rows
        ],
    )
