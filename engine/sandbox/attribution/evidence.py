"""What attribution records and decides: the ``Evidence`` it gathered and the ``Verdict`` it reached.

Separate because both the watcher (which fills the evidence) and the rules (which read it) use these, and
the evidence is what is stored with the episode (``episode.evidence_json``) and rendered later.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


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
    #: OOM kills of the container's processes during the agent phase, read on the host from its own memory
    #: cgroup (v1 memory.oom_control, v2 memory.events): the kernel's word, whether or not the engine's
    #: ``oom`` event arrived in time (under load it can lag the attribution)
    cgroup_oom_kills: int | None = None
    #: Whether the container's memory ever reached the task's limit (its cgroup's peak, on the host): OOM
    #: kills in a cgroup that never got there were the host's
    cgroup_limit_reached: bool | None = None
    verdict: dict[str, str] = field(default_factory=dict)

    def actions(self, name: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("action") == name]

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)
