"""Searching the index: which episodes showed this text, where (terminal, step, cast time, frame), ranked.

One function, :func:`search`, serves ``bandpass search``, the TUI's search screen and the tests. The
ranking is FTS5's bm25 over one document per (episode, terminal); an episode ranks by its better
terminal. bm25 costs every match a score and, for a phrase, a pass over all its matches for the phrase's
document frequency; even counting the matches is a pass over them: ~0.2 s and ~30 ms for a word in each of
100,000 episodes (bench/bench_search.py). A query that common ranks nothing useful anyway, so the matches
are counted up to :data:`RANK_ALL` (``matched_docs``, ``matched_more`` beyond), ranked by bm25 up to it,
and above it the newest episodes come first (``ranked_by``): a query costs the same at 100,000 episodes as
at 10,000. Within an episode, the hits are the lines the whole query holds on, in the order they appeared,
each with a line of context either side.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from ...store.db import session
from ...store.queries import search as sq
from ..core.workspace import Workspace
from .search_index import decode_lines, facet, outcome_class
from .search_query import Matcher, QueryError
from .transcript import INSIDE, KINDS, TYPED, Line, iter_matches

#: Up to this many matching documents are ranked by bm25; above it, the newest come first (module doc).
RANK_ALL = 5000
BM25, NEWEST = "bm25", "newest"
CONTEXT = 1
#: Hits kept per terminal of an episode (a word on every prompt of a 2,000-step episode would be 2,000).
MAX_HITS = 100


@dataclass(frozen=True)
class Filters:
    task: str | None = None
    agent: str | None = None
    model: str | None = None  # a policy run's agent is its model's name: the same column as ``agent``
    outcome: str | None = None  # exact (``agent_error:turn_limit``) or a class (``agent_error``, ``failed``)
    terminal: str | None = None  # agent | verifier

    def __post_init__(self) -> None:
        if self.terminal is not None and self.terminal not in sq.TERMINALS:
            raise QueryError(f"terminal: expected agent or verifier, got {self.terminal!r}")

    def fts(self) -> list[str]:
        out: list[str] = []
        if self.task:
            out.append(facet("ta", self.task))
        for who in {w for w in (self.agent, self.model) if w}:
            out.append(facet("ag", who))
        if self.outcome:
            o = self.outcome
            out.append(facet("oc", o) if ":" in o else facet("ok", outcome_class(o)))
        if self.terminal:
            out.append(facet("te", self.terminal))
        return out

    def describe(self) -> str:
        parts = [
            f"{k} {v}"
            for k, v in (
                ("task", self.task),
                ("agent", self.agent),
                ("model", self.model),
                ("outcome", self.outcome),
                ("terminal", self.terminal),
            )
            if v
        ]
        return ", ".join(parts)


@dataclass
class Hit:
    """One matching line: where it was shown and what surrounded it."""

    episode_id: int
    terminal: str
    line: Line
    before: list[str] = field(default_factory=list)
    after: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return self.line.text

    @property
    def step(self) -> int | None:
        return self.line.step

    @property
    def time(self) -> float | None:
        return self.line.time if self.line.frame >= 0 else None

    def as_dict(self) -> dict[str, Any]:
        return {
            "terminal": self.terminal,
            "step": self.step,
            "time": self.time,
            "kind": KINDS.get(self.line.kind, self.line.kind),
            "line": self.text,
            "before": self.before,
            "after": self.after,
            "frame": self.line.frame,
        }


@dataclass
class EpisodeHits:
    episode_id: int
    task: str
    agent: str
    outcome: str
    score: float  # bm25 of its best terminal: lower is better
    hits: list[Hit]

    def as_dict(self) -> dict[str, Any]:
        return {
            "episode": self.episode_id,
            "task": self.task,
            "agent": self.agent,
            "outcome": self.outcome,
            "score": round(self.score, 4),
            "hits": [h.as_dict() for h in self.hits],
        }


@dataclass
class SearchResult:
    query: str
    matcher: Matcher
    filters: Filters
    episodes: list[EpisodeHits]
    matched_docs: int  # documents (episode terminals) matching, counted up to RANK_ALL
    matched_more: bool  # more than RANK_ALL match
    ranked_by: str  # BM25 (every match ranked) or NEWEST (too many matches: newest episodes first)
    seconds: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return {
            "query": self.query,
            "fts": self.matcher.fts,
            "filters": self.filters.describe(),
            "matched_terminals": self.matched_docs,
            "more_than": RANK_ALL if self.matched_more else None,
            "ranked_by": self.ranked_by,
            "episodes": [e.as_dict() for e in self.episodes],
            "seconds": round(self.seconds, 4),
        }


def fts_expression(matcher: Matcher, filters: Filters) -> str:
    expr = f"body : {matcher.fts}"
    extra = filters.fts()
    if extra:
        expr += " AND facets : (" + " AND ".join(f'"{t}"' for t in extra) + ")"
    return expr


def hits_in(matcher: Matcher, episode_id: int, terminal: str, lines: Sequence[Line]) -> list[Hit]:
    """The lines of one document the query holds on (see ``transcript.iter_matches``), with context: the
    neighbouring lines of the same sort (screen text beside screen text, typed keys beside typed keys)."""
    position = {id(li): n for n, li in enumerate(lines)}
    out: list[Hit] = []
    for li in iter_matches(list(lines), matcher):
        if len(out) >= MAX_HITS:
            break
        n = position[id(li)]
        typed = li.kind == TYPED
        before = [x.text for x in lines[max(0, n - CONTEXT) : n] if (x.kind == TYPED) == typed]
        after = [x.text for x in lines[n + 1 : n + 1 + CONTEXT] if (x.kind == TYPED) == typed]
        out.append(Hit(episode_id, terminal, li, before, after))
    return out


def search(
    ws: Workspace,
    query: str | Matcher,
    *,
    filters: Filters | None = None,
    limit: int = 20,
) -> SearchResult:
    """The ``limit`` best episodes matching ``query`` (a :class:`~engine.review.search_query.QueryError`
    for a malformed one), each with every line that matches. Searches the index as it is: run
    :func:`engine.review.search_index.build_index` first to take in new episodes."""
    t0 = time.perf_counter()
    matcher = query if isinstance(query, Matcher) else Matcher.of(query)
    filters = filters or Filters()
    expr = fts_expression(matcher, filters)
    with session(ws.engine) as s:
        total = sq.match_count(s, expr, limit=RANK_ALL + 1)
        by = BM25 if total <= RANK_ALL else NEWEST
        if not total:
            ranked = []
        elif by == BM25:
            ranked = sq.ranked_docs(s, expr, 2 * limit + 2)
        else:
            ranked = [(rid, 0.0) for rid in sq.newest_docs(s, expr, 2 * limit + 2)]
        best: dict[int, float] = {}
        matched: dict[int, list[int]] = {}
        for rid, score in ranked:
            eid = rid // 2
            if eid not in best:
                if len(best) >= limit:
                    continue
                best[eid] = score
            matched.setdefault(eid, []).append(rid)
        docs = sq.docs_of(s, [rid for rids in matched.values() for rid in rids])
        facts = sq.episode_facts(s, list(best))
    by_episode: dict[int, list[Hit]] = {}
    for _rid, eid, terminal, body, lines_json in sorted(docs):
        lines = decode_lines(body, lines_json)
        by_episode.setdefault(eid, []).extend(hits_in(matcher, eid, terminal, lines))
    episodes = [
        EpisodeHits(
            eid,
            facts[eid].task if eid in facts else "?",
            facts[eid].agent if eid in facts else "?",
            facts[eid].outcome if eid in facts else "",
            score,
            by_episode.get(eid, []),
        )
        for eid, score in sorted(best.items(), key=lambda kv: (kv[1], -kv[0]))  # best, then newest
    ]
    return SearchResult(
        matcher.query,
        matcher,
        filters,
        episodes,
        min(total, RANK_ALL),
        total > RANK_ALL,
        by,
        time.perf_counter() - t0,
    )


def episode_hits(ws: Workspace, episode_id: int, query: str | Matcher) -> list[Hit]:
    """Every hit of ``query`` in one episode (both terminals; agent first, then in order): what Replay's
    n/N step through."""
    matcher = query if isinstance(query, Matcher) else Matcher.of(query)
    with session(ws.engine) as s:
        docs = sq.episode_docs(s, episode_id)
    out: list[Hit] = []
    for _rid, eid, terminal, body, lines_json in docs:
        out.extend(hits_in(matcher, eid, terminal, decode_lines(body, lines_json)))
    return out


def is_scrolled(hit: Hit) -> bool:
    return hit.line.kind == INSIDE


#: The order hits of one episode are stepped through: the agent's terminal, then the verifier's.
TERMINAL_ORDER = (sq.AGENT, sq.VERIFIER)


def cast_hits(
    lines: dict[str, list[Line]], query: str | Matcher, *, episode_id: int | None = None
) -> list[Hit]:
    """Hits of ``query`` in transcripts made on the spot (``transcript.transcript`` of each terminal's
    cast): Replay's ``/`` and ``bandpass replay --find``, which work on a bare cast file too."""
    matcher = query if isinstance(query, Matcher) else Matcher.of(query)
    eid = episode_id if episode_id is not None else -1
    return [
        hit for kind in TERMINAL_ORDER if kind in lines for hit in hits_in(matcher, eid, kind, lines[kind])
    ]
