"""Who ended the sandbox: attribute every container death and resource failure of the agent phase.

Why this exists: infrastructure errors are retried and left out of pass@k, so "looks like infrastructure"
is the most valuable outcome a failing policy can reach. A policy is root in its container; typing
``kill -TERM 1`` ends the container, and without attribution that read as ``infra_error:container_died``
(masked by the trainer instead of scored 0). So the runner keeps evidence from outside the container,
which the policy cannot forge, and decides from it:

* the Docker engine's event stream for the container (``kill`` with the signal: someone outside signalled
  it; ``die`` with the exit code; ``oom``: the kernel killed a process for the container's own memory
  limit; ``exec_die`` with the agent shell's exit code), watched from just before the agent starts;
* ``State`` after the fact (status, exit code, ``OOMKilled``);
* whether the daemon still answers;
* whether Bandpass itself stopped or killed the container (``Sandbox.stopped_by_harness``);
* the host pid of the container's main process (``docker top``, learnt before the agent acts): gone means
  the container is on its way down even while the engine still says ``running``;
* the host kernel's global OOM-kill counter (``/proc/vmstat``) when the engine is local, to tell a host
  out of memory from a task over its own limit;
* the container's pid cgroup as the host sees it (``pids.current``, ``pids.peak``, ``pids.events``: forks
  refused at the limit) when the engine is local, found through ``/proc/<init pid>/cgroup``;
* the size of the container's writable layer, measured during the agent phase (about once a second) and
  once more when it ends: the overlay2 upper directory walked on the host (allocated blocks) when it is
  readable here, else the engine's ``SizeRw``. overlay2 on an ext4 backing has no per-container quota
  (``--storage-opt size`` needs xfs with pquota), so the task's disk allowance (``[environment]
  storage_mb``, Harbor's default 10240) is enforced by measuring: a layer over it stops the agent (Bandpass
  kills the agent's processes) and the episode ends ``agent_error:disk_full``. A burst between two samples
  can overshoot the allowance by what the disk writes in a second; a host disk that fills while the layer
  is under its allowance stays infrastructure (``infra_error:disk_full``).

Nothing read from inside the container decides between agent and infra: the policy controls everything
there. (With a remote engine the pid cgroup's refused-fork count is read from inside, but it only chooses
between two agent codes.)

Rules (first match wins), for the agent phase only (the verifier phase after a clean agent phase is the
harness's work and keeps infra codes):

| evidence | outcome |
|---|---|
| the engine does not answer | ``infra_error:daemon_unavailable`` |
| the writable layer went over the task's ``storage_mb`` | ``agent_error:disk_full`` |
| Bandpass stopped the container itself | ``infra_error:container_died`` |
| any death before the agent's terminal was up (no policy action ran yet) | the infra code |
| a ``kill`` event (``docker kill``/``stop``/``rm -f`` from outside) | ``infra_error:container_died`` |
| an ``oom`` event / ``OOMKilled`` / an OOM kill counted in the container's memory cgroup on the host
  (the container's own limit) | ``agent_error:oom`` |
| SIGKILLed, none of those, host OOM counter rose | ``infra_error:oom`` (host out of memory) |
| the container exited, nobody outside signalled it | ``agent_error:sandbox_killed`` |
| the shell ended after the pid cgroup refused a fork | ``agent_error:pids_exhausted`` |
| forks refused, and the container still at its pid limit (or still refusing forks) when the agent
  phase ended: a fork bomb left running | ``agent_error:pids_exhausted`` |
| the container runs but the agent's shell ended | ``agent_error:sandbox_killed`` (the shell) |

A death the agent's last command set off can land after the agent returned: the verifier then finds the
container dead and restarts it. ``late_death`` attributes that to the policy too (the first ``kill``/``die``
of the watch is a ``die``, and Bandpass had to restart the container).

On cgroup v1 (this project's CI) the engine emits ``oom`` only for OOMs under the container's memory cgroup
limit: a host-wide OOM kill does not raise it, which is what makes the host/task distinction possible.
"""

from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import docker

from engine.review import outcomes

