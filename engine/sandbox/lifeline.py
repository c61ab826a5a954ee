"""A container's lifeline: it ends on its own when the process that started it is gone, and at its latest
when its hard lifetime runs out.

Why: a container outlives whatever made it unless something removes it, and the process that should is
exactly the one that may be gone (SIGKILLed, its machine's job killed, Ctrl-C during an atexit). So the
bound is built into the container itself, from the host side, with nothing installed into the task image:

* **The lifeline** is a named pipe (FIFO) the owner creates per container in a private directory
  (``<tmp>/bandpass-lifelines-<uid>/<pid>-<start>/``), holds open for writing, and bind-mounts read-only
  at :data:`MOUNT`. The container's main process (under Docker's init) is :data:`WATCHDOG`, a ``/bin/sh``
  script of builtins that blocks reading the pipe. The kernel closes the owner's end the instant the
  owner exits, however it exits (SIGKILL included), and so does the owner when it releases the container:
  the read sees end-of-file, the script exits, init exits, and the kernel kills every process in the
  container's pid namespace, a fork bomb included. Measured: the container stops ~0.1 s after the owner's
  end closes. The engine can restart meanwhile: the pipe does not go through it.
* **The hard lifetime** is a ``sleep`` the script starts at boot (before any policy action, so the image's
  ``sleep`` cannot have been replaced yet) and a builtin ``kill`` of the script when it ends. On a local
  engine it is an absolute deadline on the kernel's uptime clock, which the container shares: a
  restart by the harness does not extend it. It is computed from the task's timeouts
  (``SandboxSpec.max_lifetime_s``), generous enough that a live owner's episode never meets it.
* **A pipe nobody holds** cannot be opened for reading (the open blocks): if the engine starts the
  container after its owner died (a start request in flight at a SIGKILL), a second timer started at boot
  ends the watchdog when it has not opened the pipe within ``OPEN_GRACE_S``. A pipe that cannot be
  opened at all (refused at once) leaves the hard lifetime as the only bound.

What the policy (root in the container, every capability dropped) can and cannot do: it cannot write,
``chmod`` or remove the pipe (mode 0444 on a read-only bind mount over ``/dev``'s tmpfs: no
``CAP_DAC_OVERRIDE``, no ``CAP_SYS_ADMIN``), so it can neither hold it open to outlive its owner nor
forge an end-of-file; the watchdog reads only its inherited descriptor and ``/proc/uptime`` and runs no
program after boot, so replacing binaries changes nothing. It *can* signal the watchdog (same uid): killing
it ends its own container during the agent phase, which attribution already judges as the policy's
(``agent_error:sandbox_killed``); stopping it (SIGSTOP) would take this layer away, which is why the owner
still removes its containers, ``reap_on_start`` removes those of dead owners, and the capture phase kills
every policy process before the verifier (it keeps the watchdog and its timer, nothing else).

A remote engine (``DOCKER_HOST`` over TCP/SSH) cannot see this machine's files: there the container gets
the hard lifetime only, and reaping on start covers the rest.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
import threading
import uuid
import weakref
from pathlib import Path
from typing import Any

from . import owner as owner_mod

#: Where the pipe appears in the container: ``/dev`` is the engine's tmpfs, so the mount point is not
#: written into the container's layer (it never shows in the end-state diff).
MOUNT = "/dev/bandpass-lifeline"
#: Where the watchdog script appears (read-only too), so ``ps`` in the container shows one short line.
SCRIPT_MOUNT = "/dev/bandpass-watchdog"
#: The name the watchdog's ``sh`` runs under (``$0``), so ``ps`` in the container says what it is.
NAME = "bandpass-lifeline"
#: Exit statuses of the container when the watchdog ends it: 0 when the lifeline ends (the owner let go
#: or is gone), 128+SIGUSR2 when the hard lifetime ran out.
EXIT_RELEASED, EXIT_EXPIRED = 0, 140

#: Seconds the watchdog gives itself to open the pipe: opening a pipe nobody holds blocks, so a container
#: the engine started after its owner died (a start request in flight at the SIGKILL) ends here.
OPEN_GRACE_S = 15

# $1: the hard lifetime in seconds; $2: the same as an absolute deadline on the kernel's uptime clock (0:
# none, a remote engine). Both timers' ``sleep``s start at boot; after that only builtins run (see the
# module docstring). ``/proc/$$/fd/3`` is the watchdog's end of the pipe, there once the open returned.
WATCHDOG = f"""life=$1; end=${{2:-0}}; hb={MOUNT}
if [ "$end" -gt 0 ] && read -r up _ < /proc/uptime; then
  left=$((end - ${{up%.*}}))
  [ "$left" -lt "$life" ] && life=$left
fi
[ "$life" -gt 0 ] || exit 0
( sleep "$life"; kill -USR2 $$ ) &
if [ -p "$hb" ]; then
  ( sleep {OPEN_GRACE_S}; [ -e /proc/$$/fd/3 ] || kill -USR2 $$ ) &
  grace=$!
  if command exec 3< "$hb"; then
    while read -r _ <&3; do :; done
    exit 0
  fi
  kill "$grace"
