"""Which process owns a container, said so that any other process on the same machine can tell whether
that owner is still alive.

Why more than a pid: pids are reused, so a label ``pid=1234`` alone would keep a dead owner's containers
forever once another process got 1234 (or reap a live one's). The owner is therefore the pid *and its start
time* (``/proc/<pid>/stat`` field 22, clock ticks since boot), on this host name, this boot (the kernel's
``boot_id``) and this pid namespace (two containers running Bandpass on one engine have separate pid
spaces). Only an owner of the same host, boot and pid namespace can be judged here; any other is
``unknown`` and never reaped automatically (``bandpass gc`` removes those when asked). One exception: on a
local engine, a container created before this machine booted has an owner from an earlier boot of this
machine, and every such process is gone.
"""

from __future__ import annotations

import contextlib
import os
import socket
import time
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ALIVE, GONE, UNKNOWN = "alive", "gone", "unknown"


@dataclass(frozen=True)
class Owner:
    host: str
    pid: int
    start: int  # clock ticks after boot when the process started
    boot: str  # the first 8 hex digits of the kernel's boot_id
    pidns: str  # the inode of the pid namespace (``/proc/self/ns/pid``)

    def label(self) -> str:
        return f"{self.host}:{self.pid}:{self.start}:{self.boot}:{self.pidns}"

    @classmethod
    def parse(cls, text: str) -> Owner | None:
        """The owner a label names, None for anything else (an older label, a hand-made one)."""
        parts = (text or "").rsplit(":", 4)
        if len(parts) != 5 or not parts[0]:
            return None
        host, pid, start, boot, pidns = parts
        if not (pid.isdigit() and start.isdigit()):
            return None
        return cls(host, int(pid), int(start), boot, pidns)


def _read(path: str) -> str:
    try:
        return Path(path).read_text(encoding="ascii", errors="replace")
    except OSError:
        return ""


def _stat_fields(pid: int) -> list[str]:
    """The fields of ``/proc/<pid>/stat`` after the command name (which may hold spaces and parens):
    index 0 is the state (field 3), index 19 the start time (field 22); [] when there is no such pid."""
    text = _read(f"/proc/{pid}/stat")
    return text.rpartition(")")[2].split() if text else []


def _boot() -> str:
    return _read("/proc/sys/kernel/random/boot_id").strip().replace("-", "")[:8]


def _pidns() -> str:
    with contextlib.suppress(OSError):
        return str(os.stat("/proc/self/ns/pid").st_ino)
    return ""


@cache
def _current(pid: int) -> Owner:
    fields = _stat_fields(pid)
    start = int(fields[19]) if len(fields) > 19 and fields[19].isdigit() else 0
    return Owner(socket.gethostname(), pid, start, _boot(), _pidns())


def current() -> Owner:
    """This process (recomputed after a fork: the child is another owner)."""
    return _current(os.getpid())


def boot_time() -> float:
    """When this machine booted (wall clock, seconds), from ``/proc/stat``'s ``btime``; 0 if unknown."""
    for line in _read("/proc/stat").splitlines():
        if line.startswith("btime "):
            with contextlib.suppress(ValueError):
                return float(line.split()[1])
    return 0.0


def pid_started(pid: int) -> int | None:
    """The start time (clock ticks after boot) of a live, non-zombie process; None when there is none."""
    fields = _stat_fields(pid)
    if len(fields) <= 19 or fields[0] in ("Z", "X"):
        return None
    return int(fields[19]) if fields[19].isdigit() else None


def liveness(owner: Owner | None, *, created: float = 0.0, local_engine: bool = True) -> tuple[str, str]:
    """(``alive`` | ``gone`` | ``unknown``, why) for an owner label's process.

    ``created`` is the container's creation time (wall clock) and ``local_engine`` whether the engine runs
    on this machine: together they recognise a container left from before this machine's last boot."""
    if owner is None:
        return UNKNOWN, "no owner label"
    me = current()
    if owner.host != me.host:
        return UNKNOWN, f"owner on host {owner.host}"
    if owner.boot != me.boot:
        booted = boot_time()
        if local_engine and created and booted and created < booted:
            return GONE, f"pid {owner.pid} ran before this machine's last boot"
        return UNKNOWN, f"owner of another boot ({owner.boot})"
    if owner.pidns != me.pidns:
        return UNKNOWN, f"owner in another pid namespace ({owner.pidns})"
    started = pid_started(owner.pid)
    if started is None:
        return GONE, f"pid {owner.pid} has exited"
    if started != owner.start:
        return GONE, f"pid {owner.pid} has exited (the pid now belongs to another process)"
    return ALIVE, f"pid {owner.pid} is running"


def uptime() -> float:
    """Seconds since boot (``/proc/uptime``): the clock a container on a local engine shares with us."""
    with contextlib.suppress(ValueError, IndexError):
        return float(_read("/proc/uptime").split()[0])
    return time.monotonic()


__all__ = ["ALIVE", "GONE", "UNKNOWN", "Owner", "boot_time", "current", "liveness", "pid_started", "uptime"]
