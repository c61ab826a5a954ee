"""The suite's one way to wait: for a condition, never for a fixed time.

Why: the suite runs on a loaded 2-core machine beside Docker builds; a fixed sleep (or ``pilot.pause(0.1)``)
is either too short there (a flaky failure) or wasted time everywhere else. ``wait_until`` polls a
condition from plain code (threads, subprocesses, containers); ``wait_for`` does the same in Textual pilot
tests while letting the app process its messages, and also reports the app's notifications (usually the
reason) when the condition does not come true. A deadline only ends a test that would otherwise hang.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from textual.screen import Screen

S = TypeVar("S", bound="Screen[Any]")

#: Generous: a deadline only ends a test that would otherwise hang; it is never what a test measures.
DEFAULT_TIMEOUT = 30.0


def wait_until(
    cond: Callable[[], Any], timeout: float = DEFAULT_TIMEOUT, what: str = "", interval: float = 0.05
) -> Any:
    """Returns ``cond()``'s first truthy value; raises AssertionError naming ``what`` after ``timeout``."""
    end = time.monotonic() + timeout
    while True:
        if value := cond():
            return value
        if time.monotonic() > end:
            label = what or getattr(cond, "__name__", "condition")
            raise AssertionError(f"{label} not met within {timeout:g} s")
        time.sleep(interval)


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


async def wait_for_screen(pilot: Any, cls: type[S], timeout: float = DEFAULT_TIMEOUT, what: str = "") -> S:
    """Waits until a ``cls`` screen is on top and returns it, typed: a test then reads that screen's own
    attributes (a checker sees ``app.screen`` only as a ``Screen``)."""
    label = what or f"{cls.__name__} on top"
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, cls), timeout, label)
    screen = pilot.app.screen
    assert isinstance(screen, cls), f"{cls.__name__} left the top again: {type(screen).__name__}"
    return screen


async def start_batch(pilot: Any) -> None:
    """Runs' ``n`` asks first (tui/screens/batch_confirm.py): press it, wait for the question, say yes."""
    from bandpass.tui.screens.batch_confirm import BatchConfirm

    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, BatchConfirm), what="the batch confirmation")
    await pilot.press("y")
