"""Queries for the full-text search index (tables ``search_doc``, ``search_fts``, ``search_state``).

Plain SQL over the driver connection, like ``diagnoses``: the index is written and read in bulk.
``search_fts`` is an FTS5 table over ``search_doc`` (external content): a document's index entries are
removed with the values it was indexed with (FTS5's ``'delete'`` command) and its row in the same
transaction, so the two never disagree, and a build killed mid-way leaves whole episodes or none.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from sqlmodel import Session

from ..models import utcnow

AGENT, VERIFIER = "agent", "verifier"
TERMINALS = (AGENT, VERIFIER)


def doc_id(episode_id: int, terminal: str) -> int:
    """Documents are numbered by episode (rowid order is episode order): ``episode * 2 + terminal``."""
    return episode_id * 2 + TERMINALS.index(terminal)


def _sql(s: Session, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    return list(s.connection().exec_driver_sql(sql, tuple(params)).fetchall())


# --- building -----------------------------------------------------------------------------------

_STALE = (
    " FROM episode e LEFT JOIN search_state st ON st.episode_id = e.id WHERE e.status = 'done'"
    " AND (st.episode_id IS NULL OR st.version != ? OR st.ended_at != coalesce(e.ended_at, ''))"
)


def pending_episode_ids(s: Session, version: int, *, limit: int | None = None) -> list[int]:
    """Finished episodes the index lacks, or holds as of an older row (a retry) or transcript version."""
    tail = f" ORDER BY e.id LIMIT {int(limit)}" if limit is not None else " ORDER BY e.id"
    return [r[0] for r in _sql(s, "SELECT e.id" + _STALE + tail, (version,))]


def pending_count(s: Session, version: int) -> int:
    return int(_sql(s, "SELECT count(*)" + _STALE, (version,))[0][0])


@dataclass
class IndexSource:
    """What indexing one episode reads."""

    episode_id: int
    agent_cast: str
    verifier_cast: str
    verifier_output: str
    task: str
    agent: str
    outcome: str


def index_sources(s: Session, episode_ids: Sequence[int]) -> list[IndexSource]:
    out: list[IndexSource] = []
    for i in range(0, len(episode_ids), 500):
        ids = list(episode_ids[i : i + 500])
        marks = ",".join("?" * len(ids))
        out.extend(
            IndexSource(*r)
            for r in _sql(
                s,
                "SELECT e.id, e.agent_cast, e.verifier_cast, e.verifier_output, t.name, e.agent, e.outcome"
                " FROM episode e JOIN task_version v ON v.id = e.task_version_id JOIN task t"
                f" ON t.id = v.task_id WHERE e.id IN ({marks}) ORDER BY e.id",
                ids,
            )
        )
    return out


@dataclass
class DocRow:
    terminal: str
    body: str
    facets: str
    lines_json: str


def replace_episode(
    s: Session, episode_id: int, docs: Sequence[DocRow], *, version: int, lines: int, note: str
) -> None:
    """The episode's documents become ``docs`` and its state says so (the caller's transaction)."""
    con = s.connection()
    con.exec_driver_sql(
        "INSERT INTO search_fts(search_fts, rowid, body, facets)"
        " SELECT 'delete', id, body, facets FROM search_doc WHERE episode_id = ?",
        (episode_id,),
    )
    con.exec_driver_sql("DELETE FROM search_doc WHERE episode_id = ?", (episode_id,))
    for d in docs:
        rid = doc_id(episode_id, d.terminal)
        con.exec_driver_sql(
            "INSERT INTO search_doc (id, episode_id, terminal, body, facets, lines_json)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (rid, episode_id, d.terminal, d.body, d.facets, d.lines_json),
        )
        con.exec_driver_sql(
            "INSERT INTO search_fts(rowid, body, facets) VALUES (?,?,?)", (rid, d.body, d.facets)
        )
    con.exec_driver_sql(
        "INSERT OR REPLACE INTO search_state (episode_id, version, ended_at, lines, note, indexed_at)"
        " SELECT id, ?, coalesce(ended_at, ''), ?, ?, ? FROM episode WHERE id = ?",
        (version, lines, note, utcnow().isoformat(sep=" "), episode_id),
    )


@dataclass
class IndexStatus:
    episodes: int  # finished episodes in the workspace
    indexed: int  # of them, held by the index as they are now
    documents: int
    lines: int

    @property
    def pending(self) -> int:
        return self.episodes - self.indexed


def index_status(s: Session, version: int) -> IndexStatus:
    done = int(_sql(s, "SELECT count(*) FROM episode WHERE status = 'done'")[0][0])
    pending = pending_count(s, version)
    lines = int(_sql(s, "SELECT coalesce(sum(lines), 0) FROM search_state")[0][0])
    docs = int(_sql(s, "SELECT count(*) FROM search_doc")[0][0])
    return IndexStatus(done, done - pending, docs, lines)


# --- searching ----------------------------------------------------------------------------------


def match_count(s: Session, fts: str, *, limit: int | None = None) -> int:
    """Documents matching an FTS5 expression, counted up to ``limit`` (FTS5 stops there)."""
    if limit is None:
        return int(_sql(s, "SELECT count(*) FROM search_fts WHERE search_fts MATCH ?", (fts,))[0][0])
    return int(
        _sql(
            s,
            "SELECT count(*) FROM (SELECT 1 FROM search_fts WHERE search_fts MATCH ? LIMIT ?)",
            (fts, limit),
        )[0][0]
    )


def newest_docs(s: Session, fts: str, limit: int) -> list[int]:
    """Ids of the ``limit`` newest matching documents (by episode): FTS5 walks its index backwards and
    stops, so this costs the same for 10 matches or 100,000."""
    rows = _sql(
        s, "SELECT rowid FROM search_fts WHERE search_fts MATCH ? ORDER BY rowid DESC LIMIT ?", (fts, limit)
    )
    return [int(r[0]) for r in rows]


def ranked_docs(s: Session, fts: str, limit: int) -> list[tuple[int, float]]:
    """``[(document id, bm25 score)]`` best first (lower is better); the facets column weighs nothing."""
    return [
        (int(r[0]), float(r[1]))
        for r in _sql(
            s,
            "SELECT rowid, bm25(search_fts, 1.0, 0.0) AS score FROM search_fts"
            " WHERE search_fts MATCH ? ORDER BY score LIMIT ?",
            (fts, limit),
        )
    ]


def docs_of(s: Session, doc_ids: Sequence[int]) -> list[tuple[int, int, str, str, str]]:
    """``[(id, episode_id, terminal, body, lines_json)]`` of these documents."""
    if not doc_ids:
        return []
    marks = ",".join("?" * len(doc_ids))
    return [
        (int(r[0]), int(r[1]), str(r[2]), str(r[3]), str(r[4]))
        for r in _sql(
            s,
            f"SELECT id, episode_id, terminal, body, lines_json FROM search_doc WHERE id IN ({marks})",
            doc_ids,
        )
    ]


def episode_docs(s: Session, episode_id: int) -> list[tuple[int, int, str, str, str]]:
    rows = _sql(s, "SELECT id FROM search_doc WHERE episode_id = ? ORDER BY id", (episode_id,))
    return docs_of(s, [r[0] for r in rows])


@dataclass
class EpisodeFacts:
    episode_id: int
    task: str
    agent: str
    outcome: str
    status: str
    batch_id: str


def episode_facts(s: Session, episode_ids: Sequence[int]) -> dict[int, EpisodeFacts]:
    if not episode_ids:
        return {}
    marks = ",".join("?" * len(episode_ids))
    return {
        int(r[0]): EpisodeFacts(int(r[0]), *r[1:])
        for r in _sql(
            s,
            "SELECT e.id, t.name, e.agent, e.outcome, e.status, e.batch_id FROM episode e"
            " JOIN task_version v ON v.id = e.task_version_id JOIN task t ON t.id = v.task_id"
            f" WHERE e.id IN ({marks})",
            list(episode_ids),
        )
    }
