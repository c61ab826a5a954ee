"""Building the search index: every finished episode's terminals as text (engine/review/transcript.py),
written to the workspace database (``search_doc`` + FTS5 ``search_fts``, store/queries/search.py).

Two ways in, one function underneath (:func:`build_index`):

- **as episodes finish** — :class:`BackgroundIndexer` subscribes to ``EpisodeFinished`` on the bus a batch
  runs on (``engine/app/episode_hooks.py`` wires one to every batch: ``engine/run/hooks.py``) and indexes
  in its own thread, so a rollout never waits for it; the batch drains it before returning;
- **on first use** — ``bandpass search`` and the TUI's search screen index whatever is missing (episodes
  that finished in another process, an older workspace, a demo), with progress.

Why it survives a crash: each commit writes whole episodes (their documents, their FTS entries and their
``search_state`` row together), and what is pending is computed from ``search_state`` against the
episodes, never remembered elsewhere. A build killed at any point leaves the episodes it committed and
nothing of the rest; the next build does the rest. An episode whose row changed since it was indexed (a
``run --retry`` re-ran it) or that an older transcript version indexed is pending again.
"""

from __future__ import annotations

import hashlib
import json
import logging
import queue
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from ...store.db import session
from ...store.queries import search as sq
from ..core.events import EpisodeFinished, Event, EventBus
from ..core.workspace import Workspace
from ..sandbox.asciicast import CastError, read_cast
from .search_query import index_text
from .transcript import TRANSCRIPT_VERSION, Line, output_transcript, transcript

log = logging.getLogger(__name__)

#: A build commits at least this often (and after ``COMMIT_EPISODES``): a crash loses at most this much.
COMMIT_EVERY_S = 0.5
COMMIT_EPISODES = 200


def facet(kind: str, value: str) -> str:
    """A filter value as one FTS5 token (letters and digits only, whatever the value): ``kind`` + hash."""
    return kind + hashlib.blake2b(value.encode("utf-8"), digest_size=8).hexdigest()


def outcome_class(outcome: str) -> str:
    return outcome.split(":", 1)[0]


def facets_of(task: str, agent: str, outcome: str, terminal: str) -> str:
    return " ".join(
        (
            facet("ta", task),
            facet("ag", agent),
            facet("oc", outcome),
            facet("ok", outcome_class(outcome)),
            facet("te", terminal),
        )
    )


def encode_lines(lines: Sequence[Line]) -> str:
    """Per line: step (None: before any step marker), cast time, frame, kind — parallel arrays."""
    return json.dumps(
        {
            "s": [li.step for li in lines],
            "t": [li.time for li in lines],
            "f": [li.frame for li in lines],
            "k": "".join(li.kind for li in lines),
        },
        separators=(",", ":"),
    )


def decode_lines(body: str, lines_json: str) -> list[Line]:
    """The lines of a stored document (display text, without the index's symbol tokens)."""
    from .search_query import display_text

    meta = json.loads(lines_json)
    texts = body.split("\n") if body else []
    return [
        Line(display_text(t), s, ti, f, k)
        for t, s, ti, f, k in zip(texts, meta["s"], meta["t"], meta["f"], meta["k"], strict=True)
    ]


@dataclass
class EpisodeText:
    """What indexing one episode produced."""

    episode_id: int
    docs: list[sq.DocRow]
    lines: int
    notes: list[str] = field(default_factory=list)


def episode_text(ws: Workspace, src: sq.IndexSource) -> EpisodeText:
    """Replays the episode's casts into lines. A missing or unreadable recording is a note, not an error:
    the rest of the episode is still indexed (and the verifier's stored output stands in for its cast)."""
    out = EpisodeText(src.episode_id, [], 0)
    for terminal, rel in ((sq.AGENT, src.agent_cast), (sq.VERIFIER, src.verifier_cast)):
        lines: list[Line] = []
        if rel:
            path = ws.abs(rel)
            if not path.is_file():
                out.notes.append(f"{terminal} recording missing: {rel}")
            else:
                try:
                    lines = transcript(read_cast(path))
                except (CastError, OSError) as exc:
                    out.notes.append(f"{terminal} recording unreadable: {exc}")
        if terminal == sq.VERIFIER and not lines and src.verifier_output:
            lines = output_transcript(src.verifier_output)
        if not lines:
            continue
        out.docs.append(
            sq.DocRow(
                terminal,
                "\n".join(index_text(li.text) for li in lines),
                facets_of(src.task, src.agent, src.outcome, terminal),
                encode_lines(lines),
            )
        )
        out.lines += len(lines)
    return out


