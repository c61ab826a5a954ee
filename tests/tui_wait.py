"""Waiting in Textual pilot tests: for a condition, never for a fixed time.

Why: the suite runs on a loaded 2-core machine beside Docker builds; a fixed ``pilot.pause(0.1)`` is
either too short there (a flaky failure) or wasted time everywhere else. ``wait_for`` polls a condition
while letting the app process its messages, and fails with what it was waiting for and the app's
notifications (usually the reason) when the condition does not come true in time.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

#: Generous: a deadline only ends a test that would otherwise hang; it is never what a test measures.
DEFAULT_TIMEOUT = 30.0


async def wait_for(
    pilot: Any, cond: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT, what: str = ""
) -> None:
    """Returns as soon as ``cond()`` is truthy; raises AssertionError after ``timeout`` seconds."""
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            notes = [str(n.message) for n in pilot.app._notifications]
            label = what or getattr(cond, "__name__", "condition")
            raise AssertionError(f"{label} not met within {timeout:g} s; notifications: {notes}")
        await pilot.pause(0.02)  # a poll interval that lets the app run; the condition decides
