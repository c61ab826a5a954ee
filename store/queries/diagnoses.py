"""Queries for diagnoses, failure clusters and the episode browser.

Plain SQL because they are read in bulk (10,000 episodes at a time): over the driver connection, rows
as tuples, one ``executemany`` to write — the ORM's per-row cost would be most of the diagnosis budget.
The episode browser (``episode_list``) also runs on a plain sqlite3 connection, so ``bandpass episodes``
never loads the ORM (this package loads a module only when it is used).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # the ORM is imported where used (see store.db.connect): listings start without it
    from sqlmodel import Session

    from ..models import Diagnosis

_EPISODE_COLS = (
    "e.id, e.agent, e.batch_id, e.outcome, e.reward, e.error, e.verifier_output, e.agent_cast, "
    "e.verifier_cast, v.hash, v.instruction, t.name"
)
#: The end state (changes and tamper-guard findings), NULL for an episode captured none.
_ENDSTATE_COLS = ", es.changes_json, es.findings_json"
_ENDSTATE_JOIN = " LEFT JOIN episode_endstate es ON es.episode_id = e.id"
_FROM = " FROM episode e JOIN task_version v ON v.id = e.task_version_id JOIN task t ON t.id = v.task_id"


class DiagnosisRow(TypedDict):
    """One diagnosis as review hands it to the store: the ``diagnosis`` table's columns but the time of
    writing (evidence and checks already serialised to JSON)."""

    episode_id: int
    code: str
    tag: str
    confidence: float
    summary: str
    evidence_json: str
    checks_json: str
    signature: str
    rules_version: int


@dataclass
class DiagnosisInput:
    episode_id: int
    agent: str
    batch_id: str
    outcome: str
    reward: float | None
    error: str
    verifier_output: str
    agent_cast: str
    verifier_cast: str
    version_hash: str
    instruction: str
    task: str
    changes_json: str | None = None  # the end state's change list (None: no end state stored)
    findings_json: str | None = None  # the tamper guard's findings on it
    steps: list[tuple[Any, ...]] = field(default_factory=list)  # (index, marker_time, action, obs, cuts, raw)
    #: a multi-step task's steps: (position, name, outcome, reward, marker_time, verifier_output, counted,
    #: detail), in order (store/queries/task_steps.py)
    task_steps: list[tuple[Any, ...]] = field(default_factory=list)


def _sql(s: Session | sqlite3.Connection, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Plain SQL over a session's driver connection, or over a plain sqlite3 connection."""
    if isinstance(s, sqlite3.Connection):
        return s.execute(sql, tuple(params)).fetchall()
    return list(s.connection().exec_driver_sql(sql, tuple(params)).fetchall())


def finished_episode_ids(
    s: Session, *, missing_only: bool = False, rules_version: int | None = None
) -> list[int]:
    """Ids of finished episodes; ``missing_only``: those with no diagnosis, or one made by other rules."""
    if not missing_only:
        return [r[0] for r in _sql(s, "SELECT id FROM episode WHERE status = 'done' ORDER BY id")]
    return [
        r[0]
        for r in _sql(
            s,
            "SELECT e.id FROM episode e LEFT JOIN diagnosis d ON d.episode_id = e.id"
            " WHERE e.status = 'done' AND (d.episode_id IS NULL OR d.rules_version != ?) ORDER BY e.id",
            (rules_version if rules_version is not None else -1,),
        )
    ]


def diagnosis_inputs(s: Session, episode_ids: Sequence[int], chunk: int = 500) -> Iterator[DiagnosisInput]:
    """Everything the rules read for these episodes, ``chunk`` episodes per query pair."""
    for i in range(0, len(episode_ids), chunk):
        ids = list(episode_ids[i : i + chunk])
        marks = ",".join("?" * len(ids))
        eps = {
            r[0]: DiagnosisInput(*r)
            for r in _sql(
                s,
                f"SELECT {_EPISODE_COLS}{_ENDSTATE_COLS}{_FROM}{_ENDSTATE_JOIN}"
                f" WHERE e.id IN ({marks}) ORDER BY e.id",
                ids,
            )
        }
        _attach(
            eps,
            lambda ep: ep.steps,
            _sql(
                s,
                'SELECT episode_id, "index", marker_time, action_json, observation, cuts_json, raw_reply'
                f' FROM step WHERE episode_id IN ({marks}) ORDER BY episode_id, "index"',
                ids,
            ),
        )
        _attach(
            eps,
            lambda ep: ep.task_steps,
            _sql(
                s,
                "SELECT episode_id, position, name, outcome, reward, marker_time, verifier_output, counted,"
                f" detail FROM episode_task_step WHERE episode_id IN ({marks}) ORDER BY episode_id, position",
                ids,
            ),
        )
        yield from eps.values()


