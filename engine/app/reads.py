"""What the front ends read: one function per thing a screen or a CLI command shows.

Why: the screens and CLI commands show the store's rows (tasks, batches, episodes, tags, diagnoses), but
they must not depend on the store's layout — a split of ``store/queries``, a new table, a moved model
changes this module, not twenty front-end files. The import contract "tui never imports store" holds the
front ends to it, and this module holds them to the application: a front end calls ``reads.task_rows(ws)``
and never opens a session or names a store query. Each function opens its own session (or, for the
listings a CLI must start fast, a plain sqlite3 connection), runs the store's query and returns rows that
stay readable after it closed: the store's sessions never expire what they loaded
(``expire_on_commit=False``) and its models have no lazy relationships, so a returned model is a plain
record. A write a front end needs is a use case (``engine.app.batches``...), not a read.

The store is imported inside each function, and the row types here (for annotations) when first used
(PEP 562 ``__getattr__``): ``bandpass episodes`` reads through ``store.queries.diagnoses`` on plain
sqlite3 and must not pay for the ORM that the other query modules load.
"""

from __future__ import annotations

import importlib
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ...store.db import CommitWatch as CommitWatch
    from ...store.models import (
        Audit,
        BandLedgerEntry,
        Batch,
        Episode,
        Generation,
        TaskVersion,
    )
    from ...store.models import FailureTag as FailureTag
    from ...store.models import ReviewSuggestion as ReviewSuggestion
    from ...store.models import Task as Task
    from ...store.models import pk as pk
    from ...store.models import utcnow as utcnow
    from ...store.queries import BatchProgress as BatchProgress
    from ...store.queries import FollowedEpisode as FollowedEpisode
    from ...store.queries import TagRow, TaskRow
    from ...store.queries.diagnoses import EpisodeListRow as EpisodeListRow
    from ...store.queries.search import TERMINALS as TERMINALS
    from ...store.queries.search import IndexStatus
    from ..core.workspace import Workspace

    #: (sqlite3.Error, SQLAlchemyError), made on first use by ``__getattr__``
    UNREADABLE: tuple[type[Exception], ...]

#: name -> (module, attribute): the row types and helpers re-exported for the front ends' annotations
_WHERE: dict[str, tuple[str, str]] = {
    "EpisodeListRow": ("bandpass.store.queries.diagnoses", "EpisodeListRow"),
    "FailureTag": ("bandpass.store.models", "FailureTag"),
    "ReviewSuggestion": ("bandpass.store.models", "ReviewSuggestion"),
    "Task": ("bandpass.store.models", "Task"),
    "pk": ("bandpass.store.models", "pk"),
    "utcnow": ("bandpass.store.models", "utcnow"),
    "BatchProgress": ("bandpass.store.queries", "BatchProgress"),
    "CommitWatch": ("bandpass.store.db", "CommitWatch"),
    "FollowedEpisode": ("bandpass.store.queries", "FollowedEpisode"),
    "TERMINALS": ("bandpass.store.queries.search", "TERMINALS"),
}


def _unreadable() -> tuple[type[Exception], ...]:
    import sqlite3

    from sqlalchemy.exc import SQLAlchemyError  # what the ORM wraps a sqlite3 error in

    return (sqlite3.Error, SQLAlchemyError)