#: Agent-phase codes a policy can cause from inside its sandbox (``agent_error:<code>``).
SANDBOX_AGENT_CODES = ("sandbox_killed", "oom", "pids_exhausted", "disk_full")
#: Infra codes the agent phase reports when the container or terminal went away; these are re-judged here.
DEATH_CODES = frozenset({"container_died", "oom"})
#: How long to wait for the engine's ``die``/``exec_die`` event after a death was noticed.
EVENT_WAIT_S = 5.0
#: After the agent's shell died in a running container: how long a following container death still counts
#: as the same act (the outcome is the policy's either way; this only gets the story right).
SHELL_GRACE_S = 1.0
VMSTAT = Path("/proc/vmstat")
# The pid cgroup's count of forks refused at the limit (v1, then v2), read with shell builtins only. Read
# from inside, so the policy could fake it, but it only chooses between two agent codes, never infra.
_PIDS_EVENTS_SCRIPT = r"""
for f in /sys/fs/cgroup/pids/pids.events /sys/fs/cgroup/pids.events; do
  [ -r "$f" ] || continue
  while read -r k v; do
    if [ "$k" = max ]; then echo "$v"; exit 0; fi
  done < "$f"
done
echo -1
"""
#: "At the pid limit": a fork loop that died of it has freed its own pid and a few more by the time we look.
PIDS_MARGIN = 8
#: After forks were refused: how long to wait before reading the refusal count again.
PIDS_RECHECK_S = 3.0
#: How often the writable layer is measured during the agent phase (at least; a slow walk stretches it).
DISK_POLL_S = 1.0
CGROUP_ROOT = Path("/sys/fs/cgroup")


def host_oom_kills() -> int | None:
    """The kernel's count of OOM kills since boot (every cgroup and the host), or None when unknown."""
    try:
        for line in VMSTAT.read_text().splitlines():
            key, _, value = line.partition(" ")
            if key == "oom_kill":
                return int(value)
    except (OSError, ValueError):
        return None
    return None


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


def _engine_is_local(client: docker.DockerClient) -> bool:
    """A unix-socket engine shares this kernel, so /proc/vmstat speaks for the container's host."""
    return str(getattr(client.api, "base_url", "")).startswith("http+docker://localhost")


@dataclass
class Verdict:
    """What the evidence says: the outcome, who caused it, and one sentence a curator can read."""

    outcome: str
    by: str  # policy | outside | harness | daemon | host
    why: str


