"""What the host sees of a container, read outside it: the policy cannot forge any of it.

The overlay2 upper directory's allocated blocks (the writable layer against the task's ``storage_mb``),
the container's pid and memory cgroups found through ``/proc/<init pid>/cgroup`` (forks refused, OOM
kills under its own limit, whether its usage ever reached that limit). Separate from the watcher because
these are plain file reads with no Docker client or thread: each is testable on a directory alone.
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import docker

from ._common import _int

CGROUP_ROOT = Path("/sys/fs/cgroup")


def layer_bytes(upper: Path) -> int:
    """Disk blocks allocated under an overlay2 upper directory (hard links counted once; symlinks never
    followed; a sparse file counts what it holds, not its apparent size)."""
    total, seen, stack = 0, set(), [str(upper)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for entry in it:
                try:
                    st = entry.stat(follow_symlinks=False)
                except OSError:
                    continue
                if st.st_nlink > 1 and not stat.S_ISDIR(st.st_mode):
                    if st.st_ino in seen:
                        continue
                    seen.add(st.st_ino)
                total += st.st_blocks * 512
                if stat.S_ISDIR(st.st_mode):
                    stack.append(entry.path)
    return total


def host_cgroup_dir(pid: str, controller: str) -> Path | None:
    """The host's cgroup directory of ``controller`` for a host pid (v1 controller line first, then v2)."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    v2 = None
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        if controller in ctrls.split(","):
            d = CGROUP_ROOT / controller / path.lstrip("/")
            if d.is_dir():
                return d
        elif ctrls == "":
            v2 = CGROUP_ROOT / path.lstrip("/")
    return v2 if v2 is not None and (v2 / f"{controller}.max").exists() else None


def read_pids_cgroup(d: Path) -> tuple[int | None, int | None, int | None]:
    """(current, peak, forks refused at the limit) from a pid cgroup directory on the host."""

    def read(name: str) -> str:
        try:
            return (d / name).read_text()
        except OSError:
            return ""

    hits = None
    for line in read("pids.events").splitlines():
        k, _, v = line.partition(" ")
        if k == "max":
            hits = _int(v)
    return _int(read("pids.current").strip()), _int(read("pids.peak").strip()), hits


def read_memory_oom_kills(d: Path) -> int | None:
    """OOM kills under a memory cgroup's own limit since it was created, from its directory on the host."""
    for name in ("memory.oom_control", "memory.events"):  # cgroup v1, v2
        try:
            text = (d / name).read_text()
        except OSError:
            continue
        for line in text.splitlines():
            k, _, v = line.partition(" ")
            if k == "oom_kill":
                return _int(v)
    return None


def memory_limit_reached(d: Path) -> bool | None:
    """Whether the memory cgroup's usage ever reached its limit: its peak (v1 ``memory.max_usage_in_bytes``
    and the memory+swap one, v2 ``memory.peak``) within 2% of the limit, or the kernel's own counts of the
    limit refusing a charge (v1 ``failcnt``, v2 ``memory.events`` ``max``/``oom``). An OOM kill in a
    cgroup that never got there was the host's doing (a global OOM also counts in ``oom_kill``). The peak
    is read because this kernel's v1 ``failcnt`` stays 0 even under a limit OOM. None when unreadable."""

    def read(name: str) -> str | None:
        try:
            return (d / name).read_text().strip()
        except OSError:
            return None

    limit = read("memory.limit_in_bytes") or read("memory.max")
    if limit is None or not limit.isdigit():
        return None  # unreadable, or no limit ("max"): nothing to reach
    lim = int(limit)
    peaks = [read(n) for n in ("memory.max_usage_in_bytes", "memory.memsw.max_usage_in_bytes", "memory.peak")]
    counts = [read(n) for n in ("memory.failcnt", "memory.memsw.failcnt")]
    for line in (read("memory.events") or "").splitlines():
        k, _, v = line.partition(" ")
        if k in ("max", "oom"):
            counts.append(v)
    if any((_int(c) or 0) > 0 for c in counts if c):
        return True
    known = [_int(p) for p in peaks if p and p.isdigit()]
    if not known:
        return None
    return max(x or 0 for x in known) >= lim - max(2**20, lim // 50)


def _engine_is_local(client: docker.DockerClient) -> bool:
    """A unix-socket engine shares this kernel, so the container's cgroups can be read here."""
    return str(getattr(client.api, "base_url", "")).startswith("http+docker://localhost")