def _attach(
    eps: dict[int, DiagnosisInput],
    into: Callable[[DiagnosisInput], list[tuple[Any, ...]]],
    rows: list[tuple[Any, ...]],
) -> None:
    """Appends each row (its episode's id first) to that episode's list ``into(ep)``, less the id, in the
    rows' order; a row of an episode not in ``eps`` is dropped. One place for the agent's steps and a
    multi-step task's steps, which an episode's diagnosis input gathers the same way."""
    for r in rows:
        ep = eps.get(r[0])
        if ep is not None:
            into(ep).append(r[1:])


def save_diagnoses(s: Session, rows: Sequence[DiagnosisRow]) -> int:
    """Inserts or replaces diagnoses (one per episode) in one executemany."""
    if not rows:
        return 0
    from ..models import utcnow

    now = utcnow().isoformat(sep=" ")
    s.connection().exec_driver_sql(
        "INSERT OR REPLACE INTO diagnosis (episode_id, code, tag, confidence, summary, evidence_json,"
        " checks_json, signature, rules_version, created_at) VALUES (?,?,?,?,?,?,?,?,?,?)",
        [
            (
                r["episode_id"],
                r["code"],
                r["tag"],
                r["confidence"],
                r["summary"],
                r["evidence_json"],
                r["checks_json"],
                r["signature"],
                r["rules_version"],
                now,
            )
            for r in rows
        ],
    )
    return len(rows)


def get_diagnosis(s: Session, episode_id: int) -> Diagnosis | None:
    from ..models import Diagnosis

    return s.get(Diagnosis, episode_id)


def code_counts(s: Session) -> dict[str, int]:
    """How many stored diagnoses name each code, most frequent first."""
    rows = _sql(s, "SELECT code, count(*) AS n FROM diagnosis GROUP BY code ORDER BY n DESC, code")
    return {str(code): int(n) for code, n in rows}


def diagnoses_for(s: Session, episode_ids: Sequence[int]) -> dict[int, tuple[str, str, float, str, str]]:
    """episode id -> (code, tag, confidence, summary, signature), for lists."""
    out: dict[int, tuple[str, str, float, str, str]] = {}
    for i in range(0, len(episode_ids), 900):
        ids = list(episode_ids[i : i + 900])
        marks = ",".join("?" * len(ids))
        for r in _sql(
            s,
            "SELECT episode_id, code, tag, confidence, summary, signature FROM diagnosis"
            f" WHERE episode_id IN ({marks})",
            ids,
        ):
            out[r[0]] = (r[1], r[2], r[3], r[4], r[5])
    return out


@dataclass
class EpisodeListRow:
    """One line of ``bandpass episodes`` and the Episodes screen."""

    episode_id: int
    task: str
    version_hash: str
    agent: str
    batch_id: str
    attempt: int
    status: str
    outcome: str
    reward: float | None
    retries: int
    diagnosis: str
    confidence: float | None
    signature: str
    tags: list[str]

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["version"] = d.pop("version_hash")[:12]
        return d


def episode_list(
    s: Session | sqlite3.Connection,
    *,
    task: str | None = None,
    agent: str | None = None,
    outcome: str | None = None,
    batch_id: str | None = None,
    status: str | None = None,
) -> list[EpisodeListRow]:
    """Episodes with their diagnosis code and active tags. ``outcome`` matches exactly, or by prefix
    when it ends in ``:`` or is a kind (``agent_error``, ``infra_error``)."""
    where, params = [], []
    if task is not None:
        where.append("t.name = ?")
        params.append(task)
    if agent is not None:
        where.append("e.agent = ?")
        params.append(agent)
    if batch_id is not None:
        where.append("e.batch_id = ?")
        params.append(batch_id)
    if status is not None:
        where.append("e.status = ?")
        params.append(status)
    if outcome is not None:
        if outcome in ("agent_error", "infra_error") or outcome.endswith(":"):
            where.append("e.outcome LIKE ?")
            params.append(outcome.rstrip(":") + ":%")
        else:
            where.append("e.outcome = ?")
            params.append(outcome)
    sql = (
        "SELECT e.id, t.name, v.hash, e.agent, e.batch_id, e.attempt, e.status, e.outcome, e.reward,"
        " e.retries, COALESCE(d.code, ''), d.confidence, COALESCE(d.signature, '')"
        f"{_FROM} LEFT JOIN diagnosis d ON d.episode_id = e.id"
        + (" WHERE " + " AND ".join(where) if where else "")
        + " ORDER BY t.name, e.id"
    )
    rows = _sql(s, sql, params)
    tags: dict[int, list[str]] = {}
    for eid, c, sub in _sql(
        s, "SELECT episode_id, tag_class, subclass FROM failure_tag WHERE cleared = 0 ORDER BY id"
    ):
        tags.setdefault(eid, []).append(f"{c}.{sub}")
    # One starred tuple per row: a row's column count is not known to the type checker.
    return [EpisodeListRow(*(*r, tags.get(r[0], []))) for r in rows]


