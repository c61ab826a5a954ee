"""The container as the host sees it: what the policy cannot forge, read without running anything inside.

After the agent phase the policy has been root in its container for as long as it liked: any program the
harness would run in there (``sh``, ``rm``, even a shell redirection to ``/dev/null``) may have been
replaced or made to block. So the steps after the agent read the container from outside:

* :func:`freeze` / :func:`thaw`: the engine's cgroup freezer (``docker pause``): every process stops at
  once, a fork loop included, without a signal the policy could catch;
* :func:`dev_findings`: the container's ``/dev`` through ``/proc/<init>/root`` (``/dev`` is a tmpfs the
  end-state capture never sees, and the engine's archive API reads the image's ``/dev``, not the live
  one): ``mkfifo /dev/null`` or a directory where ``/dev/fd`` belongs;
* :func:`processes` / :func:`listeners`: the container's processes (``docker top``) and which of them hold
  a listening TCP socket (``/proc/<pid>/net/tcp*`` and ``/proc/<pid>/fd``): the service an in-place task
  leaves running;
* :func:`kill_except`: SIGKILL from the host to every process but init, the main command (with its
  timers) and the ones kept, while the container is frozen, so nothing forks in between.

All of it needs the engine on this host and root here (``/proc/<pid>/root`` and ``/proc/<pid>/fd`` of
another user's processes); :func:`local` says whether that holds, and callers fall back to the engine's
own API when it does not.
"""

from __future__ import annotations

import contextlib
import os
import signal
import stat
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import docker

from . import lifeline

#: Docker's ``/dev`` for a container without a tty: name -> (kind, link target). Anything else there is
#: reported, these must be as listed.
DOCKER_DEV: dict[str, tuple[str, str]] = {
    "null": ("char", ""),
    "zero": ("char", ""),
    "full": ("char", ""),
    "random": ("char", ""),
    "urandom": ("char", ""),
    "tty": ("char", ""),
    "fd": ("symlink", "/proc/self/fd"),
    "stdin": ("symlink", "/proc/self/fd/0"),
    "stdout": ("symlink", "/proc/self/fd/1"),
    "stderr": ("symlink", "/proc/self/fd/2"),
    "ptmx": ("symlink", "pts/ptmx"),
    "pts": ("dir", ""),
    "shm": ("dir", ""),
    "mqueue": ("dir", ""),
}
#: Entries the engine adds in some set-ups (a console for tty containers, core on older engines).
_OPTIONAL_DEV = {"console", "core"}
#: Bandpass's own read-only bind mounts in /dev (engine/sandbox/lifeline.py): the owner's pipe and the
#: watchdog script, with the kind each must have.
_HARNESS_DEV = {
    lifeline.MOUNT.rsplit("/", 1)[1]: "fifo",
    lifeline.SCRIPT_MOUNT.rsplit("/", 1)[1]: "file",
}
_TCP_LISTEN = "0A"


def local(client: docker.DockerClient) -> bool:
    """The engine shares this host's kernel and we may read other users' ``/proc`` entries."""
    return (
        str(getattr(client.api, "base_url", "")).startswith("http+docker://localhost") and os.geteuid() == 0
    )


def init_pid(client: docker.DockerClient, container_id: str) -> int | None:
    try:
        pid = int((client.api.inspect_container(container_id).get("State") or {}).get("Pid") or 0)
    except Exception:  # noqa: BLE001 - a removed container, a daemon gone: nothing to read
        return None
    return pid or None


def freeze(client: docker.DockerClient, container_id: str) -> bool:
    """Pauses the container (cgroup freezer); False when it is not running (dead, already paused)."""
    try:
        client.api.pause(container_id)
        return True
    except docker.errors.APIError:
        return False


def thaw(client: docker.DockerClient, container_id: str, attempts: int = 3) -> None:
    """Unpauses the container; a refusal on a loaded engine is tried again (a container left frozen
    would fail every later exec as if it had died). One that is not paused (any more) is left alone."""
    for i in range(attempts):
        try:
            client.api.unpause(container_id)
            return
        except docker.errors.NotFound:
            return
        except docker.errors.APIError as exc:
            if "not paused" in str(exc).lower() or i == attempts - 1:
                return
        time.sleep(0.2 * (i + 1))


def file_kind(mode: int) -> str:
    """The kind of file an ``lstat`` mode names, in the words findings and end states use."""
    if stat.S_ISCHR(mode):
        return "char"
    if stat.S_ISBLK(mode):
        return "block"
    if stat.S_ISLNK(mode):
        return "symlink"
    if stat.S_ISDIR(mode):
        return "dir"
    if stat.S_ISFIFO(mode):
        return "fifo"
    if stat.S_ISSOCK(mode):
        return "socket"
    return "file"


