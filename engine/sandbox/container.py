"""One container per episode, locked down by default (DESIGN.md, "Sandbox and terminal").

The container's main process, under Docker's init, is the lifeline watchdog (engine/sandbox/lifeline.py):
it ends the container when the process that started it is gone or its hard lifetime runs out, so no
container outlives its owner. Everything the agent and the verifier do enters through ``docker exec``.
Nothing is installed into the task image: the helpers here use only ``/bin/sh`` builtins, so they work in
any image that has a POSIX shell, and keep working when the agent has filled the pid table (the kill
script forks nothing).

Measured facts this module relies on (dockerd 20.10, cgroup v1, cap_drop ALL + no-new-privileges):
- root inside cannot signal processes of other uids (no CAP_KILL), and ``exec --privileged`` is refused
  ("unable to apply caps"), so killing is done once per uid, as that uid;
- an exec'd process killed by the OOM killer leaves ``State.OOMKilled`` false (only the container's main
  process sets it), so OOM is also read from the cgroup's ``oom_kill`` counter.
"""

from __future__ import annotations

import contextlib
import io
import logging
import re
import tarfile
import threading
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors
import requests

from ..core.errors import BandpassError
from . import guardian, lifeline
from . import labels as L
from . import owner as owner_mod
from .docker_engine import DockerUnavailable
from .removal import force_remove

log = logging.getLogger(__name__)

LABEL = "bandpass"
EXEC_TIMEOUT_EXIT = 124  # what coreutils timeout(1) returns: callers already know it
#: A sandbox's hard lifetime when its creator does not derive one from a task's timeouts.
DEFAULT_MAX_LIFETIME_S = 3600.0
#: How long one in-container kill round may take before the container is restarted instead (a fork bomb
#: on a loaded machine must not hold the capture phase): the kill is bounded whatever the policy left.
KILL_EXEC_TIMEOUT_S = 20.0


class SandboxError(BandpassError, RuntimeError):
    """A sandbox failure with its infra code (``env_start_timeout``, ``container_died``, ``oom``...)."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(f"{code}: {message}")


@dataclass
class SandboxSpec:
    image: str
    cpus: float = 1.0
    memory_mb: int = 2048
    pids_limit: int = 512
    #: False: ``network_mode=none`` (only lo). True: the engine's default bridge if it has one, else the
    #: host network (dockerd here runs with --bridge=none). Host networking shares the host's interfaces
    #: and localhost services with the task, so it is granted only to tasks that ask for network.
    network: bool = False
    #: A named network to join instead (a compose task's own: engine/sandbox/services.py), reachable there
    #: under ``aliases`` (``main`` for the agent's container, as Harbor names it). Overrides ``network``.
    network_name: str = ""
    aliases: tuple[str, ...] = ()
    workdir: str = "/app"
    labels: dict[str, str] = field(default_factory=dict)
    name: str | None = None
    episode: str | int | None = None
    env: dict[str, str] = field(default_factory=dict)
    start_timeout_sec: float = 60.0
    #: The container ends on its own after this many seconds, whatever happens to its owner
    #: (engine/sandbox/lifeline.py). Episodes derive it from the task's timeouts.
    max_lifetime_s: float = DEFAULT_MAX_LIFETIME_S
    #: False: every capability dropped (the agent's container). True: Docker's default set, for a container
    #: a verifier runs in (``apt-get`` in ``test.sh`` needs CAP_SETGID/SETUID/CHOWN/DAC_OVERRIDE/FOWNER to
    #: drop to its ``_apt`` user and unpack); no-new-privileges either way (engine/run/cleanroom.py).
    default_caps: bool = False
    #: A container id: join its network namespace (``network_mode=container:<id>``) instead of ``network``.
    #: A service verifier's (engine/run/episode.py): the agent's service answers on localhost, while this
    #: container's filesystem, processes and ``/logs`` are its own. Never pooled (it is tied to that one).
    network_of: str = ""


# ----------------------------------------------------------------------------------------- shell snippets

# Sets $main to the container's main command: the oldest (numerically lowest pid) child of init. Agents'
# exec'd processes have no parent inside the container, and orphans reparented to init are younger.
_FIND_MAIN = r"""
find_main() {
  main=
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    [ "$p" = $$ ] && continue
    read -r st < "$d/stat" 2>/dev/null || continue
    rest=${st##*) }
    set -- $rest
    if [ "$2" = 1 ] && { [ -z "$main" ] || [ "$p" -lt "$main" ]; }; then main=$p; fi
  done
}
"""

# Adds every descendant of $main to $keep: the lifeline watchdog's timer (engine/sandbox/lifeline.py). A
# policy process cannot become one: its processes start from ``docker exec`` or are orphans of init.
_KEEP_TREE = r"""
keep_tree() {
  [ -n "$main" ] && [ "$main" != 0 ] && [ "$main" != auto ] || return 0
  tree=" $main "; changed=1
  while [ $changed = 1 ]; do
    changed=0
    for d in /proc/[0-9]*; do
      p=${d#/proc/}
      case "$tree" in *" $p "*) continue;; esac
      read -r st < "$d/stat" 2>/dev/null || continue
      rest=${st##*) }
      set -- $rest
      case "$tree" in *" $2 "*) tree="$tree$p "; changed=1;; esac
    done
  done
  keep="$keep${tree# }"
}
"""

# Prints "pid uid" for every live (non-zombie) process not in $keep, then exits.
_LIST_KEPT = r"""
for d in /proc/[0-9]*; do
  p=${d#/proc/}
  case "$keep" in *" $p "*) continue;; esac
  uid=; st=
  while read -r k v rest; do
    case "$k" in State:) st=$v;; Uid:) uid=$v; break;; esac
  done < "$d/status" 2>/dev/null
  [ -n "$uid" ] && [ "$st" != Z ] && echo "$p $uid"
