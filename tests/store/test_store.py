"""Store: round trips, constraints, WAL concurrency and schema migrations."""

from __future__ import annotations

import sqlite3
import threading
from pathlib import Path

import pytest
from sqlalchemy import Engine, inspect
from sqlalchemy.exc import IntegrityError
from sqlmodel import Session, SQLModel, create_engine

import bandpass.store.models  # noqa: F401 - registers the tables on SQLModel.metadata
from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries as q
from bandpass.store.db import SCHEMA_VERSION, StoreError, migrate, open_engine, schema_version, session
from bandpass.store.models import Episode, TaskVersion, pk


def _version(s: Session, name: str = "t1", h: str = "a" * 64) -> TaskVersion:
    task, _ = q.get_or_create_task(s, name)
    return q.add_task_version(s, task, version_hash=h, path=f"tasks/{name}", instruction="do it")


def test_workspace_creates_layout_and_db(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "new")
    for sub in ("tasks", "recordings", "exports"):
        assert (ws.root / sub).is_dir()
    assert ws.db_path.exists()
    assert schema_version(ws.db_path) == SCHEMA_VERSION


def test_round_trip_task_episode_steps_tags(workspace: Workspace) -> None:
    with session(workspace.engine) as s:
        tv = _version(s)
        ep = q.create_episode(s, pk(tv), "oracle", attempt=1, batch_id="b1")
        ep_id = pk(ep)
        q.add_step(s, ep_id, 0, action={"keystrokes": "ls\n"}, observation="$ ", marker_time=0.5, cuts=[])
        q.finish_episode(s, ep_id, outcome="failed", reward=0.0, agent_cast="recordings/1/agent.cast")
        q.add_tag(s, ep_id, "harness", "turn_limit", blocking=False, note="20 steps", author="ana")
    with session(workspace.engine) as s:
        got = q.get_episode(s, ep_id)
        assert got is not None
        assert (got.status, got.outcome, got.reward, got.batch_id) == ("done", "failed", 0.0, "b1")
        (step,) = q.steps(s, ep_id)
        assert step.action_json == '{"keystrokes": "ls\\n"}'
        (tag,) = q.tags_for_episode(s, ep_id)
        assert (tag.tag_class, tag.subclass, tag.author, tag.blocking) == (
            "harness",
            "turn_limit",
            "ana",
            False,
        )
        (row,) = q.task_rows(s)
        assert (row.name, row.episodes, row.passed, row.tags, row.blocking_tags) == ("t1", 1, 0, 1, 0)


def test_pk_is_the_stored_id_and_refuses_a_row_never_flushed(workspace: Workspace) -> None:
    with session(workspace.engine) as s:
        tv = _version(s)
        ep = q.create_episode(s, pk(tv), "oracle", attempt=1, batch_id="b1")
        assert pk(ep) == ep.id and isinstance(pk(ep), int)
        assert q.get_episode(s, pk(ep)) is ep
    with pytest.raises(ValueError, match="Episode has no id yet: it was never flushed"):
        pk(Episode(task_version_id=1, agent="oracle", attempt=1))


def test_blocking_tag_counts_on_task_row(workspace: Workspace) -> None:
    with session(workspace.engine) as s:
        tv = _version(s)
        ep = q.create_episode(s, pk(tv), "m")
        q.finish_episode(s, pk(ep), outcome="passed", reward=1.0)
        q.add_tag(s, pk(ep), "misalignment", "reward_hack", blocking=True)
    with session(workspace.engine) as s:
        (row,) = q.task_rows(s)
        assert (row.passed, row.blocking_tags) == (1, 1)


def test_version_hash_is_unique(workspace: Workspace) -> None:
    with pytest.raises(IntegrityError), session(workspace.engine) as s:
        _version(s, "a", "f" * 64)
        _version(s, "b", "f" * 64)


def test_foreign_keys_are_enforced(workspace: Workspace) -> None:
    with pytest.raises(IntegrityError), session(workspace.engine) as s:
        q.create_episode(s, 999, "oracle")