@dataclass
class Evidence:
    """Everything the attribution used, stored with the episode (``episode.evidence_json``)."""

    container: str = ""
    memory_limit_mb: int = 0
    pids_limit: int = 0
    events: list[dict[str, Any]] = field(default_factory=list)
    status: str = ""  # the container's state after the agent phase (running, exited, removed, unknown)
    exit_code: int | None = None
    oom_killed: bool = False  # State.OOMKilled
    daemon_healthy: bool = True
    daemon_error: str = ""
    stream_error: str = ""
    harness_stops: list[str] = field(default_factory=list)
    agent_started: bool = False
    terminal_alive: bool = True
    shell_exit_code: int | None = None
    pids_current: int | None = None
    pids_limit_hits: int | None = None  # forks refused at the pid limit (pids.events "max")
    pids_peak: int | None = None
    pids_read_by: str = ""  # host (the pid cgroup on the host) | container (read from inside)
    pids_still_refused: bool = False  # forks were still being refused a moment after the agent phase
    #: The disk allowance ([environment] storage_mb) and the writable layer measured against it.
    storage_limit_mb: int = 0
    disk_used_mb: float | None = None  # the largest measurement during the agent phase
    disk_measured_by: str = ""  # layer (the overlay2 upper dir, on the host) | engine (SizeRw)
    disk_over_limit: bool = False
    disk_enforced: str = ""  # what Bandpass did when the layer went over: the agent's processes killed
    #: From the engine's stats when an OOM was seen and the container still runs (cgroup v1 figures).
    memory_max_usage_mb: float | None = None
    memory_failcnt: int | None = None
    host_oom_kills_delta: int | None = None
    #: OOM kills under the container's own memory cgroup during the agent phase, read on the host (v1
    #: memory.oom_control, v2 memory.events): the kernel's word, whether or not the engine's ``oom`` event
    #: arrived in time (under load it can lag the attribution)
    cgroup_oom_kills: int | None = None
    verdict: dict[str, str] = field(default_factory=dict)

    def actions(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("action") == name]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class ContainerWatch:
    """Listens to the Docker engine's events for one container on a thread of its own.

    Started before the agent gets its terminal (``since`` a second earlier, so an event in the gap between
    subscribing and the stream flowing is replayed by the engine), closed when the agent phase ends.
    Never raises: a watch that could not start records why, and the attribution then says it lacked
    evidence (and leaves the outcome to the daemon-health check).
    """

    def __init__(
        self,
        client: docker.DockerClient,
        sandbox: Any,
        *,
        memory_limit_mb: int,
        pids_limit: int,
        storage_mb: int = 0,
    ):
        self.client = client
        self.sandbox = sandbox
        self.evidence = Evidence(
            container=str(getattr(sandbox, "id", ""))[:12],
            memory_limit_mb=int(memory_limit_mb),
            pids_limit=int(pids_limit),
            storage_limit_mb=int(storage_mb or 0),
        )
        self._cond = threading.Condition()
        self._stream: Any = None
        self._thread: threading.Thread | None = None
        self._closed = False
        self._t0 = time.time()
        self._local = _engine_is_local(client)
        self._host_ooms0 = host_oom_kills() if self._local else None
        self.agent_exec_id = ""
        self._main_pid = ""
        self._learner: threading.Thread | None = None
        self._upper: Path | None = None  # the overlay2 upper dir, when readable here
        self._pids_dir: Path | None = None  # the pid cgroup on the host, when the engine is local
        self._pids_hits0 = 0
        self._mem_dir: Path | None = None  # the memory cgroup on the host, when the engine is local
        self._mem_ooms0 = 0
        self._disk_stop = threading.Event()
        self._disk_thread: threading.Thread | None = None

    def start(self) -> ContainerWatch:
        try:
            self._stream = self.client.api.events(
                since=int(self._t0) - 1, filters={"container": self.sandbox.id}, decode=True
            )
        except Exception as exc:  # noqa: BLE001 - evidence, not a reason to fail the episode
            self.evidence.stream_error = f"could not watch the engine's events: {exc}"
            return self
        self._thread = threading.Thread(target=self._pump, name="bandpass-watch", daemon=True)
        self._thread.start()
        # learnt while the agent's terminal starts (``docker top`` runs ps on the host: 30-250 ms), and
        # awaited in mark_agent_started, before the policy can act
        self._learner = threading.Thread(target=self._learn_main, name="bandpass-watch-main", daemon=True)
        self._learner.start()
        return self

    def _learn_main(self) -> None:
        self._main_pid = self._main_host_pid()
        try:
            attrs = self.client.api.inspect_container(self.sandbox.id)
        except Exception:  # noqa: BLE001 - without it the engine's figures are used
            return
        gd = attrs.get("GraphDriver") or {}
        upper = (gd.get("Data") or {}).get("UpperDir") if gd.get("Name") == "overlay2" else None
        if upper and os.access(upper, os.R_OK | os.X_OK):
            self._upper = Path(upper)
        init = (attrs.get("State") or {}).get("Pid")
        if self._local and init:
            self._pids_dir = host_cgroup_dir(str(init), "pids")
            if self._pids_dir is not None:
                self._pids_hits0 = read_pids_cgroup(self._pids_dir)[2] or 0
            self._mem_dir = host_cgroup_dir(str(init), "memory")
            if self._mem_dir is not None:
                self._mem_ooms0 = read_memory_oom_kills(self._mem_dir) or 0

    def _host_processes(self) -> list[dict[str, str]] | None:
        """The container's processes as the engine's host sees them (``docker top``): not forgeable from
        inside, unlike anything read through an exec."""
        try:
            top = self.client.api.top(self.sandbox.id)
        except Exception:  # noqa: BLE001
            return None
        titles = top.get("Titles") or []
        return [dict(zip(titles, row, strict=False)) for row in top.get("Processes") or []]

    def _main_host_pid(self) -> str:
        """Host pid of the container's main command (init's oldest child), learnt before the agent runs.

        Init exits when that process does, so its absence after the agent returned means the container
        is on its way down even if the engine still says ``running``: the agent's last command did it."""
        try:
            init = str(self.client.api.inspect_container(self.sandbox.id)["State"]["Pid"])
        except Exception:  # noqa: BLE001
            return ""
        children = [p for p in self._host_processes() or [] if p.get("PPID") == init and p.get("PID")]
        children.sort(key=lambda p: int(p["PID"]))
        return children[0]["PID"] if children else ""

    def _main_alive(self) -> bool:
        if not self._main_pid:
            return True  # unknown: trust the engine's status
        procs = self._host_processes()
        return procs is None or any(p.get("PID") == self._main_pid for p in procs)

    def mark_agent_started(self, exec_id: str = "") -> None:
        """The agent's terminal is up: from here a death is the agent phase's."""
        if self._learner is not None:
            self._learner.join(EVENT_WAIT_S)
        self.evidence.agent_started = True
        self.agent_exec_id = exec_id or ""
        if self.evidence.storage_limit_mb > 0 and self._disk_thread is None:
            self._disk_thread = threading.Thread(target=self._poll_disk, name="bandpass-disk", daemon=True)
            self._disk_thread.start()

    # --- the disk allowance -----------------------------------------------------------------------------

    def _measure_disk(self) -> int | None:
        """Bytes in the container's writable layer: the upper dir walked on the host, else the engine's
        ``SizeRw`` (apparent sizes, computed by the daemon). None when neither answers."""
        if self._upper is not None and self._upper.is_dir():
            self.evidence.disk_measured_by = "layer"
            return layer_bytes(self._upper)
        try:
            rows = self.client.api.containers(all=True, size=True, filters={"id": self.sandbox.id})
        except Exception:  # noqa: BLE001
            return None
        if not rows or rows[0].get("SizeRw") is None:
            return None
        self.evidence.disk_measured_by = "engine"
        return int(rows[0]["SizeRw"])

    def _note_disk(self, used: int | None) -> None:
        if used is None:
            return
        ev = self.evidence
        mb = round(used / 2**20, 1)
        with self._cond:
            ev.disk_used_mb = max(mb, ev.disk_used_mb or 0.0)
            if mb > ev.storage_limit_mb:
                ev.disk_over_limit = True

    def _poll_disk(self) -> None:
        """Measures the layer about once a second (a slow walk stretches the interval to ten times its
        own duration); over the allowance, stops the agent: kills its processes, which ends its shell."""
        interval = DISK_POLL_S
        while not self._disk_stop.wait(interval):
            started = time.monotonic()
            try:
                used = self._measure_disk()
            except Exception:  # noqa: BLE001 - a layer removed under us
                return
            interval = max(DISK_POLL_S, 10 * (time.monotonic() - started))
            self._note_disk(used)
            if self.evidence.disk_over_limit:
                self._enforce_disk()
                return

    def _enforce_disk(self) -> None:
        ev = self.evidence
        try:
            how = self.sandbox.kill_all_processes_except_init()
        except Exception as exc:  # noqa: BLE001 - the verdict stands; the agent's timeout ends it anyway
            ev.disk_enforced = f"could not stop the agent's processes: {exc}"[:300]
            return
        ev.disk_enforced = f"Bandpass killed the agent's processes at {ev.disk_used_mb:g} MB" + (
            " (by restarting the container)" if how == "restart" else ""
        )

    def _stop_disk_watch(self) -> None:
        self._disk_stop.set()
        if self._disk_thread is not None:
            self._disk_thread.join(timeout=60)

    def _pump(self) -> None:
        try:
            for raw in self._stream:
                self._add(raw)
        except Exception as exc:  # noqa: BLE001 - the daemon went away, or we closed the stream
            with self._cond:
                if not self._closed:
                    self.evidence.stream_error = f"event stream broke: {type(exc).__name__}: {exc}"
        finally:
            with self._cond:
                if not self._closed and not self.evidence.stream_error:
                    self.evidence.stream_error = "event stream ended"
                self._cond.notify_all()

    def _add(self, raw: dict[str, Any]) -> None:
        if raw.get("Type", "container") != "container":
            return
        action = str(raw.get("Action") or raw.get("status") or "")
        name = action.split(":", 1)[0]  # "exec_create: bash -i" -> exec_create
        if name not in ("kill", "die", "oom", "stop", "exec_die", "restart", "destroy", "pause"):
            return
        attrs = (raw.get("Actor") or {}).get("Attributes") or {}
        t_ns = raw.get("timeNano") or int(raw.get("time", 0)) * 1_000_000_000
        ev: dict[str, Any] = {"action": name, "t": round(t_ns / 1e9 - self._t0, 3)}
        if "signal" in attrs:
            ev["signal"] = _int(attrs["signal"])
        if "exitCode" in attrs:
            ev["exit_code"] = _int(attrs["exitCode"])
        if "execID" in attrs:
            ev["exec"] = str(attrs["execID"])[:12]
        with self._cond:
            self.evidence.events.append(ev)
            self._cond.notify_all()

    def _wait_for(self, pred: Any, timeout: float) -> bool:
        deadline = time.monotonic() + timeout
        with self._cond:
            while not pred():
                left = deadline - time.monotonic()
                if left <= 0 or self._thread is None or not self._thread.is_alive():
                    return bool(pred())
                self._cond.wait(min(left, 0.2))
            return True

    def outside_kills(self) -> list[dict[str, Any]]:
        """The engine's ``kill`` events for the container outside Bandpass's own restarts (a second of
        slack either side: the engine stamps its events itself)."""
        windows = list(getattr(self.sandbox, "harness_kill_windows", []) or [])
        with self._cond:
            kills = list(self.evidence.actions("kill"))
        return [k for k in kills if not any(a - 1.0 <= k["t"] + self._t0 <= b + 1.0 for a, b in windows)]

    def wait_for_death(self, timeout: float = EVENT_WAIT_S) -> None:
        """Until the engine's ``die`` event for the container arrived (or ``timeout``)."""
        self._wait_for(lambda: bool(self.evidence.actions("die")), timeout)

    def close(self) -> None:
        self._disk_stop.set()
        with self._cond:
            if self._closed:
                return
            self._closed = True
        if self._stream is not None:
            with contextlib.suppress(Exception):
                self._stream.close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    # --- the judgement ------------------------------------------------------------------------------------

    def judge(self, *, terminal_alive: bool, reported_code: str | None) -> Verdict | None:
        """Collects the remaining evidence and decides; None when the agent phase ended cleanly (the
        container runs, the agent's terminal was not lost, nothing was OOM-killed that ended it).

        ``reported_code`` is the infra code the agent phase itself reported (``container_died``/``oom``),
        or None. Call before ``close``; the verdict is stored on ``self.evidence`` too.
        """
        ev = self.evidence
        ev.terminal_alive = terminal_alive
        if ev.storage_limit_mb > 0 and ev.agent_started:
            self._stop_disk_watch()
            with contextlib.suppress(Exception):  # the last word: a burst since the last sample
                self._note_disk(self._measure_disk())
        ev.harness_stops = list(getattr(self.sandbox, "stopped_by_harness", []) or [])
        status = self._inspect()  # an engine that does not answer this marks the daemon unhealthy
        if status == "running" and ev.agent_started and not self._main_alive():
            # the main process is gone and init with it: the engine's ``die`` is on its way
            self._wait_for(lambda: bool(ev.actions("die")), EVENT_WAIT_S)
            status = self._inspect()
        if status != "running" and ev.daemon_healthy and ev.agent_started:
            self._wait_for(lambda: bool(ev.actions("die")), EVENT_WAIT_S)
        if status == "running" and not terminal_alive and self.agent_exec_id:
            short = self.agent_exec_id[:12]
            self._wait_for(lambda: any(e.get("exec") == short for e in ev.actions("exec_die")), 2.0)
            codes = [e.get("exit_code") for e in ev.actions("exec_die") if e.get("exec") == short]
            ev.shell_exit_code = codes[-1] if codes else None
            # ``kill -KILL -1`` takes the shell a moment before the container: give its die event a second
            if self._wait_for(lambda: bool(ev.actions("die")), SHELL_GRACE_S):
                status = self._inspect()
                self._wait_for(lambda: bool(ev.actions("die")), EVENT_WAIT_S)
        if status == "running" and (not terminal_alive or ev.actions("oom")):
            self._read_stats()
        if status == "running" and self._pids_dir is not None:  # from the host: cheap, unforgeable
            current, peak, hits = read_pids_cgroup(self._pids_dir)
            if hits is not None:
                ev.pids_current = current if current is not None else ev.pids_current
                ev.pids_peak, ev.pids_limit_hits = peak, hits - self._pids_hits0
                ev.pids_read_by = "host"
                if ev.pids_limit_hits > 0 and not _bomb_left_running(ev):
                    ev.pids_still_refused = self._still_refused(hits)
        elif status == "running" and not terminal_alive:
            ev.pids_limit_hits = self._pids_limit_hits()
            ev.pids_read_by = "container"
        if self._mem_dir is not None:  # gone with a stopped container: then the engine's word stands
            n = read_memory_oom_kills(self._mem_dir)
            ev.cgroup_oom_kills = None if n is None else n - self._mem_ooms0
        if self._host_ooms0 is not None:
            now = host_oom_kills()
            ev.host_oom_kills_delta = None if now is None else now - self._host_ooms0
        # A shell that ended while the agent still finished normally does not end the episode: the
        # container runs, so the verifier judges the state it left.
        ended = (
            status != "running"
            or reported_code in DEATH_CODES
            or ev.disk_over_limit
            or (status == "running" and _bomb_left_running(ev))
        )
        verdict = attribute(ev) if ended else None
        if verdict is not None:
            ev.verdict = {"outcome": verdict.outcome, "by": verdict.by, "why": verdict.why}
        return verdict

    def late_death(self) -> Verdict | None:
        """After the verifier: did the container die on its own between the agent's return and the
        harness's first stop? The agent's last command can set that off (``kill -KILL -1`` returns before
        init has gone); the verifier then finds a dead container and restarts it, and its reward would
        read as an ordinary failure, or its terminal fail as infra. Evidence: the first ``kill``/``die``
        the engine reported since the watch began is a ``die`` (nobody signalled it), and Bandpass had to
        restart the container (its restart sends a ``kill`` first, so a death during the tests cannot
        qualify).
        """
        ev = self.evidence
        with self._cond:  # the whole watch: Bandpass sends no kill during the agent phase
            after = [e for e in ev.events if e.get("action") in ("kill", "die", "oom")]
        stops = list(getattr(self.sandbox, "stopped_by_harness", []) or [])
        first = next((e for e in after if e["action"] != "oom"), None)
        if first is None or first["action"] != "die" or not any("restart" in x for x in stops):
            return None
        oom = any(e["action"] == "oom" for e in after[: after.index(first)])
        ev.harness_stops = stops
        ev.exit_code = first.get("exit_code")
        verdict = Verdict(
            outcomes.agent_error("oom" if oom else "sandbox_killed"),
            "policy",
            f"the container exited with status {first.get('exit_code')} right after the agent's last "
            "action, before the verifier started, with no signal from outside: it was ended from inside",
        )
        ev.verdict = {"outcome": verdict.outcome, "by": verdict.by, "why": verdict.why}
        return verdict

    def _inspect(self) -> str:
        ev = self.evidence
        try:
            attrs = self.client.api.inspect_container(self.sandbox.id)
        except docker.errors.NotFound:
            ev.status = "removed"
            return ev.status
        except Exception as exc:  # noqa: BLE001 - a daemon that stopped answering mid-check
            ev.daemon_healthy, ev.daemon_error = False, f"{type(exc).__name__}: {exc}"[:300]
            ev.status = "unknown"
            return ev.status
        state = attrs.get("State") or {}
        ev.status = str(state.get("Status") or "unknown")
        ev.oom_killed = bool(state.get("OOMKilled"))
        if ev.status != "running":
            ev.exit_code = _int(state.get("ExitCode"))
        return ev.status

    def _still_refused(self, hits: int) -> bool:
        """Whether the pid cgroup refuses another fork within ``PIDS_RECHECK_S``: a bomb still going does
        (bash retries a refused fork after 1, 2, 4 and 8 s, and the survivors refill the table); a spike
        the agent's work already got over does not. Costs up to that long, only after refused forks."""
        assert self._pids_dir is not None
        deadline = time.monotonic() + PIDS_RECHECK_S
        while time.monotonic() < deadline:
            _, _, again = read_pids_cgroup(self._pids_dir)
            if again is not None and again > hits:
                return True
            time.sleep(0.2)
        return False

    def _pids_limit_hits(self) -> int | None:
        try:
            code, out = self.sandbox.exec(["/bin/sh", "-c", _PIDS_EVENTS_SCRIPT], timeout=10)
        except Exception:  # noqa: BLE001 - the verdict stays sandbox_killed without it
            return None
        value = _int(out.strip()) if code == 0 else None
        return value if value is not None and value >= 0 else None

    def _read_stats(self) -> None:
        """Process count and memory high-water mark from the engine's own stats (not from inside)."""
        ev = self.evidence
        try:
            stats = self.client.api.stats(self.sandbox.id, stream=False)
        except Exception:  # noqa: BLE001 - figures are a bonus; the verdict does not need them
            return
        ev.pids_current = _int((stats.get("pids_stats") or {}).get("current"))
        mem = stats.get("memory_stats") or {}
        if mem.get("max_usage") is not None:
            ev.memory_max_usage_mb = round(int(mem["max_usage"]) / 2**20, 1)
        ev.memory_failcnt = _int(mem.get("failcnt"))