done
exit 0
"""

# Kill every process this uid may signal except init, the container's main process (and its timer) and
# ourselves. STOP first so a fork loop cannot outrun us, then KILL; repeat until nothing killable is left.
# Builtins only: no fork, no dependency on procps/coreutils in the task image.
_KILL_SCRIPT = (
    _FIND_MAIN
    + _KEEP_TREE
    + r"""
main=$1
keep=" 1 $$ $1 "
if [ "$1" = auto ]; then
  find_main
  keep=" 1 $$ $main "
  echo "main $main"
fi
keep_tree
round=0
while [ $round -lt 8 ]; do
  round=$((round+1)); found=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$keep" in *" $p "*) continue;; esac
    kill -STOP "$p" 2>/dev/null && found=1
  done
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$keep" in *" $p "*) continue;; esac
    kill -KILL "$p" 2>/dev/null
  done
  [ $found = 0 ] && break
done
"""
    + _LIST_KEPT
)

# Print "pid uid" for every live (non-zombie) process except init, main ($1) with its timer, and ourselves.
_LIST_SCRIPT = _KEEP_TREE + 'main=$1\nkeep=" 1 $$ $1 "\nkeep_tree\n' + _LIST_KEPT

_MAIN_PID_SCRIPT = _FIND_MAIN + 'find_main; echo "$main"\nexit 0\n'

# Kill a process ($1) and all its descendants (used when an exec times out).
_KILL_TREE_SCRIPT = r"""
pids=" $1 "; changed=1
while [ $changed = 1 ]; do
  changed=0
  for d in /proc/[0-9]*; do
    p=${d#/proc/}
    case "$pids" in *" $p "*) continue;; esac
    read -r st < "$d/stat" 2>/dev/null || continue
    rest=${st##*) }
    set -- $rest
    case "$pids" in *" $2 "*) pids="$pids$p "; changed=1;; esac
  done
done
kill -KILL $pids 2>/dev/null
exit 0
"""

# Print the cgroup's OOM-kill counter (v1 memory.oom_control or v2 memory.events), 0 if unknown.
_OOM_SCRIPT = r"""
for f in /sys/fs/cgroup/memory/memory.oom_control /sys/fs/cgroup/memory.events; do
  [ -r "$f" ] || continue
  while read -r k v; do
    if [ "$k" = oom_kill ]; then echo "$v"; exit 0; fi
  done < "$f"
