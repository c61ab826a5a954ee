"""A workspace: one folder holding the database, task versions, recordings, exports and config.

Everything a curator produces lives under one folder so it can be copied, backed up or shared whole.
Paths stored in the database are relative to the workspace root for the same reason.
"""

from __future__ import annotations

import os
import sqlite3
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from ...store.db import connect, migrate, open_engine
from .config import Config, load_config

if TYPE_CHECKING:
    from sqlalchemy.engine import Engine

DB_NAME = "bandpass.db"
CONFIG_NAME = "bandpass.toml"


def resolve_root(explicit: str | os.PathLike[str] | None = None) -> Path:
    """``--workspace`` wins, then ``BANDPASS_HOME``, then the current directory."""
    if explicit:
        return Path(explicit).expanduser().resolve()
    env = os.environ.get("BANDPASS_HOME")
    if env:
        return Path(env).expanduser().resolve()
    return Path.cwd().resolve()


@dataclass
class Workspace:
    root: Path
    _config: Config | None = field(default=None, repr=False)

    @classmethod
    def open(cls, root: str | os.PathLike[str] | None = None) -> Workspace:
        """Opens (creating when empty) the workspace and brings its database to the current schema."""
        ws = cls(resolve_root(root))
        for d in (ws.root, ws.tasks_dir, ws.recordings_dir, ws.exports_dir):
            d.mkdir(parents=True, exist_ok=True)
        _ = ws.config  # a broken bandpass.toml is reported now, not in the middle of a rollout
        migrate(ws.db_path)  # the schema is current now; SQLAlchemy is loaded only when ``engine`` is used
        return ws

    @property
    def db_path(self) -> Path:
        return self.root / DB_NAME

    @property
    def config_path(self) -> Path:
        return self.root / CONFIG_NAME

    @property
    def tasks_dir(self) -> Path:
        return self.root / "tasks"

    @property
    def recordings_dir(self) -> Path:
        return self.root / "recordings"

    @property
    def exports_dir(self) -> Path:
        return self.root / "exports"

    @property
    def config(self) -> Config:
        if self._config is None:
            self._config = load_config(self.config_path)
        return self._config

    @cached_property
    def engine(self) -> Engine:
        return open_engine(self.db_path)

    @contextmanager
    def connect(self) -> Iterator[sqlite3.Connection]:
        """A plain sqlite3 connection to the store (see ``store.db.connect``): for fast readers."""
        with connect(self.db_path) as con:
            yield con

    def rel(self, path: Path) -> str:
        """A path as stored in the database: relative to the root when inside it."""
        path = Path(path).resolve()
        try:
            return str(path.relative_to(self.root))
        except ValueError:
            return str(path)

    def abs(self, stored: str) -> Path:
        p = Path(stored)
        return p if p.is_absolute() else self.root / p