def _bomb_left_running(ev: Evidence) -> bool:
    """Forks were refused during the agent phase and the container is still at its pid limit."""
    margin = max(PIDS_MARGIN, ev.pids_limit // 8)
    at_limit = ev.pids_current is not None and ev.pids_current >= ev.pids_limit - margin
    return bool(ev.pids_limit and (ev.pids_limit_hits or 0) > 0 and (at_limit or ev.pids_still_refused))


def attribute(ev: Evidence) -> Verdict:
    """The rules in the module docstring, as a pure function of the evidence (unit-testable)."""
    if not ev.daemon_healthy:
        return Verdict(
            outcomes.infra_error("daemon_unavailable"),
            "daemon",
            f"the Docker engine stopped answering during the agent phase ({ev.daemon_error})",
        )
    if ev.disk_over_limit and ev.agent_started:
        where = "on the host (overlay2 upper dir)" if ev.disk_measured_by == "layer" else "by the engine"
        return Verdict(
            outcomes.agent_error("disk_full"),
            "policy",
            f"the container's writable layer reached {ev.disk_used_mb:g} MB, over the task's own disk "
            f"allowance of {ev.storage_limit_mb} MB (storage_mb; measured {where})"
            + (f"; {ev.disk_enforced}" if ev.disk_enforced else ""),
        )
    if ev.harness_stops:
        return Verdict(
            outcomes.infra_error("container_died"),
            "harness",
            f"Bandpass stopped the container itself: {', '.join(ev.harness_stops)}",
        )
    if not ev.agent_started:
        oom = bool(ev.actions("oom") or ev.oom_killed)
        return Verdict(
            outcomes.infra_error("oom" if oom else "container_died"),
            "harness",
            "the container stopped before the agent's terminal was up: no policy action had run yet",
        )
    kills = ev.actions("kill")
    if kills:
        sig = ", ".join(str(k.get("signal", "?")) for k in kills)
        return Verdict(
            outcomes.infra_error("container_died"),
            "outside",
            f"the container was killed from outside (engine kill event, signal {sig}), not by the policy",
        )
    cgroup_ooms = ev.cgroup_oom_kills or 0
    if ev.actions("oom") or ev.oom_killed or cgroup_ooms > 0:
        target = "the container" if ev.status != "running" else "the agent's shell"
        said = [
            *(["engine oom event"] if ev.actions("oom") else []),
            *(["OOMKilled"] if ev.oom_killed else []),
            *([f"{cgroup_ooms} OOM kill(s) in the container's memory cgroup"] if cgroup_ooms else []),
        ]
        return Verdict(
            outcomes.agent_error("oom"),
            "policy",
            f"{target} was killed for memory under the task's own limit of {ev.memory_limit_mb} MB "
            f"({', '.join(said)})",
        )
    sigkilled = ev.exit_code == 137 or ev.shell_exit_code == 137
    if sigkilled and (ev.host_oom_kills_delta or 0) > 0:
        return Verdict(
            outcomes.infra_error("oom"),
            "host",
            "SIGKILLed with no kill or oom event for the container while the host's kernel OOM-killed "
            f"{ev.host_oom_kills_delta} process(es): the host ran out of memory, not the task's limit",
        )
    if ev.status != "running":
        code = "unknown" if ev.exit_code is None else str(ev.exit_code)
        return Verdict(
            outcomes.agent_error("sandbox_killed"),
            "policy",
            f"the container exited with status {code} during the agent phase, the daemon healthy and "
            "no signal from outside: it was ended from inside",
        )
    if ev.terminal_alive and _bomb_left_running(ev):
        return Verdict(
            outcomes.agent_error("pids_exhausted"),
            "policy",
            f"the agent's processes filled the container's pid limit of {ev.pids_limit} and were still at "
            f"it when the agent phase ended ({ev.pids_limit_hits} fork(s) refused, {ev.pids_current} "
            f"processes{', forks still refused after the agent returned' if ev.pids_still_refused else ''}"
            "): a fork bomb",
        )
    at_limit = ev.pids_current is not None and ev.pids_current >= ev.pids_limit - PIDS_MARGIN
    if ev.pids_limit and (at_limit or (ev.pids_limit_hits or 0) > 0):
        return Verdict(
            outcomes.agent_error("pids_exhausted"),
            "policy",
            f"the agent's shell ended after the container hit its pid limit of {ev.pids_limit} "
            f"({ev.pids_limit_hits or 0} fork(s) refused, {ev.pids_current} processes now)",
        )
    status = "unknown" if ev.shell_exit_code is None else str(ev.shell_exit_code)
    return Verdict(
        outcomes.agent_error("sandbox_killed"),
        "policy",
        f"the agent's shell ended from inside (exit status {status}) while the container kept running",
    )


def summary(evidence: dict[str, Any] | str | None) -> str:
    """One line for CLI tables: who ended the sandbox and why; an OOM the agent survived is shown too.
    Takes the evidence dict or the stored JSON; empty when there is nothing to say."""
    if isinstance(evidence, str):
        try:
            evidence = json.loads(evidence) if evidence else None
        except json.JSONDecodeError:
            return ""
    if not isinstance(evidence, dict) or not evidence:
        return ""
    verdict = evidence.get("verdict") or {}
    if verdict:
        return f"{verdict.get('by', '?')}: {verdict.get('why', '')}"
    ooms = sum(1 for e in evidence.get("events", []) if e.get("action") == "oom")
    if ooms:
        return f"policy: {ooms} process(es) OOM-killed under the {evidence.get('memory_limit_mb')} MB limit"
    return ""


def _loads(evidence: dict[str, Any] | str | None) -> dict[str, Any]:
    if isinstance(evidence, str):
        try:
            evidence = json.loads(evidence) if evidence else None
        except json.JSONDecodeError:
            return {}
    return evidence if isinstance(evidence, dict) else {}


def facts(evidence: dict[str, Any] | str | None) -> str:
    """The evidence behind ``summary`` in one line: the container's end (status, exit code, OOMKilled),
    the engine's events (kill with its signal, die with its exit code, oom), Bandpass's own stops, and
    the pid, disk and control figures that decided. Empty when nothing ended the sandbox."""
    ev = _loads(evidence)
    if not ev or not (ev.get("verdict") or any(e.get("action") == "oom" for e in ev.get("events", []))):
        return ""
    parts: list[str] = []
    status = ev.get("status")
    if status and status != "running":
        parts.append(
            f"container {status}" + (f" {ev['exit_code']}" if ev.get("exit_code") is not None else "")
        )
    if ev.get("oom_killed"):
        parts.append("OOMKilled")
    if ev.get("terminal_alive") is False:
        code = ev.get("shell_exit_code")
        parts.append("agent shell ended" + (f" {code}" if code is not None else ""))
    shown = []
    for e in ev.get("events", []):
        if e.get("action") == "kill":
            shown.append(f"kill(signal {e.get('signal', '?')})")
        elif e.get("action") == "die":
            shown.append(f"die(exit {e.get('exit_code', '?')})")
        elif e.get("action") == "oom":
            shown.append("oom")
    if shown:
        parts.append("engine: " + ", ".join(shown[:6]) + (" …" if len(shown) > 6 else ""))
    elif "events" in ev:
        parts.append("no kill/die/oom event from the engine")
    if ev.get("harness_stops"):
        parts.append("Bandpass: " + "; ".join(ev["harness_stops"]))
    if ev.get("pids_limit_hits"):
        parts.append(
            f"pids {ev.get('pids_current')}/{ev.get('pids_limit')}, {ev['pids_limit_hits']} fork(s) refused"
        )
    if ev.get("disk_over_limit"):
        parts.append(f"disk {ev.get('disk_used_mb')} MB of {ev.get('storage_limit_mb')} MB allowed")
    ctl = ev.get("control") or {}
    if "reward" in ctl:
        parts.append(
            f"control (fresh container): reward {ctl['reward']}"
            + (f" after {ctl['failed_with']}" if ctl.get("failed_with") else "")
        )
    if ev.get("daemon_healthy") is False:
        parts.append("daemon not answering")
    return " · ".join(parts)


def episode_evidence(ws: Any, episode_id: int) -> dict[str, Any]:
    """The attribution evidence of an episode as a JSON-ready dict (for ``bandpass show`` and the TUI):
    ``{"outcome", "summary", "evidence"}``; ``evidence`` is {} when nothing ended the sandbox."""
    from store import queries
    from store.db import session

    with session(ws.engine) as s:
        ep = queries.get_episode(s, episode_id)
        if ep is None:
            raise KeyError(f"episode {episode_id} does not exist")
        evidence = queries.episode_evidence(s, episode_id)
        outcome = ep.outcome
    return {"outcome": outcome, "summary": summary(evidence), "facts": facts(evidence), "evidence": evidence}


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None


__all__ = [
    "DEATH_CODES",
    "SANDBOX_AGENT_CODES",
    "ContainerWatch",
    "Evidence",
    "Verdict",
    "attribute",
    "episode_evidence",
    "facts",
    "host_cgroup_dir",
    "host_oom_kills",
    "layer_bytes",
    "read_pids_cgroup",
    "summary",
]