done
echo 0
"""


def _sh(script: str, *args: str) -> list[str]:
    return ["/bin/sh", "-c", script, "sh", *args]


def _default_network(client: docker.DockerClient) -> str:
    try:
        if client.networks.list(names=["bridge"]):
            return "bridge"
    except docker.errors.APIError:
        pass
    return "host"


# ----------------------------------------------------------------------------------------- Sandbox


class Sandbox:
    """A running episode container. Use as a context manager so the container goes even on exceptions."""

    def __init__(self, client: docker.DockerClient, spec: SandboxSpec) -> None:
        self.client = client
        self.spec = spec
        self.container: Any = None
        self.main_pid: str = ""
        self.restarts = 0
        #: Every time Bandpass itself stopped or killed this container (engine/sandbox/attribution/).
        self.stopped_by_harness: list[str] = []
        #: (start, end) wall-clock times of Bandpass's own restarts: the engine's ``kill`` events inside
        #: them are ours (a restart with no grace period sends SIGTERM and SIGKILL).
        self.harness_kill_windows: list[tuple[float, float]] = []
        #: The pipe that ends the container when this process lets go (None: a remote engine).
        self.lifeline: lifeline.Lifeline | None = None
        self.expires_at = 0.0  # time.monotonic() when the hard lifetime ends (set just before creation)

    # lifecycle ---------------------------------------------------------------------------------------

    def __enter__(self) -> Sandbox:
        if self.container is None:
            self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.remove()

    @property
    def id(self) -> str:
        return self.container.id if self.container is not None else ""

    def start(self) -> Sandbox:
        spec = self.spec
        self.expires_at = time.monotonic() + spec.max_lifetime_s
        labels = {
            **spec.labels,
            LABEL: "1",
            L.OWNER: owner_mod.current().label(),
            L.EXPIRES: str(int(time.time() + spec.max_lifetime_s)),
        }
        if spec.episode is not None:
            labels["bandpass.episode"] = str(spec.episode)
        name = spec.name or f"bandpass-{uuid.uuid4().hex[:12]}"
        local = lifeline.local_engine(self.client)
        if local:
            try:
                self.lifeline = lifeline.Lifeline.create()
            except OSError as exc:  # no usable temporary directory: the hard lifetime still bounds it
                log.warning("no lifeline for a sandbox (%s): only its hard lifetime bounds it", exc)
            # outside every container: ends what this process leaves frozen if it dies (guardian.py)
            guardian.ensure(self.client)
        try:
            self.container = self._create(name, labels, local)
        except docker.errors.APIError as exc:
            if self.lifeline is None or "mount" not in str(exc).lower():
                self._let_go()
                raise
            # a unix socket to an engine on another machine: it cannot see our pipe
            log.warning("engine cannot mount the lifeline (%s): only the hard lifetime bounds it", exc)
            self._let_go()
            self.container = self._create(name, labels, local=False)
        try:
            self.container.start()
            self._wait_running(time.monotonic() + spec.start_timeout_sec)
            # learnt now, before any policy process exists: the kill scripts keep it and its timers
            # (read on the host when the engine is local; else one exec; if both fail, the first kill)
            self.main_pid = self._main_pid_on_host()
            if not self.main_pid:
                with contextlib.suppress(docker.errors.APIError, SandboxError):
                    self.main_pid = self._find_main_pid()
        except BaseException:
            try:
                self.remove()
            except Exception as exc:  # noqa: BLE001 - the start's own error is the one to report
                log.warning("could not remove %s after a failed start: %s", self.id[:12], exc)
            raise
        return self

    def _create(self, name: str, labels: dict[str, str], local: bool) -> Any:
        spec = self.spec
        mem = f"{int(spec.memory_mb)}m"
        deadline = owner_mod.uptime() + spec.max_lifetime_s if local and self.lifeline is not None else 0.0
        try:
            return self.client.containers.create(
                spec.image,
                command=lifeline.command(spec.max_lifetime_s, deadline, mounted=self.lifeline is not None),
                name=name,
                init=True,
                cap_drop=None if spec.default_caps else ["ALL"],
                security_opt=["no-new-privileges"],
                **self._network_args(),
                mem_limit=mem,
                memswap_limit=mem,  # no swap: an over-limit task must OOM, not crawl
                nano_cpus=int(spec.cpus * 1e9),
                pids_limit=int(spec.pids_limit),
                labels=labels,
                working_dir=spec.workdir,
                environment=spec.env or None,
                mounts=[docker.types.Mount(**m) for m in self.lifeline.mounts()] if self.lifeline else None,
                detach=True,
            )
        except docker.errors.ImageNotFound as exc:
            self._let_go()
            raise SandboxError("image_missing", f"{spec.image} not found in the engine") from exc

    def _network_args(self) -> dict[str, Any]:
        """``network_mode`` (none, the engine's default network when the task asks for one, or another
        container's namespace: the service verifier's), or a named network joined under the spec's aliases."""
        spec = self.spec
        if spec.network_of:
            return {"network_mode": f"container:{spec.network_of}"}
        if spec.network_name:
            endpoint = self.client.api.create_endpoint_config(aliases=list(spec.aliases) or None)
            return {"network": spec.network_name, "networking_config": {spec.network_name: endpoint}}
        return {"network_mode": _default_network(self.client) if spec.network else "none"}

    def _let_go(self) -> None:
        if self.lifeline is not None:
            self.lifeline.close()
            self.lifeline = None

    def remaining_s(self) -> float:
        """Seconds left of the hard lifetime (a pool spare is claimed only when enough are left)."""
        if not self.expires_at:
            return self.spec.max_lifetime_s
        return self.expires_at - time.monotonic()

    def _wait_running(self, deadline: float) -> None:
        while True:
            self.container.reload()
            state = self.container.attrs.get("State", {})
            if state.get("Running"):
                return
            if state.get("Status") in ("exited", "dead"):
                code = "oom" if state.get("OOMKilled") else "container_died"
                raise SandboxError(code, f"container exited at start: {state.get('Error') or state}")
            if time.monotonic() > deadline:
                raise SandboxError(
                    "env_start_timeout", f"not running after {self.spec.start_timeout_sec:g} s"
                )
            time.sleep(0.05)

    def _main_pid_on_host(self) -> str:
        """The main process's pid *inside* the container, read from this machine's ``/proc`` (init's first
        child, and its ``NSpid``) without an exec; '' when the engine is not local or it is not there yet."""
        if self.lifeline is None:
            return ""
        init = int(self.container.attrs.get("State", {}).get("Pid") or 0)
        if not init:
            return ""

        def nspid(pid: int | str) -> list[str]:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("NSpid:"):
                    return line.split()[1:]
            return []

        try:
            if nspid(init)[-1:] != ["1"]:  # not the container's init as this process sees pids
                return ""
            for _ in range(20):  # init forks its child right after it starts
                children = Path(f"/proc/{init}/task/{init}/children").read_text().split()
                if children:
                    return (nspid(children[0]) or [""])[-1]
                time.sleep(0.005)
        except OSError:
            pass
        return ""

    def _find_main_pid(self) -> str:
        code, out = self.exec(_sh(_MAIN_PID_SCRIPT), timeout=KILL_EXEC_TIMEOUT_S)
        return out.strip().splitlines()[0] if code == 0 and out.strip() else ""

    def remove(self, *, attempts: int = 3, within_s: float | None = None) -> None:
        """Force-remove, retrying a failed removal (``force_remove``); safe to call twice and after the
        daemon already removed it. Raises the last error when every attempt failed; the container has
        stopped by then anyway, since its lifeline is let go first."""
        if self.container is None:
            self._let_go()
            return
        self.stopped_by_harness.append("removed")
        self._let_go()  # first: the container stops on its own even if the removal below fails
        force_remove(self.client, self.container.id, attempts=attempts, within_s=within_s)

    def status(self) -> str:
        """Docker's state string (created, running, exited, dead...), ``removed`` when it is gone."""
        if self.container is None:
            return "absent"
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return "removed"
        return str(self.container.attrs.get("State", {}).get("Status", "unknown"))

    def is_running(self) -> bool:
        return self.status() == "running"

    def oom_killed(self) -> bool:
        """True when the container or any process in it was killed for memory.

        ``State.OOMKilled`` covers the main process only; an agent's exec'd process hit by the OOM killer
        shows only in the cgroup counter, read from inside while the container runs.
        """
        try:
            self.container.reload()
        except docker.errors.NotFound:
            return False
        state = self.container.attrs.get("State", {})
        if state.get("OOMKilled"):
            return True
        if not state.get("Running"):
            return False
        try:
            code, out = self.exec(_sh(_OOM_SCRIPT))
        except (docker.errors.APIError, SandboxError):
            return False
        try:
            return code == 0 and int(out.strip() or "0") > 0
        except ValueError:
            return False

    # exec ----------------------------------------------------------------------------------------------

    def exec(
        self,
        cmd: str | Sequence[str],
        *,
        user: str | None = None,
        timeout: float | None = None,
        workdir: str | None = None,
        env: dict[str, str] | None = None,
    ) -> tuple[int, str]:
        """Run a command to completion; returns (exit code, stdout+stderr as text).

        A string runs under ``/bin/sh -c``. With ``timeout`` the process tree is killed when it expires and
        the exit code is 124. Raises SandboxError(container_died) when the container is not running.
        """
        argv = ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)
        if timeout is None:
            try:
                res = self.container.exec_run(argv, user=user or "", workdir=workdir, environment=env)
            except docker.errors.APIError as exc:
                raise self._died_or(exc) from exc
            code = int(res.exit_code if res.exit_code is not None else -1)
            output = res.output.decode("utf-8", "replace")
            self._check_exec_started(code, output)
            return code, output
        return self._exec_with_timeout(argv, user=user, timeout=timeout, workdir=workdir, env=env)

    def _check_exec_started(self, code: int, output: str) -> None:
        """runc reports a process it could not start (pid table full, bad user) as exit 126 plus a message
        on the output, not as an API error; a caller must not mistake that for the command's own result."""
        if code in (126, 127) and "OCI runtime exec failed" in output:
            raise SandboxError("exec_failed", output.strip().splitlines()[0][:300])

    def _died_or(self, exc: Exception) -> Exception:
        if self.status() != "running":
            code = "oom" if self.container.attrs.get("State", {}).get("OOMKilled") else "container_died"
            return SandboxError(code, f"container not running: {exc}")
        return exc

    def _exec_with_timeout(
        self,
        argv: list[str],
        *,
        user: str | None,
        timeout: float,
        workdir: str | None,
        env: dict[str, str] | None,
    ) -> tuple[int, str]:
        # The wrapper prints its pid first (then execs the command in place), so on timeout we know
        # which in-container process tree to kill.
        wrapped = ["/bin/sh", "-c", 'echo "$$"; exec "$@"', "sh", *argv]
        api = self.client.api
        try:
            exec_id = api.exec_create(
                self.container.id, wrapped, user=user or "", workdir=workdir, environment=env
            )["Id"]
            stream = api.exec_start(exec_id, stream=True)
        except docker.errors.APIError as exc:
            raise self._died_or(exc) from exc
        chunks: list[bytes] = []

        def pump() -> None:
            with contextlib.suppress(Exception):
                for chunk in stream:
                    chunks.append(chunk)

        thread = threading.Thread(target=pump, daemon=True)
        thread.start()
        thread.join(timeout)
        timed_out = thread.is_alive()
        output = b"".join(chunks).decode("utf-8", "replace")
        pid, _, rest = output.partition("\n")
        if timed_out:
            if pid.strip().isdigit():
                with contextlib.suppress(docker.errors.APIError):
                    self.container.exec_run(_sh(_KILL_TREE_SCRIPT, pid.strip()), user=user or "")
            thread.join(5)
            output = b"".join(chunks).decode("utf-8", "replace")
            _, _, rest = output.partition("\n")
            return EXEC_TIMEOUT_EXIT, rest
        code = api.exec_inspect(exec_id).get("ExitCode")
        code = int(code if code is not None else -1)
        if not pid.strip().isdigit():
            self._check_exec_started(code, output)
            return code, output
        return code, rest

    # files ---------------------------------------------------------------------------------------------

    def put_file(self, path: str, data: bytes, mode: int = 0o644, *, uid: int = 0, gid: int = 0) -> None:
        """Write one file; missing parent directories are created (0755) by the daemon.

        Goes through put_archive from the host, which works whatever the container's capabilities are.
        """
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            info = tarfile.TarInfo(path.lstrip("/"))
            info.size = len(data)
            info.mode = mode
            info.uid, info.gid = uid, gid
            info.mtime = int(time.time())
            tar.addfile(info, io.BytesIO(data))
        self._put_archive(buf.getvalue())

    def put_dir(self, host_dir: str | Path, container_dir: str) -> None:
        """Copy a host directory's contents to ``container_dir`` (created if missing), owned by root.

        The top directory itself is not in the archive, so an existing target keeps its mode and owner.
        """
        host_dir = Path(host_dir)
        prefix = container_dir.strip("/")
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            for src in sorted(host_dir.rglob("*")):
                arcname = f"{prefix}/{src.relative_to(host_dir).as_posix()}".lstrip("/")
                info = tar.gettarinfo(str(src), arcname=arcname)
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                if info.isreg():
                    with open(src, "rb") as fh:
                        tar.addfile(info, fh)
                else:
                    tar.addfile(info)
        if not any(host_dir.iterdir()):
            self.exec(["mkdir", "-p", container_dir])
            return
        self._put_archive(buf.getvalue())

    def _put_archive(self, data: bytes) -> None:
        try:
            ok = self.container.put_archive("/", data)
        except docker.errors.APIError as exc:
            raise self._died_or(exc) from exc
        if not ok:
            raise SandboxError("container_died", "put_archive refused")

    def get_file(self, path: str) -> bytes | None:
        """Contents of a regular file, or None when it is missing or not a regular file."""
        try:
            stream, _stat = self.container.get_archive(path)
        except docker.errors.NotFound:
            return None
        buf = io.BytesIO(b"".join(stream))
        with tarfile.open(fileobj=buf, mode="r") as tar:
            for member in tar:
                if member.isreg():
                    fh = tar.extractfile(member)
                    return fh.read() if fh is not None else None
                return None
        return None

    def get_files(self, directory: str) -> dict[str, bytes]:
        """The regular files directly inside ``directory`` (one archive round trip for all of them)."""
        try:
            stream, _stat = self.container.get_archive(directory)
        except docker.errors.NotFound:
            return {}
        out: dict[str, bytes] = {}
        with tarfile.open(fileobj=io.BytesIO(b"".join(stream)), mode="r") as tar:
            for member in tar:
                parts = member.name.split("/")
                if member.isreg() and len(parts) == 2:
                    fh = tar.extractfile(member)
                    if fh is not None:
                        out[parts[1]] = fh.read()
        return out

    # processes -----------------------------------------------------------------------------------------

    def list_processes(self) -> list[tuple[int, int]]:
        """(pid, uid) of every process except init, the main command and the lister itself."""
        if not self.main_pid:
            self.main_pid = self._find_main_pid()
        code, out = self.exec(_sh(_LIST_SCRIPT, self.main_pid or "0"), timeout=KILL_EXEC_TIMEOUT_S)
        if code == EXEC_TIMEOUT_EXIT:
            raise SandboxError("exec_failed", f"listing processes took over {KILL_EXEC_TIMEOUT_S:g} s")
        procs = []
        for line in out.splitlines():
            m = re.fullmatch(r"(\d+) (\d+)", line.strip())
            if m:
                procs.append((int(m.group(1)), int(m.group(2))))
        return procs

    def _kill_as(self, user: str, then: str = "") -> list[tuple[int, int]]:
        """Runs the kill script as ``user`` (then ``then``, in the same exec: one round trip less per
        episode); learns the main pid on first use; returns the survivors."""
        script = _KILL_SCRIPT.rstrip().removesuffix("exit 0") + (then + "\n" if then else "") + "exit 0\n"
        code, out = self.exec(_sh(script, self.main_pid or "auto"), user=user, timeout=KILL_EXEC_TIMEOUT_S)
        if code == EXEC_TIMEOUT_EXIT:  # still killing after the bound (a fork bomb on a loaded machine)
            raise SandboxError("exec_failed", f"the kill took over {KILL_EXEC_TIMEOUT_S:g} s")
        survivors = []
        for line in out.splitlines():
            if line.startswith("main "):
                self.main_pid = line.split()[1] if len(line.split()) > 1 else ""
            elif m := re.fullmatch(r"(\d+) (\d+)", line.strip()):
                survivors.append((int(m.group(1)), int(m.group(2))))
        return survivors

    def kill_all_processes_except_init(self, then: str = "") -> str:
        """Kill every agent process before the verifier runs. Returns ``"kill"`` or ``"restart"``.

        Root in the container cannot signal other uids' processes (no CAP_KILL), so the builtin-only kill
        script runs once as root and then once as each uid that still owns a process. If the exec cannot
        even start (pid table full), takes over ``KILL_EXEC_TIMEOUT_S`` or something survives, the
        container is restarted: that kills every process in the pid namespace while keeping the filesystem
        the verifier must check. So the time this takes is bounded whatever the policy left running (a
        fork bomb included), and nothing the policy started outlives it. The lifeline watchdog and its
        timer are kept. ``then`` is a shell snippet run as root right after the kill (it is not re-run
        after a restart).
        """
        try:
            survivors = self._kill_as("0", then)
            for uid in sorted({u for _, u in survivors if u != 0}):
                self._kill_as(str(uid))
            if survivors:
                survivors = self.list_processes()
            for _ in range(5):  # killed processes may take a moment to disappear
                if not survivors:
                    break
                time.sleep(0.05)
                survivors = self.list_processes()
        except (docker.errors.APIError, SandboxError) as exc:
            log.warning("in-container kill failed (%s); restarting %s", exc, self.id[:12])
            survivors = [(-1, -1)]
        if not survivors:
            return "kill"
        self.stopped_by_harness.append("restarted to kill the agent's processes")
        started = time.time()
        try:
            self.container.restart(timeout=0)
        finally:
            self.harness_kill_windows.append((started, time.time()))
        self.restarts += 1
        self._wait_running(time.monotonic() + self.spec.start_timeout_sec)
        self.main_pid = self._find_main_pid()
        return "restart"


