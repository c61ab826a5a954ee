"""A small deterministic workspace for the cockpit's tests: tasks, audits and finished episodes.

Shared by the main-flow pilot tests, the curator's-day tests and the SVG snapshots, which must all see the
same rows (the snapshots are pictures of exactly this data).
"""

from __future__ import annotations

from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk


def seed(ws: Workspace, n: int = 12) -> list[int]:
    """``n`` tasks with audits and some oracle/model episodes, deterministic."""
    vids: list[int] = []
    with session(ws.engine) as s:
        for i in range(n):
            task, _ = q.get_or_create_task(s, f"task-{i:02d}")
            tv = q.add_task_version(
                s,
                task,
                version_hash=f"{i:064x}",
                path=f"tasks/task-{i:02d}",
                instruction=f"Write the number {i} to /app/out.txt.",
                category=("data", "sys", "build")[i % 3],
                difficulty=("easy", "medium", "hard")[i % 3],
            )
            vid = pk(tv)
            vids.append(vid)
            if i % 2 == 0:
                q.record_audit(s, vid, verdict=("accepted", "rejected")[i % 4 == 2], reasons=[], details={})
            for a in range(i % 5):
                ep = q.create_episode(s, vid, "m1", attempt=a)
                q.finish_episode(s, pk(ep), outcome=("passed", "failed")[a % 2], reward=float(a % 2 == 0))
    return vids