@dataclass
class BuildReport:
    indexed: int = 0
    lines: int = 0
    seconds: float = 0.0
    remaining: int = 0  # still pending when the build stopped (stop set, or more finished meanwhile)
    notes: list[str] = field(default_factory=list)

    @property
    def rate(self) -> float:
        return self.indexed / self.seconds if self.seconds > 0 else 0.0


#: ``progress(done, total)`` after each commit.
Progress = Callable[[int, int], None]


def build_index(
    ws: Workspace,
    *,
    episode_ids: Sequence[int] | None = None,
    progress: Progress | None = None,
    stop: threading.Event | None = None,
    commit_every_s: float = COMMIT_EVERY_S,
    commit_episodes: int = COMMIT_EPISODES,
) -> BuildReport:
    """Indexes the pending episodes (or ``episode_ids``, pending or not), committing whole episodes every
    ``commit_every_s`` seconds or ``commit_episodes`` episodes; stops early when ``stop`` is set."""
    t0 = time.perf_counter()
    report = BuildReport()
    with session(ws.engine) as s:
        ids = list(episode_ids) if episode_ids is not None else sq.pending_episode_ids(s, TRANSCRIPT_VERSION)
    total = len(ids)
    if progress is not None:
        progress(0, total)
    pos = 0  # ids[:pos] are done
    while pos < total and not (stop is not None and stop.is_set()):
        chunk = ids[pos : pos + commit_episodes]
        with session(ws.engine) as s:
            sources = {src.episode_id: src for src in sq.index_sources(s, chunk)}
        batch: list[EpisodeText] = []
        started = time.perf_counter()
        consumed = 0
        for eid in chunk:  # an id without a row (never the case today) is simply passed over
            consumed += 1
            if eid in sources:
                batch.append(episode_text(ws, sources[eid]))
            if time.perf_counter() - started >= commit_every_s or (stop is not None and stop.is_set()):
                break
        with session(ws.engine) as s:
            for text in batch:
                sq.replace_episode(
                    s,
                    text.episode_id,
                    text.docs,
                    version=TRANSCRIPT_VERSION,
                    lines=text.lines,
                    note="; ".join(text.notes),
                )
        for text in batch:
            report.notes.extend(f"episode {text.episode_id}: {n}" for n in text.notes)
            report.lines += text.lines
        report.indexed += len(batch)
        pos += consumed
        if progress is not None:
            progress(pos, total)
    report.seconds = time.perf_counter() - t0
    report.remaining = total - pos
    return report


class BackgroundIndexer:
    """Indexes episodes as they finish, in a daemon thread fed by ``EpisodeFinished`` on ``bus``.

    A failure to index is logged and left for the next build (the episode stays pending); it never
    reaches the rollout. :meth:`close` stops listening and waits (bounded) for what is queued."""

    def __init__(self, ws: Workspace, bus: EventBus) -> None:
        self.ws = ws
        self._queue: queue.Queue[int | None] = queue.Queue()
        self._unsubscribe = bus.subscribe(EpisodeFinished, self._on_finished)
        self._idle = threading.Event()
        self._idle.set()
        self.indexed = 0
        self._thread = threading.Thread(target=self._loop, name="search-indexer", daemon=True)
        self._thread.start()

    def _on_finished(self, ev: Event) -> None:
        if ev.episode_id is not None:
            self._idle.clear()
            self._queue.put(ev.episode_id)

    def _loop(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            ids = [first]
            closing = False
            while True:  # whatever finished meanwhile goes into the same commit
                try:
                    more = self._queue.get_nowait()
                except queue.Empty:
                    break
                if more is None:
                    closing = True
                    break
                ids.append(more)
            try:
                self.indexed += build_index(self.ws, episode_ids=sorted(set(ids))).indexed
            except Exception:  # the episode stays pending: the next search indexes it
                log.exception("search index: could not index episodes %s", ids)
            if self._queue.empty():
                self._idle.set()
            if closing:
                return

    def wait_idle(self, timeout: float | None = None) -> bool:
        """Waits until everything queued so far is indexed."""
        return self._idle.wait(timeout)

    def close(self, timeout: float = 30.0) -> None:
        self._unsubscribe()
        self._queue.put(None)
        self._thread.join(timeout)
