"""Fixtures shared by the front ends' tests."""

from __future__ import annotations

import pytest

from bandpass.engine.core.workspace import Workspace


@pytest.fixture
def ws(workspace: Workspace) -> Workspace:
    """An empty workspace (the cockpit's tests call it ``ws``; a module that needs rows seeds its own)."""
    return workspace
