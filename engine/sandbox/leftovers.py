"""What ``bandpass gc`` looks at: Bandpass containers on this engine, grouped by the workspace that owns
them, and whether a runner is alive in that workspace.

Why: one engine is often shared by several workspaces (a curator's, a test run's, a colleague's). The old
``gc`` removed every Bandpass container, live episodes of other workspaces included. Now it counts per
workspace and asks before touching a workspace where a runner still holds a batch lock.
"""

from __future__ import annotations

import contextlib
import os
from collections import defaultdict
from pathlib import Path
from typing import Any

from engine.sandbox import labels as L


def containers_by_workspace(client: Any) -> dict[str, list[dict[str, Any]]]:
    """Every Bandpass container on the engine, keyed by its ``bandpass.workspace`` label ('' if none)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in client.api.containers(all=True, filters={"label": [f"{L.LABEL}=1"]}):
        out[(c.get("Labels") or {}).get(L.WORKSPACE, "")].append(c)
    return dict(out)


def _held_inodes() -> set[int]:
    """Inodes with a lock held by any process on this machine (``/proc/locks``; no lock is taken)."""
    held: set[int] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            parts = line.split()
            dev_ino = next((p for p in parts if p.count(":") == 2), "")
            with contextlib.suppress(ValueError):
                held.add(int(dev_ino.rsplit(":", 1)[1]))
    return held


def live_batches(workspace: str) -> list[str]:
    """Batches of ``workspace`` whose lock a runner holds now (read from ``/proc/locks``, never by
    trying the lock, which would make a runner starting at that moment think it is not alone)."""
    locks = Path(workspace) / ".locks"
    if not locks.is_dir():
        return []
    held = _held_inodes()
    out = []
    for f in sorted(locks.glob("batch-*.lock")):
        with contextlib.suppress(OSError):
            if os.stat(f).st_ino in held:
                out.append(f.stem.removeprefix("batch-"))
    return out


def remove(client: Any, containers: list[dict[str, Any]]) -> int:
    import docker

    n = 0
    for c in containers:
        with contextlib.suppress(docker.errors.NotFound):
            client.api.remove_container(c["Id"], force=True)
            n += 1
    return n


__all__ = ["containers_by_workspace", "live_batches", "remove"]
