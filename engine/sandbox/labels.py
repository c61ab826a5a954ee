"""The labels an episode's container carries, so cleanup can find it wherever it runs.

Why a module of its own: on a Ray node an episode runs in a private scratch workspace, but its container
must carry the *head* workspace's identity and the batch id, or the head's ``--resume`` and ``bandpass gc
--workspace/--batch`` cannot find what a dead driver or node left behind. A scratch workspace says whose it
is in a small marker file (``HEAD_MARKER``); ``episode_labels`` reads it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

LABEL = "bandpass"
WORKSPACE = "bandpass.workspace"  # the head workspace's root (its identity)
BATCH = "bandpass.batch"  # the rollout batch, when the episode belongs to one
SCRATCH = "bandpass.scratch"  # a Ray worker's scratch workspace root (removed with the container)
#: The process that started the container: ``host:pid:start-ticks:boot:pid-namespace``
#: (engine/sandbox/owner.py). A container whose owner is gone is reaped by the next Bandpass start.
OWNER = "bandpass.owner"
#: When the container's hard lifetime ends (Unix time, seconds): past it, it is reaped whoever owns it.
EXPIRES = "bandpass.expires"
#: File in a scratch workspace naming the head workspace and batch it runs for.
HEAD_MARKER = ".bandpass-head.json"


def head_of(root: Path) -> dict[str, Any]:
    """The marker of a scratch workspace (``{}`` for an ordinary one or an unreadable marker)."""
    try:
        data = json.loads((Path(root) / HEAD_MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def episode_labels(root: Path, batch_id: str = "") -> dict[str, str]:
    """Labels for an episode's container run from workspace ``root`` (a scratch one maps to its head)."""
    head = head_of(root)
    labels = {WORKSPACE: str(head.get("workspace") or root)}
    batch = batch_id or str(head.get("batch") or "")
    if batch:
        labels[BATCH] = batch
    if head:
        labels[SCRATCH] = str(root)
    return labels


__all__ = [
    "BATCH",
    "EXPIRES",
    "HEAD_MARKER",
    "LABEL",
    "OWNER",
    "SCRATCH",
    "WORKSPACE",
    "episode_labels",
    "head_of",
]
