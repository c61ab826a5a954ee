"""The sound example tasks (each one's oracle passes) in a fresh workspace, for the benchmarks that time
one oracle episode against another (bench_defences.py, bench_cleanroom.py).

Why shared: those benchmarks compare arms of the same episodes, so they must set up the same workspace the
same way (the same four tasks, imported as ``bandpass import`` does, the sandbox pool drained at the end);
written once here, two benchmarks cannot drift apart in what they measure.
"""

from __future__ import annotations

import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.sandbox import pool
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tasks"
#: The example tasks without a defect: their oracle passes, so every arm's episode should pass.
SOUND = ("access-log-report", "configure-kv-service", "fix-catalog-makefile", "fix-wordfreq")


@contextmanager
def sound_workspace() -> Iterator[tuple[Workspace, dict[str, int]]]:
    """A workspace in a temporary folder with the :data:`SOUND` tasks imported, and each task's version id
    by name; the sandbox pool is drained when the block ends (before the folder goes)."""
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.open(Path(tmp) / "ws")
        assert import_paths(ws, [EXAMPLES / name for name in SOUND]).ok
        with session(ws.engine) as s:
            vids = {r.name: r.version_id for r in queries.task_rows(s)}
        yield ws, vids
        pool.drain()


def phase_s(res: object, name: str) -> float:
    """The episode result's duration of phase ``name`` in seconds (0 when it has no such phase)."""
    return next((p["duration_s"] for p in res.phases if p["name"] == name), 0.0)  # type: ignore[attr-defined]
