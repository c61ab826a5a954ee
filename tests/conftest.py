"""Shared fixtures. Docker fixtures never skip: CI has an engine (scripts/test starts one)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandpass.engine.app import episode_hooks
from bandpass.engine.core.workspace import Workspace

# The suite's episodes end as `bandpass run`'s do (the CLI and the TUI wire the same): diagnosed before
# EpisodeFinished is published, and indexed for search as their batch runs (engine/app/episode_hooks.py).
episode_hooks.install()

#: Task fixtures carry their own pytest files (they run inside containers), never collected here.
collect_ignore_glob = ["fixtures/*"]

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "tasks"


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.open(tmp_path / "ws")
