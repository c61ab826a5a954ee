"""Answers from thread workers that may reach a screen already taken down.

A worker runs off the event loop and hands its result back with ``app.call_from_thread``. Between the two,
the curator can leave the screen or quit the app: Textual then removes the screen's widgets, and the answer
finds none of them (``NoMatches``). That answer has nobody left to show it to, so it is dropped rather than
crashing an app that is closing (seen in CI: the Tasks screen's audit poll answering during shutdown).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Concatenate, ParamSpec, TypeVar

from textual.css.query import NoMatches
from textual.dom import DOMNode

P = ParamSpec("P")
N = TypeVar("N", bound=DOMNode)


def dropped_once_gone(method: Callable[Concatenate[N, P], None]) -> Callable[Concatenate[N, P], None]:
    """Runs ``method`` on the screen's widgets; if they are gone while the screen is no longer running, the
    answer is dropped. A missing widget on a screen that is still up is a bug and still raises."""

    def answer(self: N, /, *args: P.args, **kwargs: P.kwargs) -> None:
        if not self.is_attached:
            return
        try:
            method(self, *args, **kwargs)
        except NoMatches:
            gone = not self.app.is_running or self._closing or self._pruning or not self.is_attached
            if not gone:
                raise

    functools.update_wrapper(answer, method)
    return answer
