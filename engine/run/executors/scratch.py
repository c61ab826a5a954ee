"""A node's private scratch workspace: where a Ray worker runs one remote episode or one remote audit.

A worker never opens the head's store (engine/run/executors/ray_executor.py says why), so the unit of work
runs against a workspace of its own: a temporary directory, marked with the head's workspace and the
batch (the container labels and the node clean-up read that marker, engine/sandbox/labels.py), holding the
head's bandpass.toml, the task version's files unpacked from the tar the head shipped, and a SQLite file
with just that task and version under the head's ids. The episode rows differ (a remote episode carries
its own row, a remote audit an id floor), so each caller adds its own; the rest is this one function, as
is the end of it (``release_scratch``), so both kinds of remote work set up and leave a node the same way.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import tarfile
import tempfile
from pathlib import Path
from typing import Any

from ...core.workspace import Workspace
from ...sandbox.labels import HEAD_MARKER, SCRATCH
from .node_cleanup import SCRATCH_PREFIX, remove_labelled

__all__ = ["release_scratch", "scratch_workspace"]


def scratch_workspace(
    *,
    name: str,
    marker: dict[str, Any],
    config_toml: str,
    version: dict[str, Any],
    task_name: str,
    task_tar: bytes,
) -> Workspace:
    """A fresh scratch workspace (``<SCRATCH_PREFIX><name>-…``) holding the task version ``version`` (a
    row's fields, head ids) of task ``task_name``, its files from ``task_tar``, and the head's config."""
    from ....store.db import session
    from ....store.models import Task, TaskVersion

    root = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}{name}-"))
    # Written first: the container's labels (engine.sandbox.labels) and node clean-up read it.
    (root / HEAD_MARKER).write_text(json.dumps(marker), encoding="utf-8")
    ws = Workspace.open(root)
    if config_toml:
        ws.config_path.write_text(config_toml, encoding="utf-8")
    dest = ws.abs(version["path"])
    dest.mkdir(parents=True, exist_ok=True)
    with tarfile.open(fileobj=io.BytesIO(task_tar), mode="r") as tar:
        tar.extractall(dest, filter="data")
    with session(ws.engine) as s:
        s.add(Task(id=version["task_id"], name=task_name))
        s.flush()
        s.add(TaskVersion(**version))
    return ws


def release_scratch(ws: Any, *, cancelled: bool = False) -> None:
    """Ends a scratch workspace: its container when the episode was cancelled mid-way (the episode thread
    dies with the process), its database engine, its directory. Nothing of it outlives the episode."""
    if cancelled:
        with contextlib.suppress(Exception):
            remove_labelled({SCRATCH: str(ws.root)})
    # The scratch database's engine holds descriptors (pool, WAL): dispose it before removing the
    # directory, or every episode leaks them for the life of the worker process.
    with contextlib.suppress(Exception):
        ws.engine.dispose()
    shutil.rmtree(ws.root, ignore_errors=True)
