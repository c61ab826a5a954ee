"""Fixtures shared by the policy's tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.servers.openai_server import OpenAIServer, running_server


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    """The scripted OpenAI-compatible server on 127.0.0.1 (standing in for ``vllm serve``), spoken to by the
    real ``openai`` SDK."""
    with running_server() as s:
        yield s
