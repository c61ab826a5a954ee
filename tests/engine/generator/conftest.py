"""Fixtures shared by the generator's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers.anthropic_server import AnthropicServer, running_server


@pytest.fixture
def server() -> Iterator[AnthropicServer]:
    """The scripted Messages server on 127.0.0.1, spoken to by the real ``anthropic`` SDK."""
    with running_server() as s:
        yield s