def __getattr__(name: str) -> object:
    if name == "UNREADABLE":
        errors = globals()[name] = _unreadable()
        return errors
    try:
        module, attr = _WHERE[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


# --- tasks --- #


def task_rows(ws: Workspace) -> list[TaskRow]:
    """The latest version of every task with its audit verdict and counts (Tasks screen, ``tasks``)."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return _with_unproven(ws, queries.task_rows(s))


def task_rows_and_agents(ws: Workspace) -> tuple[list[TaskRow], list[str]]:
    """:func:`task_rows` and :func:`episode_agents`, read together (one snapshot for the Tasks table)."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return _with_unproven(ws, queries.task_rows(s)), queries.episode_agents(s)


def _with_unproven(ws: Workspace, rows: list[TaskRow]) -> list[TaskRow]:
    """A task without ``solution/solve.sh`` says its verification is unproven before any rollout learnt
    that (no oracle can show where its verifier runs: engine/audit/adoption.py)."""
    from ..audit.adoption import UNPROVEN, WHY_UNPROVEN

    for r in rows:
        if not r.footprint and not (ws.abs(r.path) / "solution" / "solve.sh").is_file():
            r.footprint = {"mode": UNPROVEN, "why": WHY_UNPROVEN}
    return rows


def verified_label(row: TaskRow) -> str:
    """Where a task version is verified, in a few words: ``clean room``, ``clean room +2 adopted``,
    ``service``, ``in place``, ``unproven`` (no solution), ``-`` (not learnt yet: the next rollout or
    audit learns it)."""
    mode = str(row.footprint.get("mode") or "")
    if not mode:
        return "-"
    label = (row.verify_mode or mode).replace("_", " ")
    return f"{label} +{len(row.adopted_artifacts)} adopted" if row.adopted_artifacts else label


@dataclass(frozen=True)
class TaskDetail:
    """One task version with its task, audits (newest first) and episodes: the Tasks screen's detail."""

    version: TaskVersion
    task: Task | None
    audits: list[Audit]
    episodes: list[Episode]


def task_detail(ws: Workspace, version_id: int) -> TaskDetail | None:
    """The detail of one version, None when it no longer exists."""
    from ...store import queries
    from ...store.db import session
    from ...store.models import Task

    with session(ws.engine) as s:
        v = queries.get_version(s, version_id)
        if v is None:
            return None
        return TaskDetail(
            version=v,
            task=s.get(Task, v.task_id),
            audits=queries.audits_for_version(s, version_id),
            episodes=queries.episodes(s, version_id=version_id),
        )


def task_name_of_version(ws: Workspace, version_id: int) -> str | None:
    """The name of the task a version belongs to, None when either is gone."""
    from ...store import queries
    from ...store.db import session
    from ...store.models import Task

    with session(ws.engine) as s:
        version = queries.get_version(s, version_id)
        task = s.get(Task, version.task_id) if version else None
        return task.name if task else None


def resolve_versions(ws: Workspace, refs: Sequence[str]) -> list[tuple[str, int | None]]:
    """Each reference (a task name or a version) with the id of the version it names, None for no match."""
    from ...store import queries
    from ...store.db import session
    from ...store.models import pk

    with session(ws.engine) as s:
        return [(ref, None if (v := queries.resolve_version(s, ref)) is None else pk(v)) for ref in refs]


# --- episodes --- #


def episode(ws: Workspace, episode_id: int) -> Episode | None:
    """One episode's row, None when it does not exist."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.get_episode(s, episode_id)


def episode_evidence(ws: Workspace, episode_id: int) -> dict[str, Any]:
    """Who ended the episode's sandbox, as a JSON-ready dict (``bandpass show``, the Tag queue):
    ``{"outcome", "summary", "facts", "evidence"}``; ``evidence`` is {} when nothing ended the sandbox.
    The lines are the sandbox's own rendering (``engine.sandbox.attribution``); the read is here, since
    the sandbox never touches the store. Raises ``KeyError`` for an episode that does not exist."""
    from ...store import queries
    from ...store.db import session
    from ..sandbox.attribution import facts, summary

    with session(ws.engine) as s:
        ep = queries.get_episode(s, episode_id)
        if ep is None:
            raise KeyError(f"episode {episode_id} does not exist")
        evidence = queries.episode_evidence(s, episode_id)
        outcome = ep.outcome
    return {"outcome": outcome, "summary": summary(evidence), "facts": facts(evidence), "evidence": evidence}


def finished_episode_ids(ws: Workspace, version_id: int | None = None) -> list[int]:
    """Ids of finished episodes, oldest first (of one task version when given)."""
    from ...store.db import session

    with session(ws.engine) as s:
        if version_id is None:
            from ...store.queries import diagnoses

            return diagnoses.finished_episode_ids(s)
        from ...store import queries
        from ...store.models import pk

        return [pk(e) for e in queries.episodes(s, version_id=version_id, status="done")]


def episode_list(
    ws: Workspace,
    *,
    task: str | None = None,
    agent: str | None = None,
    outcome: str | None = None,
    batch_id: str | None = None,
) -> list[EpisodeListRow]:
    """Episodes with their diagnosis code and active tags (Episodes screen, ``bandpass episodes``). Plain
    sqlite3, never the ORM: the CLI listing starts in ~0.2 s (tests/e2e/test_startup.py)."""
    from ...store.queries import diagnoses

    with ws.connect() as con:
        return diagnoses.episode_list(con, task=task, agent=agent, outcome=outcome, batch_id=batch_id)


def step_observations(ws: Workspace, episode_id: int) -> dict[int, str]:
    """What the policy observed after each step of an episode, by step index (Compare screen)."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return {st.index: st.observation for st in queries.steps(s, episode_id)}


def steps_after(ws: Workspace, after: dict[int, int]) -> list[tuple[int, int, int, dict[str, Any]]]:
    """Steps newer than a step id, per episode: (episode id, step id, index, action)."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.steps_after(s, after)


def episode_agents(ws: Workspace) -> list[str]:
    """Agents (models and built-in agents) with finished episodes, sorted."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.episode_agents(s)


def agents_by_recency(ws: Workspace) -> list[str]:
    """Agents with episodes, the most recently run first."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.agents_by_recency(s)


# --- batches --- #


def batches(ws: Workspace) -> list[Batch]:
    """Every rollout batch, newest first."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.batches(s)


def adaptive_settings(batch: Batch) -> dict[str, Any]:
    """An adaptive batch's sampler settings and state ({} for a plain batch)."""
    from ...store import queries

    return queries.adaptive_settings(batch)


def batch_progress(
    ws: Workspace, *, since: datetime | None = None, also: Sequence[str] = (), recent: int = 0
) -> list[BatchProgress]:
    """Batches as the Runs screen follows them: live ones, those in ``also`` and the ``recent`` newest."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.batch_progress(s, since=since, also=also, recent=recent)


def commit_watch(ws: Workspace) -> CommitWatch:
    """A watch on the workspace's store: ``changed()`` says whether any process committed since it last
    asked, so a poller (Runs' batch table, the episode follower) reads the store only when it changed."""
    from ...store.db import CommitWatch

    return CommitWatch(ws.db_path)


def followed_episodes(
    ws: Workspace, batch_ids: Sequence[str], *, also: Sequence[int] = (), ended_since: datetime | None = None
) -> list[FollowedEpisode]:
    """The episodes of other processes' batches that the Runs screen follows."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.followed_episodes(s, batch_ids, also=also, ended_since=ended_since)


# --- tags, reviews, generations, ledger, search --- #


def tag_rows(ws: Workspace, *, include_cleared: bool = False) -> list[TagRow]:
    """Failure tags with their episode's outcome and task (``bandpass tags``)."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.tag_rows(s, include_cleared=include_cleared)


@dataclass(frozen=True)
class ReviewView:
    """What the review panel shows of one episode: its latest review (any status), the id of the tag
    accepted from it, and the stored diagnosis code."""

    review: ReviewSuggestion | None
    accepted_tag: int | None
    diagnosis: str | None


def review_view(ws: Workspace, episode_id: int) -> ReviewView:
    from ...store.db import session
    from ...store.queries import reviews as rq

    accepted: int | None = None
    with session(ws.engine) as s:
        review = rq.latest_review(s, episode_id)
        if review is not None and (tag := rq.accepted_tag(s, review)) is not None:
            accepted = tag.id
        row = rq.stored_diagnosis(s, episode_id)
        s.expunge_all()
    return ReviewView(review, accepted, (rq.diagnosis_table_code(row) or None) if row is not None else None)


def generation(ws: Workspace, generation_id: int) -> Generation | None:
    """One generation attempt, None when it does not exist."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.get_generation(s, generation_id)


def generations(
    ws: Workspace, *, prompt_version: str | None = None, model: str | None = None, outcome: str | None = None
) -> list[Generation]:
    """Generation attempts, optionally of one prompt version, model and/or outcome."""
    from ...store import queries
    from ...store.db import session

    with session(ws.engine) as s:
        return queries.list_generations(s, prompt_version=prompt_version, model=model, outcome=outcome)


@dataclass(frozen=True)
class LedgerRow:
    """One band decision with its task's name and the episodes it was decided on."""

    task: str
    entry: BandLedgerEntry
    episodes: list[int]


def ledger_rows(ws: Workspace, *, model: str | None = None, task: str | None = None) -> list[LedgerRow]:
    """The band ledger, oldest first, optionally of one model and/or one task (any version)."""
    from ...store.db import session
    from ...store.queries import ledger

    with session(ws.engine) as s:
        rows = ledger.entries(s, model=model, task=task)
    return [LedgerRow(name, e, ledger.episode_ids(e)) for name, e in rows]


def search_index_status(ws: Workspace, version: int) -> IndexStatus:
    """How much of the store the transcript search index covers (at transcript format ``version``)."""
    from ...store.db import session
    from ...store.queries import search

    with session(ws.engine) as s:
        return search.index_status(s, version)


# --- filters --- #


def filter_problem(
    ws: Workspace, *, task: str | None = None, agent: str | None = None, batch: str | None = None
) -> tuple[str, list[str]] | None:
    """Which of a listing's filters names nothing: ("task" | "agent" | "batch", what exists instead), or
    None when each one names something (a CLI says so rather than "nothing matches")."""
    from sqlmodel import select

    from ...store import queries
    from ...store.db import session
    from ...store.models import Task

    with session(ws.engine) as s:
        if task is not None and queries.get_task(s, task) is None:
            return "task", sorted(t for t in s.exec(select(Task.name)).all())
        if agent is not None:
            agents = queries.episode_agents(s)
            if agent not in agents:
                return "agent", agents
        if batch is not None and queries.get_batch(s, batch) is None:
            return "batch", [b.id for b in queries.batches(s)]
    return None


#: A literal list (the type checker reads it): the functions and views below, ``UNREADABLE`` and ``_WHERE``'s
#: row types and helpers.
__all__ = [
    "BatchProgress",
    "CommitWatch",
    "EpisodeListRow",
    "FailureTag",
    "FollowedEpisode",
    "LedgerRow",
    "ReviewSuggestion",
    "ReviewView",
    "TERMINALS",
    "Task",
    "TaskDetail",
    "UNREADABLE",
    "adaptive_settings",
    "agents_by_recency",
    "batch_progress",
    "batches",
    "episode",
    "episode_agents",
    "episode_evidence",
    "episode_list",
    "filter_problem",
    "finished_episode_ids",
    "followed_episodes",
    "generation",
    "generations",
    "ledger_rows",
    "pk",
    "resolve_versions",
    "review_view",
    "search_index_status",
    "step_observations",
    "steps_after",
    "tag_rows",
    "task_detail",
    "task_name_of_version",
    "task_rows",
    "task_rows_and_agents",
    "utcnow",
]
