"""Fixtures shared by the whole suite. Docker fixtures never skip: CI has an engine (scripts/test starts
one). Fixtures used in one folder live in that folder's conftest.py; shared code that is not a fixture
(task builders, scripted servers, waits) lives in tests/support/."""

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


@pytest.fixture
def workspace(tmp_path: Path) -> Workspace:
    return Workspace.open(tmp_path / "ws")


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    """The demo workspace ``bandpass demo`` opens, built from the committed samples (no Docker); one per
    module, since a module may change it (the monkey tags, the tour opens screens)."""
    from bandpass.tui.commands.demo import prepare_demo  # the front end's, imported only by who needs it

    ws, added, warnings = prepare_demo(tmp_path_factory.mktemp("demo") / "ws")
    assert added > 30 and warnings == []
    return ws
