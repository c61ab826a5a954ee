"""Where a batch's episodes run: the one place a front end gets an executor from.

Why here: ``bandpass run``, the Runs screen and the Calibration screen's band round each built their
executor themselves (a name to a class, the concurrency default, Ray's options), three copies that could
drift — the screen had to keep Ray's worker logs off the TUI, the CLI had to refuse an address without
Ray. A front end now says what it wants in an :class:`ExecutorChoice` and gets an ``Executor`` back;
connecting it (Ray: joining the cluster) stays the caller's step, because each says a failed connection
in its own words before anything is planned. Refusals are ``ExecutorError`` (a ``BandpassError``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..run.executors import EXECUTORS, Executor, ExecutorError
from ..run.executors import make_executor as _build
from ..run.executors.base import default_concurrency

__all__ = ["EXECUTORS", "Executor", "ExecutorChoice", "ExecutorError", "default_concurrency", "make_executor"]

#: Ray's options for a driver inside the TUI: its worker logs would be printed over the screen, so they
#: stay in the cluster's log files.
QUIET_RAY = {"log_to_driver": False, "logging_level": "warning"}


@dataclass(frozen=True)
class ExecutorChoice:
    """``name`` is ``local`` (this Docker engine) or ``ray`` (a Ray cluster at ``address``, None: auto /
    ``RAY_ADDRESS``); ``concurrency`` None is :func:`default_concurrency` for local, Ray's own for Ray."""

    name: str = "local"
    concurrency: int | None = None
    address: str | None = None
    #: Keep Ray's worker output off the caller's terminal (a TUI owns it).
    quiet: bool = False


def make_executor(choice: ExecutorChoice) -> Executor:
    """The executor ``choice`` names, not yet connected (``connect()`` before planning a batch). Raises
    ``ExecutorError`` for an unknown name or a malformed Ray address."""
    options: dict[str, Any] = {}
    if choice.address is not None:
        options["address"] = choice.address
    if choice.quiet and choice.name == "ray":
        options["init_kwargs"] = QUIET_RAY
    return _build(choice.name, concurrency=choice.concurrency, **options)
