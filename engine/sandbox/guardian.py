"""The owner's guardian: a small process outside every container that ends the containers its owner left
frozen when the owner dies.

Why: a container's lifeline (engine/sandbox/lifeline.py) is a watchdog *inside* the container. While the
container is paused (the engine's cgroup freezer: the clean room freezes the agent's container for the
capture and keeps it frozen while the verifier runs), the watchdog is frozen too: an owner SIGKILLed
then left a paused container up until some later Bandpass process happened to start and reap it (2 of
3 SIGKILLed audits had one up 90 s later). Nothing inside a frozen cgroup can act, so the bound has to
live outside it.

How: the first time a process starts a sandbox on a local engine, it starts its guardian: a detached
``python3 -I -S`` running :data:`SCRIPT` (standard library only, ~9 MB while it waits, no Bandpass
import), in a session of its own so a Ctrl-C or a kill of the owner's process group does not take it
along. It waits for the owner to exit (``pidfd_open``: woken by the kernel, no polling; the owner is
its pid *and* start time, as in engine/sandbox/owner.py), then, through the engine's socket, lists the
containers labelled with the owner and kills every one that is paused at once; a running one is left
to its lifeline for :data:`GRACE_S` (the watchdog ends it in ~0.1 s) and killed after that (a watchdog
the policy stopped with SIGSTOP, or one whose container was starting at the owner's death: it cannot
open a pipe nobody holds, and would only end after its own 15 s grace). Stopped containers stay for
reaping (engine/sandbox/leftovers.py), as before. After a normal exit the owner has removed its
containers already, and the guardian finds nothing.

A remote engine gets no guardian (nor a lifeline): there the hard lifetime and reaping apply. A guardian
that cannot reach the engine retries for :data:`RETRY_S`, then gives up (reaping on start remains).
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import sys
import threading
from typing import Any

from . import lifeline
from . import owner as owner_mod

log = logging.getLogger(__name__)

ENV = "BANDPASS_GUARDIAN"
#: How long a running container of a dead owner is left to its own lifeline before the guardian kills it.
GRACE_S = 3.0
#: How long the guardian keeps trying an engine that does not answer.
RETRY_S = 120.0
#: The marker in the guardian's command line (``ps`` shows it).
NAME = "bandpass-guardian"

# argv: socket path, owner label, owner pid, owner start time, grace, retry. Standard library only and
# ``-I -S``: it starts in ~20 ms and imports nothing a policy or a workspace could influence.
SCRIPT = r"""
import os, select, sys, time
sock, owner, pid, start = sys.argv[2], sys.argv[3], int(sys.argv[4]), sys.argv[5]
grace, retry = float(sys.argv[6]), float(sys.argv[7])

def started():
    try:
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rpartition(")")[2].split()
    except OSError:
        return None
    return fields[19] if len(fields) > 19 and fields[0] not in ("Z", "X") else None

def wait_gone():
    try:
        fd = os.pidfd_open(pid)
    except (AttributeError, OSError):
        fd = None
    while started() == start:
        if fd is None:
            time.sleep(0.5)
        else:
            select.select([fd], [], [], 60)

wait_gone()
gone = time.monotonic()
import http.client, json, socket, urllib.parse  # only now: the guardian idles small

class Conn(http.client.HTTPConnection):
    def connect(self):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(30)
        self.sock.connect(sock)

def call(method, path):
    c = Conn("localhost", timeout=30)
    try:
        c.request(method, path)
        r = c.getresponse()
        return r.status, r.read()
    finally:
        c.close()

def listing():
    q = urllib.parse.quote(json.dumps({"label": ["bandpass.owner=" + owner]}))
    status, body = call("GET", "/containers/json?all=1&filters=" + q)
    if status != 200:
        raise OSError("engine answered %d" % status)
    return [(c["Id"], c.get("State", "")) for c in json.loads(body)]

failing = None
while True:
    try:
        up = [(cid, state) for cid, state in listing() if state in ("paused", "running", "restarting")]
        failing = None
    except (OSError, ValueError, http.client.HTTPException):
        failing = failing or time.monotonic()
        if time.monotonic() - failing > retry:
            break
        time.sleep(2)
        continue
    late = time.monotonic() - gone > grace
    for cid, state in up:
        if state == "paused" or late:
            try:
                call("POST", "/containers/%s/kill" % cid)
            except (OSError, http.client.HTTPException):
                pass
    if not up or (late and time.monotonic() - gone > grace + 5):
        break
    time.sleep(0.5)
"""

_lock = threading.Lock()
_started: dict[tuple[int, str], int] = {}  # (owner pid, engine socket) -> the guardian's pid


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def socket_path(client: Any) -> str:
    """The engine's unix socket as this machine sees it; '' for any other engine."""
    if not lifeline.local_engine(client):
        return ""
    adapter = getattr(client.api, "_custom_adapter", None)
    path = str(getattr(adapter, "socket_path", "") or "")
    return path if path and os.path.exists(path) else ""


def ensure(client: Any) -> int | None:
    """Starts this process's guardian for the client's engine once (again after a fork: the child is
    another owner); returns its pid, None when there is none (turned off, a remote engine, no start)."""
    if not enabled():
        return None
    path = socket_path(client)
    if not path:
        return None
    me = owner_mod.current()
    if not me.start:  # an owner that cannot be told from a later process with its pid: no guardian
        return None
    key = (me.pid, path)
    with _lock:
        if key in _started:
            return _started[key]
        pid = _spawn(path, me)
        if pid is not None:
            _started[key] = pid
        return pid


def _spawn(path: str, me: owner_mod.Owner) -> int | None:
    """A detached guardian: ``sh`` starts it in the background and exits at once, so the guardian is
    nobody's child here (no zombie, no wait) and lives in a session of its own."""
    argv = [
        sys.executable,
        "-I",
        "-S",
        "-c",
        SCRIPT,
        NAME,
        path,
        me.label(),
        str(me.pid),
        str(me.start),
        str(GRACE_S),
        str(RETRY_S),
    ]
    launcher = '"$@" </dev/null >/dev/null 2>&1 & echo $!'
    try:
        out = subprocess.run(
            ["/bin/sh", "-c", launcher, "sh", *argv],
            capture_output=True,
            text=True,
            timeout=30,
            start_new_session=True,
            env={"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "LC_ALL": "C"},
        )
    except (OSError, subprocess.SubprocessError) as exc:
        log.warning("no guardian for this process's containers (%s): only their lifelines bound them", exc)
        return None
    with contextlib.suppress(ValueError):
        return int(out.stdout.strip())
    return None


__all__ = ["ENV", "GRACE_S", "NAME", "SCRIPT", "enabled", "ensure", "socket_path"]
