"""The watcher: a ``ContainerWatch`` follows the Docker engine's events for one container on a thread
of its own during the agent phase, polls its writable layer against the task's disk allowance (and stops
the agent over it), then collects the remaining evidence and asks the rules for a verdict.

Separate because it is the one part with threads, a Docker client and timing (waits for the engine's
``die``/``exec_die`` events); the rules it applies are in rules.py and the host reads in host_probes.py.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from pathlib import Path
from typing import Any

import docker

from ...core import outcomes
from ._common import _int
from .evidence import Evidence, Verdict
from .host_probes import (
    _engine_is_local,
    host_cgroup_dir,
    layer_bytes,
    memory_limit_reached,
    read_memory_oom_kills,
    read_pids_cgroup,
)
from .rules import DEATH_CODES, _bomb_left_running, attribute

#: How long to wait for the engine's ``die``/``exec_die`` event after a death was noticed.
EVENT_WAIT_S = 5.0
#: After the agent's shell died in a running container: how long a following container death still counts
#: as the same act (the outcome is the policy's either way; this only gets the story right).
SHELL_GRACE_S = 1.0
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
#: After forks were refused: how long to wait before reading the refusal count again.
PIDS_RECHECK_S = 3.0
#: How often the writable layer is measured during the agent phase (at least; a slow walk stretches it).
DISK_POLL_S = 1.0


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
            ev.cgroup_limit_reached = memory_limit_reached(self._mem_dir)
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

    def late_death(self, found_dead: bool = False) -> Verdict | None:
        """After the verifier: did the container die on its own between the agent's return and the
        harness's first stop? The agent's last command can set that off (``kill -KILL -1`` returns before
        init has gone); the verifier then finds a dead container and restarts it, and its reward would
        read as an ordinary failure, or its terminal fail as infra. Evidence: the first ``kill``/``die``
        the engine reported since the watch began is a ``die`` (nobody signalled it), and Bandpass had to
        restart the container (its restart sends a ``kill`` first, so a death during the tests cannot
        qualify) — or, verifying in a clean room, the capture found the container already stopped
        (``found_dead``: nothing of Bandpass's had signalled it yet).
        """
        ev = self.evidence
        with self._cond:  # the whole watch: Bandpass sends no kill during the agent phase
            after = [e for e in ev.events if e.get("action") in ("kill", "die", "oom")]
        stops = list(getattr(self.sandbox, "stopped_by_harness", []) or [])
        first = next((e for e in after if e["action"] != "oom"), None)
        if (
            first is None
            or first["action"] != "die"
            or not (found_dead or any("restart" in x for x in stops))
        ):
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