def test_task_rows_show_latest_version_and_count(workspace: Workspace) -> None:
    with session(workspace.engine) as s:
        _version(s, "t", "1" * 64)
        _version(s, "t", "2" * 64)
    with session(workspace.engine) as s:
        (row,) = q.task_rows(s)
        assert row.version_hash == "2" * 64 and row.versions == 2
        latest, by_prefix = q.resolve_version(s, "t"), q.resolve_version(s, "11111111")
        assert latest is not None and latest.hash == "2" * 64
        assert by_prefix is not None and by_prefix.hash == "1" * 64


def test_wal_mode_and_busy_timeout(workspace: Workspace) -> None:
    with workspace.engine.connect() as c:
        assert c.exec_driver_sql("PRAGMA journal_mode").scalar() == "wal"
        assert (c.exec_driver_sql("PRAGMA busy_timeout").scalar() or 0) >= 10_000


def test_readers_never_see_database_locked_while_writers_commit(workspace: Workspace) -> None:
    """The TUI reads while rollout workers write: four writers and a reader on separate connections."""
    with session(workspace.engine) as s:
        tv_id = pk(_version(s))
    errors: list[BaseException] = []

    def writer() -> None:
        try:
            for _ in range(40):
                with session(workspace.engine) as s:
                    ep = q.create_episode(s, tv_id, "w")
                    q.finish_episode(s, pk(ep), outcome="passed", reward=1.0)
        except BaseException as exc:  # noqa: BLE001 - collected for the assertion
            errors.append(exc)

    def reader() -> None:
        try:
            for _ in range(80):
                with session(open_engine(workspace.db_path)) as s:
                    q.task_rows(s)
        except BaseException as exc:  # noqa: BLE001 - a thread's failure, asserted by the test
            errors.append(exc)

    threads = [threading.Thread(target=writer) for _ in range(4)] + [threading.Thread(target=reader)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    with session(workspace.engine) as s:
        assert q.task_rows(s)[0].episodes == 160


def _columns(engine: Engine) -> dict[str, set[str]]:
    insp = inspect(engine)
    return {t: {c["name"] for c in insp.get_columns(t)} for t in insp.get_table_names()}


def test_migrated_schema_matches_the_models(tmp_path: Path) -> None:
    migrated = open_engine(tmp_path / "m.db")
    fresh = create_engine(f"sqlite:///{tmp_path / 'f.db'}")
    SQLModel.metadata.create_all(fresh)
    assert _columns(migrated) == _columns(fresh)


def test_upgrade_keeps_rows_of_a_schema_1_database(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    assert migrate(path, target=1) == 1
    con = sqlite3.connect(path)
    con.execute("INSERT INTO task (name, source_path, created_at) VALUES ('legacy', '/x', '2025-01-01')")
    con.execute(
        "INSERT INTO task_version (task_id, hash, path, instruction, category, difficulty, tags_json,"
        " metadata_json, origin, created_at) VALUES (1, 'abc', 'tasks/legacy', 'i', 'c', 'easy', '[]', '{}',"
        " 'import', '2025-01-01')"
    )
    con.execute(
        "INSERT INTO episode (task_version_id, agent, attempt, status, outcome, retries, error, agent_cast,"
        " verifier_cast, verifier_output, created_at)"
        " VALUES (1, 'oracle', 0, 'done', 'passed', 0, '', '', '', '', '2025-01-01')"
    )
    con.commit()
    con.close()
    assert "batch_id" not in _columns(create_engine(f"sqlite:///{path}"))["episode"]

    upgraded = open_engine(path)  # opening migrates
    assert schema_version(path) == SCHEMA_VERSION
    with session(upgraded) as s:
        (row,) = q.task_rows(s)
        assert (row.name, row.episodes, row.passed, row.image_aliases) == ("legacy", 1, 1, [])
        assert q.episodes(s)[0].batch_id == ""


def test_newer_schema_is_refused_with_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    con = sqlite3.connect(path)
    con.execute(f"PRAGMA user_version = {SCHEMA_VERSION + 5}")
    con.close()
    with pytest.raises(StoreError, match="newer than this Bandpass knows"):
        migrate(path)


def test_garbage_file_is_a_clear_error(tmp_path: Path) -> None:
    path = tmp_path / "junk.db"
    path.write_bytes(b"this is not sqlite" * 100)
    with pytest.raises(StoreError, match="junk.db: not a usable SQLite database"):
        migrate(path)