@dataclass
class FailureRow:
    episode_id: int
    task: str
    agent: str
    batch_id: str
    outcome: str
    code: str
    confidence: float
    summary: str
    signature: str
    tag: str  # the diagnosis's suggested tag ("" when it suggests none)
    reward: float | None  # the verifier's


def failure_rows(s: Session, *, task: str | None = None) -> list[FailureRow]:
    """Finished episodes that did not pass, with their diagnosis (undiagnosed ones get empty fields)."""
    sql = (
        "SELECT e.id, t.name, e.agent, e.batch_id, e.outcome, COALESCE(d.code, ''),"
        " COALESCE(d.confidence, 0.0), COALESCE(d.summary, ''), COALESCE(d.signature, ''),"
        " COALESCE(d.tag, ''), e.reward"
        f"{_FROM} LEFT JOIN diagnosis d ON d.episode_id = e.id"
        " WHERE e.status = 'done' AND e.outcome != 'passed'"
        + (" AND t.name = ?" if task is not None else "")
        + " ORDER BY e.id"
    )
    return [FailureRow(*r) for r in _sql(s, sql, (task,) if task is not None else ())]


def checks_for(s: Session, episode_ids: Sequence[int]) -> list[tuple[int, str]]:
    """(episode id, checks_json) of the episodes' diagnoses."""
    out: list[tuple[int, str]] = []
    for i in range(0, len(episode_ids), 900):
        ids = list(episode_ids[i : i + 900])
        marks = ",".join("?" * len(ids))
        out += [
            (r[0], r[1])
            for r in _sql(
                s, f"SELECT episode_id, checks_json FROM diagnosis WHERE episode_id IN ({marks})", ids
            )
        ]
    return out


@dataclass
class QueueRow:
    """One episode of the tagging queue with its diagnosis, read in one pass (10,000 rows in ~0.1 s)."""

    episode_id: int
    task: str
    version_hash: str
    agent: str
    attempt: int
    outcome: str
    reward: float | None
    agent_cast: str
    verifier_cast: str
    batch_id: str
    code: str | None
    tag: str | None
    confidence: float | None
    summary: str | None
    signature: str | None
    checks_json: str | None
    skipped: bool
    tags: list[tuple[int, str]] = field(default_factory=list)  # (tag id, "class.subclass"), active only
    evidence_json: str = "{}"  # who ended the sandbox (engine/sandbox/attribution/)


def queue_rows(s: Session) -> list[QueueRow]:
    """Finished episodes that did not pass, plus passed ones carrying a tag, grouped by task (the same
    set as ``store.queries.review_rows``, without loading verifier outputs)."""
    tags: dict[int, list[tuple[int, str]]] = {}
    for tid, eid, c, sub in _sql(
        s, "SELECT id, episode_id, tag_class, subclass FROM failure_tag WHERE cleared = 0 ORDER BY id"
    ):
        tags.setdefault(eid, []).append((tid, f"{c}.{sub}"))
    rows = _sql(
        s,
        "SELECT e.id, t.name, v.hash, e.agent, e.attempt, e.outcome, e.reward, e.agent_cast, e.verifier_cast,"
        " e.batch_id, d.code, d.tag, d.confidence, d.summary, d.signature, d.checks_json,"
        " rs.state IS NOT NULL AND rs.state = 'skipped', e.evidence_json"
        f"{_FROM} LEFT JOIN diagnosis d ON d.episode_id = e.id"
        " LEFT JOIN review_state rs ON rs.episode_id = e.id"
        " WHERE e.status = 'done' ORDER BY t.name, e.id",
    )
    out = []
    for r in rows:
        ep_tags = tags.get(r[0], [])
        if r[5] == "passed" and not ep_tags:
            continue
        out.append(QueueRow(*(*r[:16], bool(r[16]), ep_tags, r[17] or "{}")))  # one starred tuple, as above
    return out
