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
* the container's own memory cgroup as the host sees it (local engines): OOM kills of its processes (v1
  ``memory.oom_control`` ``oom_kill``, v2 ``memory.events`` ``oom_kill``) and whether its usage ever
  reached the task's limit (v1 ``memory.failcnt``, v2 ``memory.events`` ``oom``), which tells a task over
  its own limit from a host out of memory. Never a host-wide counter: ``/proc/vmstat``'s ``oom_kill``
  also counts other containers' kills (one read ``kill -KILL -1`` as "the host ran out of memory");
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

The package, by concern: host_probes.py (what the host sees: layer size, pid and memory cgroups),
evidence.py (the ``Evidence`` recorded and the ``Verdict``), rules.py (the rules, first match wins, as a
pure function of the evidence; the table is its docstring), watcher.py (``ContainerWatch``: the engine's
event stream, the disk poll, the judgement) and render.py (the summary and facts lines). Every public
name is re-exported here, so callers keep writing
``from bandpass.engine.sandbox import attribution; attribution.X`` or
``from bandpass.engine.sandbox.attribution import X``.
"""

from __future__ import annotations

from .evidence import Evidence, Verdict
from .host_probes import (
    CGROUP_ROOT,
    host_cgroup_dir,
    layer_bytes,
    memory_limit_reached,
    read_memory_oom_kills,
    read_pids_cgroup,
)
from .render import facts, summary
from .rules import DEATH_CODES, PIDS_MARGIN, SANDBOX_AGENT_CODES, attribute
from .watcher import (
    DISK_POLL_S,
    EVENT_WAIT_S,
    PIDS_RECHECK_S,
    SHELL_GRACE_S,
    ContainerWatch,
)

__all__ = [
    "CGROUP_ROOT",
    "ContainerWatch",
    "DEATH_CODES",
    "DISK_POLL_S",
    "EVENT_WAIT_S",
    "Evidence",
    "PIDS_MARGIN",
    "PIDS_RECHECK_S",
    "SANDBOX_AGENT_CODES",
    "SHELL_GRACE_S",
    "Verdict",
    "attribute",
    "facts",
    "host_cgroup_dir",
    "layer_bytes",
    "memory_limit_reached",
    "read_memory_oom_kills",
    "read_pids_cgroup",
    "summary",
]
