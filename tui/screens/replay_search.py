"""Search inside Replay: land on the frame where a match is visible, highlighted; ``n``/``N`` step through.

Two ways in: the global search screen opens Replay with the episode's hits from the index (Enter on a
hit), and ``/`` in Replay searches the replayed casts themselves — every line they showed, including what
scrolled away (``engine.review.transcript``), so it works for a bare cast file too.

Landing on a hit: the frame comes from the hit's line (``transcript.frame_of``); a line that scrolled past
inside one write is shown mid-write, on the frame where it is on screen. That frame is shown as its own
screen with the matches marked (``TerminalView.set_highlights``) while the player is parked at its time;
the next move of the player (play, seek, step) brings the player's own screen back.

Kept out of tui/screens/replay.py on purpose (that screen is shared work): it holds only a
:class:`ReplaySearch` and three key bindings that call it.
"""

from __future__ import annotations

import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from ...engine.app.replay import INSIDE, Line, find_frame, frame_of, highlight_spans, screen_at
from ...engine.app.replay import transcript as cast_transcript
from ...engine.app.search import Hit, Matcher, QueryError, cast_hits
from ..widgets.search_bar import SearchBar
from ..widgets.terminal_view import TerminalView
from ..widgets.timeline import fmt_time

if TYPE_CHECKING:
    from textual.screen import Screen

    from ...engine.app.replay import Player, ReplaySource


class ReplayHost(Protocol):
    """What the search asks of the Replay screen it serves, beyond Textual's ``Screen``: named here so
    this module never imports the screen that imports it (tui/screens/replay.py checks it gives all of it)."""

    source: ReplaySource
    players: dict[str, Player]
    active: str
    _generations: dict[str, int]

    @property
    def player(self) -> Player | None: ...

    def action_switch_cast(self) -> None: ...

    def _refresh_status(self) -> None: ...


def clock(t: float | None) -> str:
    """A cast time to the hundredth under a minute (demo casts are short), else as the timeline shows it."""
    if t is None:
        return "—"
    return f"{t:.2f} s" if t < 60 else fmt_time(t)


@dataclass
class SearchHits:
    """A query's hits in one episode, in order (agent's first), and the one to show first."""

    query: str
    hits: list[Hit]
    current: int = 0


class ReplaySearch:
    """The search state of one Replay screen."""

    def __init__(self, screen: Screen[Any], initial: SearchHits | None = None) -> None:
        self.screen = screen
        self.host = typing.cast("ReplayHost", screen)
        self.matcher: Matcher | None = None
        self.hits: list[Hit] = []
        self.at = -1
        self._initial = initial
        self._lines: dict[str, list[Line]] = {}  # transcripts of the casts, made on the first / search

    @property
    def bar(self) -> SearchBar:
        return self.screen.query_one(SearchBar)

    def mounted(self) -> None:
        """Lands on the hit Replay was opened for (from the search screen)."""
        initial, self._initial = self._initial, None
        if initial is None or not initial.hits:
            return
        try:
            self.matcher = Matcher.of(initial.query)
        except QueryError as exc:
            self.screen.notify(str(exc), severity="error")
            return
        self.hits = list(initial.hits)
        self.bar.show_status("", query=initial.query)
        self.land(min(max(initial.current, 0), len(self.hits) - 1))

    def open_bar(self) -> None:
        self.bar.open(self.matcher.query if self.matcher else "")

    def run(self, query: str) -> None:
        """Searches the casts being replayed (in a worker: a long cast takes a moment to read)."""
        try:
            matcher = Matcher.of(query)
        except QueryError as exc:
            self.bar.show_status(f"query: {exc}")
            return
        self.bar.show_status(f"searching for {query}…")
        players = {k: p.index.cast for k, p in self.host.players.items()}

        def work() -> None:
            for kind, cast in players.items():
                if kind not in self._lines:
                    self._lines[kind] = cast_transcript(cast)
            hits = cast_hits(self._lines, matcher, episode_id=self.host.source.episode_id)
            self.screen.app.call_from_thread(self._found, matcher, hits)

        self.screen.run_worker(work, thread=True, group="replay-search", exclusive=True, exit_on_error=False)

    def _found(self, matcher: Matcher, hits: list[Hit]) -> None:
        self.matcher, self.hits = matcher, hits
        if not hits:
            self.at = -1
            self.bar.show_status(f"no match for {matcher.query} in this recording (/ to search again)")
            return
        player = self.host.player
        here = player.position if player is not None else 0.0
        active = self.host.active
        later = [
            n for n, h in enumerate(hits) if h.terminal == active and h.time is not None and h.time >= here
        ]
        self.land(later[0] if later else 0)

    def step(self, delta: int) -> None:
        if not self.hits:
            self.screen.notify("no search hits: / searches this recording", timeout=3)
            return
        self.land((self.at + delta) % len(self.hits))

    def land(self, n: int) -> None:
        """Shows hit ``n`` on the frame where it is visible, its matches highlighted."""
        screen, host = self.screen, self.host
        hit = self.hits[n]
        self.at = n
        kind = hit.terminal
        where = self._where(n)
        if kind not in host.players:
            self.bar.show_status(f"{where} · no {kind} recording to show it in")
            return
        if kind != host.active:
            host.action_switch_cast()
        player = host.players[kind]
        index = player.index
        frame = frame_of(index, hit.line) or find_frame(index, hit.text)
        if frame is None:
            self.bar.show_status(f"{where} · not found in the recording (was it replaced since indexing?)")
            return
        player.pause()
        player.seek(frame.time)
        shown = screen_at(index, frame)
        view = screen.query_one(f"#view-{kind}", TerminalView)
        view.set_screen(shown)
        assert self.matcher is not None
        view.set_highlights(highlight_spans(shown, self.matcher))
        # The player's own screen comes back at its next move (ReplayScreen._sync_view re-attaches a
        # screen whose generation it has not seen).
        host._generations[kind] = -1
        host._refresh_status()
        self.bar.show_status(where + " · n/N: next/previous")

    def _where(self, n: int) -> str:
        hit = self.hits[n]
        step = f"step {hit.step}" if hit.step is not None else "no step"
        t = clock(hit.time)
        inside = " · scrolled past (shown mid-write)" if hit.line.kind == INSIDE else ""
        query = self.matcher.query if self.matcher else ""
        return f"{query}: match {n + 1} of {len(self.hits)} · {hit.terminal} · {step} · {t}{inside}"
