"""The lock that tells a runner whether it is alone on a queue (a batch's episodes, an audit run's jobs).

Every runner of a queue holds one lock file shared while it works. A runner that starts takes it
exclusively first, without waiting: when that succeeds no other runner is alive, so rows still marked
``running`` were left by a dead one and are this runner's to hand back (``--resume``). Then it holds the
lock shared like every other runner. The kernel closes the file when the process dies, however it dies,
so a SIGKILLed runner never leaves the lock held. Both queues (engine/run/rollouts.py,
engine/audit/corpus.py) resume this way, so it is written once.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
from collections.abc import Iterator
from pathlib import Path

__all__ = ["runner_lock"]


@contextlib.contextmanager
def runner_lock(path: Path) -> Iterator[bool]:
    """Holds ``path`` shared for the body; yields True when no other runner held it at entry (we held it
    exclusively first, so stale rows are ours to requeue)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            alone = True
        except BlockingIOError:
            alone = False
        if not alone:
            fcntl.flock(fd, fcntl.LOCK_SH)
        yield alone
    finally:
        os.close(fd)  # closing drops the lock
