"""UiCaller: run a callable on the UI thread from *any* thread, without waiting.

Why not ``post_message`` or ``App.call_from_thread``: both look up the running app through a context
variable that Textual sets only in its own threads and workers. The engine's threads (rollout runners,
terminal readers) are plain ``threading.Thread``s, where that lookup raises ``NoActiveAppError``; and
``call_from_thread`` blocks the caller until the UI has run the call, which would let a slow UI stall a
terminal reader. This helper captures the event loop and the UI's context once, on the UI thread, and
schedules calls with ``call_soon_threadsafe`` in that context.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import threading
from collections.abc import Callable
from typing import Any


class UiCaller:
    """Create on the UI thread (e.g. in ``on_mount``); ``call`` from anywhere."""

    def __init__(self) -> None:
        self.loop = asyncio.get_running_loop()
        self.context = contextvars.copy_context()
        self.thread = threading.get_ident()

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        if threading.get_ident() == self.thread:
            fn(*args)
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: the app is gone, drop the call
            self.loop.call_soon_threadsafe(fn, *args, context=self.context)
