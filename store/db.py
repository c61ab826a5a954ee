"""Opening the SQLite file and keeping its schema current.

WAL mode plus a busy timeout lets the TUI read while rollout workers write; ``synchronous=NORMAL`` is the
WAL-safe setting (a crash loses at most the last transaction, never the file). Migrations are plain SQL
files in ``store/migrations`` applied in order, the applied count kept in ``PRAGMA user_version``: a tiny
runner is enough for one embedded file and keeps the schema readable in review.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # imported where used: SQLAlchemy and SQLModel cost ~0.3-1 s to import, and a command
    # that only reads (``bandpass episodes``) uses :func:`connect` and never pays it
    from sqlalchemy.engine import Engine
    from sqlmodel import Session

from .errors import BandpassError

MIGRATIONS_DIR = Path(__file__).with_name("migrations")
BUSY_TIMEOUT_MS = 30_000


class StoreError(BandpassError, RuntimeError):
    """The database file cannot be used: names the file and what is wrong."""


def migrations() -> list[tuple[int, Path]]:
    found = []
    for p in sorted(MIGRATIONS_DIR.glob("[0-9][0-9][0-9][0-9]_*.sql")):
        found.append((int(p.name[:4]), p))
    numbers = [n for n, _ in found]
    if numbers != list(range(1, len(found) + 1)):
        raise StoreError(f"{MIGRATIONS_DIR}: migrations must be numbered 0001.. without gaps, got {numbers}")
    return found


SCHEMA_VERSION = len(migrations())


def _set_pragmas(dbapi_conn: sqlite3.Connection, _record: object) -> None:
    cur = dbapi_conn.cursor()
    cur.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
    cur.execute("PRAGMA journal_mode = WAL")
    cur.execute("PRAGMA synchronous = NORMAL")
    cur.execute("PRAGMA foreign_keys = ON")
    cur.close()


def schema_version(path: Path) -> int:
    con = sqlite3.connect(path)
    try:
        version: int = con.execute("PRAGMA user_version").fetchone()[0]
        return version
    finally:
        con.close()


def migrate(path: Path, *, target: int | None = None) -> int:
    """Brings the file at ``path`` to ``target`` (default: latest). Returns the version reached.

    Each migration runs in its own transaction together with its ``user_version`` bump, so a process
    killed mid-migration leaves the previous version intact.
    """
    target = SCHEMA_VERSION if target is None else target
    con = sqlite3.connect(path, isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        con.execute("PRAGMA journal_mode = WAL")
        current: int = con.execute("PRAGMA user_version").fetchone()[0]
        if current > SCHEMA_VERSION:
            raise StoreError(
                f"{path}: schema version {current} is newer than this Bandpass knows ({SCHEMA_VERSION}); "
                "upgrade Bandpass"
            )
        for number, sql_file in migrations():
            if number <= current or number > target:
                continue
            script = sql_file.read_text()
            con.execute("BEGIN IMMEDIATE")
            try:
                for statement in _statements(script):
                    con.execute(statement)
                con.execute(f"PRAGMA user_version = {number}")
                con.execute("COMMIT")
            except Exception as exc:  # any failure rolls the migration back, then is raised
                con.execute("ROLLBACK")
                raise StoreError(f"{path}: migration {sql_file.name} failed: {exc}") from exc
            current = number
        return current
    except sqlite3.DatabaseError as exc:
        raise StoreError(f"{path}: not a usable SQLite database ({exc})") from exc
    finally:
        con.close()


def _statements(script: str) -> Iterator[str]:
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    for stmt in "\n".join(lines).split(";"):
        if stmt.strip():
            yield stmt.strip()


def open_engine(path: Path) -> Engine:
    """Migrates then opens ``path``; creates the file when it does not exist."""
    from sqlalchemy import event
    from sqlmodel import create_engine

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    migrate(path)
    engine = create_engine(
        f"sqlite:///{path}",
        connect_args={"check_same_thread": False, "timeout": BUSY_TIMEOUT_MS / 1000},
    )
    event.listen(engine, "connect", _set_pragmas)
    return engine


@contextmanager
def session(engine: Engine) -> Iterator[Session]:
    """A session that commits on success and rolls back on error."""
    from sqlmodel import Session

    with Session(engine, expire_on_commit=False) as s:
        try:
            yield s
            s.commit()
        except Exception:
            s.rollback()
            raise


@contextmanager
def connect(path: Path) -> Iterator[sqlite3.Connection]:
    """A plain sqlite3 connection with the store's settings, for a reader that must start fast (a CLI
    listing): the same file and pragmas as :func:`open_engine`, without importing SQLAlchemy. The file
    must exist at the current schema (``Workspace.open`` sees to it). Commits on success."""
    con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000)
    try:
        _set_pragmas(con, None)
        yield con
        con.commit()
    finally:
        con.close()


class CommitWatch:
    """Says whether anything was committed to the file since it last asked: a poller reads the store only
    when the answer is yes, so one that watches a quiet store costs next to nothing.

    SQLite's ``PRAGMA data_version`` changes whenever *another* connection commits, and this watch's own
    connection never writes, so every commit counts — this process's and other processes' alike. Exact
    (no file times, no sizes), and a few microseconds a call. The first call answers yes. One watch per
    thread that asks; ``close`` when done (a watch that is garbage-collected closes too)."""

    def __init__(self, path: Path) -> None:
        self._con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_MS / 1000, check_same_thread=False)
        self._seen: int | None = None

    def changed(self) -> bool:
        version: int = self._con.execute("PRAGMA data_version").fetchone()[0]
        changed, self._seen = version != self._seen, version
        return changed

    def close(self) -> None:
        self._con.close()