def dev_findings(pid: int) -> list[tuple[str, str]] | None:
    """``(path, why)`` for every ``/dev`` entry that is not what Docker put there; None when unreadable.

    Read through ``/proc/<pid>/root/dev`` on the host: ``lstat`` only, nothing opened, so a FIFO costs
    nothing to look at."""
    base = Path(f"/proc/{pid}/root/dev")
    try:
        names = set(os.listdir(base))
    except OSError:
        return None
    out: list[tuple[str, str]] = []
    for name in sorted(names | set(DOCKER_DEV)):
        want = DOCKER_DEV.get(name)
        try:
            st = os.lstat(base / name)
        except FileNotFoundError:
            if want is not None:
                out.append((f"/dev/{name}", "missing"))
            continue
        except OSError:
            continue
        got = file_kind(st.st_mode)
        if name in _HARNESS_DEV:
            if got != _HARNESS_DEV[name]:
                out.append((f"/dev/{name}", f"a {got} where Bandpass mounts a {_HARNESS_DEV[name]}"))
            continue
        if want is None:
            if name not in _OPTIONAL_DEV:
                out.append((f"/dev/{name}", f"a {got} Docker does not put in /dev"))
            continue
        if got != want[0]:
            out.append((f"/dev/{name}", f"a {got} where Docker puts a {want[0]}"))
        elif got == "symlink":
            with contextlib.suppress(OSError):
                target = os.readlink(base / name)
                if target != want[1]:
                    out.append((f"/dev/{name}", f"points to {target}, not {want[1]}"))
    return out


@dataclass
class Process:
    pid: int  # on the host
    ppid: int
    cmd: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def processes(client: docker.DockerClient, container_id: str) -> list[Process] | None:
    """Every process of the container with its host pid (``docker top``: ps on the host)."""
    try:
        top = client.api.top(container_id, ps_args="-eo pid,ppid,args")
    except Exception:  # noqa: BLE001 - some engines refuse ps_args: retried without them
        try:
            top = client.api.top(container_id)
        except Exception:  # noqa: BLE001 - no process list: the caller reads None as unknown
            return None
    titles = [t.upper() for t in top.get("Titles") or []]
    out = []
    for row in top.get("Processes") or []:
        d = dict(zip(titles, row, strict=False))
        try:
            out.append(
                Process(int(d["PID"]), int(d.get("PPID") or 0), str(d.get("COMMAND") or d.get("CMD", "")))
            )
        except (KeyError, ValueError):
            continue
    return out


def _listening_inodes(pid: int) -> dict[str, int]:
    """socket inode -> port for every TCP socket in LISTEN state in the process's network namespace."""
    out: dict[str, int] = {}
    for name in ("tcp", "tcp6"):
        try:
            lines = Path(f"/proc/{pid}/net/{name}").read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            f = line.split()
            if len(f) > 9 and f[3] == _TCP_LISTEN:
                with contextlib.suppress(ValueError):
                    out[f[9]] = int(f[1].rsplit(":", 1)[1], 16)
    return out


@dataclass
class Listener:
    pid: int  # on the host
    port: int
    cmd: str

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def listeners(client: docker.DockerClient, container_id: str) -> list[Listener]:
    """The container's processes holding a listening TCP socket (empty when none, or unreadable)."""
    init = init_pid(client, container_id)
    procs = processes(client, container_id)
    if init is None or not procs:
        return []
    inodes = _listening_inodes(init)
    if not inodes:
        return []
    found: list[Listener] = []
    for p in procs:
        try:
            fds = os.listdir(f"/proc/{p.pid}/fd")
        except OSError:
            continue
        ports = set()
        for fd in fds:
            with contextlib.suppress(OSError):
                link = os.readlink(f"/proc/{p.pid}/fd/{fd}")
                if link.startswith("socket:[") and link[8:-1] in inodes:
                    ports.add(inodes[link[8:-1]])
        found.extend(Listener(p.pid, port, p.cmd) for port in sorted(ports))
    return found


def _tree(procs: list[Process], roots: list[int]) -> set[int]:
    """``roots`` and every descendant of theirs: the main command (the lifeline watchdog) with the timers
    it started at boot. No policy process can be one: they start from ``docker exec`` or are orphans that
    init adopts, and the watchdog forks nothing after boot. Killing a timer's ``sleep`` before its shell
    would let that shell end the watchdog, and with it the container."""
    tree = set(roots)
    grew = True
    while grew:
        grew = False
        for p in procs:
            if p.ppid in tree and p.pid not in tree:
                tree.add(p.pid)
                grew = True
    return tree


def kill_except(client: docker.DockerClient, container_id: str, keep: set[int]) -> list[Process]:
    """SIGKILLs every process of the container except init, its main command and ``keep`` (host pids),
    with the container frozen in between (nothing forks); returns what was killed. The container is left
    running (thawed), unless the caller had frozen it already: then it stays frozen (the killed processes
    die when it is thawed, before running another instruction)."""
    init = init_pid(client, container_id)
    frozen = freeze(client, container_id)
    killed: list[Process] = []
    try:
        procs = processes(client, container_id) or []
        children = sorted((p for p in procs if p.ppid == init), key=lambda p: p.pid)
        spared = {init, *_tree(procs, [p.pid for p in children[:1]]), *keep}
        for p in procs:
            if p.pid in spared:
                continue
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(p.pid, signal.SIGKILL)
                killed.append(p)
    finally:
        if frozen:
            thaw(client, container_id)
    return killed


__all__ = [
    "DOCKER_DEV",
    "Listener",
    "Process",
    "dev_findings",
    "freeze",
    "init_pid",
    "kill_except",
    "listeners",
    "local",
    "processes",
    "thaw",
]