fi
wait
"""


#: A compose service's main process (engine/sandbox/services.py): the watchdog runs beside the service,
#: which ``exec``s in the script's place; when the watchdog ends (the owner let go or is gone, or the hard
#: lifetime ran out) it kills the service, which is init's only child, and the container ends with it.
#: A service that exits ends the container as it would without the wrapper. $1, $2: as the watchdog's;
#: $3 is ``--``; the rest is the service's own entrypoint and command.
SERVICE_MOUNT = "/dev/bandpass-service"
SERVICE_WRAPPER = f"""life=$1; end=$2; shift 3
( /bin/sh {SCRIPT_MOUNT} "$life" "$end"; kill -KILL $$ ) &
exec "$@"
"""


def service_entrypoint(lifetime_s: float, deadline_uptime: float = 0.0) -> list[str]:
    """A compose service's entrypoint under its lifeline (followed by ``--`` and the service's argv)."""
    return ["/bin/sh", SERVICE_MOUNT, str(max(1, int(lifetime_s))), str(int(deadline_uptime)), "--"]


def command(lifetime_s: float, deadline_uptime: float = 0.0, *, mounted: bool = True) -> list[str]:
    """The container's main command: the watchdog with its lifetime (and absolute deadline); the script
    from its mount, or inline when nothing could be mounted (a remote engine)."""
    args = [str(max(1, int(lifetime_s))), str(int(deadline_uptime))]
    if mounted:
        return ["/bin/sh", SCRIPT_MOUNT, *args]
    return ["/bin/sh", "-c", WATCHDOG, NAME, *args]


def root() -> Path:
    """The directory of every owner's lifeline directories on this machine, for this user."""
    uid = os.getuid() if hasattr(os, "getuid") else 0
    return Path(tempfile.gettempdir()) / f"bandpass-lifelines-{uid}"


def owner_dir(owner: owner_mod.Owner | None = None) -> Path:
    owner = owner or owner_mod.current()
    return root() / f"{owner.pid}-{owner.start}"


def local_engine(client: Any) -> bool:
    """True when the engine runs on this machine (a unix socket), so a bind mount sees our files."""
    return str(getattr(client.api, "base_url", "")).startswith(("http+docker://localhost", "http+unix"))


class Lifeline:
    """One container's pipe, held open for writing by this process until :meth:`close`.

    Garbage collection closes it too (``weakref.finalize``): a container nobody references any more ends.
    """

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._finalizer = weakref.finalize(self, _close_fd, fd)

    @classmethod
    def create(cls) -> Lifeline:
        d = owner_dir()
        d.mkdir(parents=True, exist_ok=True, mode=0o700)
        _write_script(d)
        path = d / f"{uuid.uuid4().hex[:16]}.fifo"
        os.mkfifo(path, 0o600)
        try:
            # read-write: opening never blocks and needs no reader; non-blocking: a write never could
            fd = os.open(path, os.O_RDWR | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            path.unlink(missing_ok=True)
            raise
        os.chmod(path, 0o444)  # after the open: read-only for everyone, the container's root included
        return cls(path, fd)

    @property
    def open(self) -> bool:
        return self._finalizer.alive

    def close(self) -> None:
        """Lets go: the container's watchdog sees end-of-file and the container stops. Idempotent."""
        self._finalizer()
        with contextlib.suppress(OSError):
            self.path.unlink(missing_ok=True)

    def mounts(self) -> list[dict[str, Any]]:
        """The read-only bind mounts, pipe and script (keyword arguments of ``docker.types.Mount``)."""
        return [
            {"target": MOUNT, "source": str(self.path), "type": "bind", "read_only": True},
            {
                "target": SCRIPT_MOUNT,
                "source": str(self.path.parent / SCRIPT),
                "type": "bind",
                "read_only": True,
            },
        ]

    def service_mounts(self) -> list[dict[str, Any]]:
        """The mounts a compose service needs (compose's long volume syntax): the pipe, the watchdog and
        the service wrapper (:data:`SERVICE_WRAPPER`)."""
        return [
            {"type": "bind", "source": m["source"], "target": m["target"], "read_only": True}
            for m in self.mounts()
        ] + [
            {
                "type": "bind",
                "source": str(self.path.parent / SERVICE_SCRIPT),
                "target": SERVICE_MOUNT,
                "read_only": True,
            }
        ]


SCRIPT = "watchdog.sh"
SERVICE_SCRIPT = "service.sh"


def _write_script(d: Path) -> None:
    """The watchdog and the service wrapper as files in this owner's directory (written once; 0444)."""
    for name, text in ((SCRIPT, WATCHDOG), (SERVICE_SCRIPT, SERVICE_WRAPPER)):
        path = d / name
        with contextlib.suppress(OSError):
            if path.read_text(encoding="utf-8") == text:
                continue
        tmp = d / f".{name}.{uuid.uuid4().hex[:8]}"
        tmp.write_text(text, encoding="utf-8")
        tmp.chmod(0o444)
        os.replace(tmp, path)


def _close_fd(fd: int) -> None:
    with contextlib.suppress(OSError):
        os.close(fd)


_reap_lock = threading.Lock()


def remove_dead_dirs() -> int:
    """Removes the lifeline directories of owners that are gone (a killed owner cannot remove its own);
    returns how many. Only this user's, on this machine."""
    n = 0
    me = owner_mod.current()
    with _reap_lock:
        try:
            entries = list(root().iterdir())
        except OSError:
            return 0
        for d in entries:
            pid, _, start = d.name.partition("-")
            if not (pid.isdigit() and start.isdigit()):
                continue
            if int(pid) == me.pid and int(start) == me.start:
                continue
            if owner_mod.pid_started(int(pid)) == int(start):
                continue  # alive
            shutil.rmtree(d, ignore_errors=True)
            n += 1
    return n


__all__ = [
    "EXIT_EXPIRED",
    "EXIT_RELEASED",
    "MOUNT",
    "NAME",
    "OPEN_GRACE_S",
    "SCRIPT_MOUNT",
    "SERVICE_MOUNT",
    "SERVICE_WRAPPER",
    "WATCHDOG",
    "Lifeline",
    "command",
    "local_engine",
    "owner_dir",
    "remove_dead_dirs",
    "root",
    "service_entrypoint",
]