# ----------------------------------------------------------------------------------------- module helpers


def gc(client: docker.DockerClient, match: dict[str, str] | None = None) -> int:
    """Remove every container labelled bandpass=1 (crashed runs leave them); returns how many.

    ``match`` narrows it to containers that also carry those labels, so one workspace or test run can
    clean up after itself without killing another's live episodes on a shared engine.
    """
    labels = [f"{LABEL}=1", *(f"{k}={v}" for k, v in (match or {}).items())]
    n = 0
    # The low-level list does not inspect each container, so one removed meanwhile cannot fail the sweep.
    for c in client.api.containers(all=True, filters={"label": labels}):
        n += force_remove(client, c["Id"])
    return n


def classify_docker_error(exc: BaseException) -> str:
    """Map an exception from Docker work to an ``infra_error`` code (DESIGN.md, "Outcomes")."""
    if isinstance(exc, SandboxError):
        return exc.code
    if isinstance(exc, DockerUnavailable):
        return "daemon_unavailable"
    text = str(exc).lower()
    if isinstance(exc, requests.exceptions.ConnectionError | FileNotFoundError | ConnectionRefusedError):
        return "daemon_unavailable"
    if isinstance(exc, requests.exceptions.Timeout | TimeoutError):
        return "env_start_timeout"
    if isinstance(exc, docker.errors.ImageNotFound):
        return "image_missing"
    if "error while fetching server api version" in text or "connection refused" in text:
        return "daemon_unavailable"
    if "oom" in text or "out of memory" in text:
        return "oom"
    if isinstance(exc, docker.errors.NotFound) or (
        isinstance(exc, docker.errors.APIError) and ("is not running" in text or "is restarting" in text)
    ):
        return "container_died"
    return "orchestrator_failure"


__all__ = [
    "DEFAULT_MAX_LIFETIME_S",
    "EXEC_TIMEOUT_EXIT",
    "Sandbox",
    "SandboxError",
    "SandboxSpec",
    "classify_docker_error",
    "gc",
]
