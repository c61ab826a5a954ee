"""The harness probes run alone: no other audit episode of this process beside them.

``cheat:fork_bomb`` must reach the container's pid limit before its shell gives up, and
``cheat:memory_hog`` must fill its memory before the agent's deadline: bounds a loaded machine stretches.
Run sequentially, an audit's probes share the machine with one other probe episode; run ``--concurrency
N`` at a time, with up to 2N. Measured on two cores at load 10, the fork bomb then ended ``failed``
instead of ``agent_error:pids_exhausted`` — a verdict (``harness.sandbox_attribution``) made by the
scheduling, not by the sandbox. So a harness probe takes this process's audit episodes exclusively (a
readers-writer lock that prefers the writer: probe episodes already running finish, new ones wait). They run
once per setting (engine/audit/probe_cache.py), so the wait is paid once per corpus, not per task. On a Ray
cluster each audit has a worker process of its own: a node with one CPU per audit runs one audit at a time.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager

__all__ = ["alone", "beside"]

_cond = threading.Condition()
_readers = 0
_writing = False
_writers_waiting = 0


@contextmanager
def beside() -> Iterator[None]:
    """An ordinary audit episode: any number at once, none while a harness probe runs or waits."""
    global _readers
    with _cond:
        _cond.wait_for(lambda: not _writing and _writers_waiting == 0)
        _readers += 1
    try:
        yield
    finally:
        with _cond:
            _readers -= 1
            _cond.notify_all()


@contextmanager
def alone() -> Iterator[None]:
    """A harness probe: once the episodes running beside it have ended, and alone until it ends."""
    global _writing, _writers_waiting
    with _cond:
        _writers_waiting += 1
        _cond.wait_for(lambda: not _writing and _readers == 0)
        _writers_waiting -= 1
        _writing = True
    try:
        yield
    finally:
        with _cond:
            _writing = False
            _cond.notify_all()
