"""Rules (first match wins), for the agent phase only (the verifier phase after a clean agent phase is the
harness's work and keeps infra codes):

| evidence | outcome |
|---|---|
| the engine does not answer | ``infra_error:daemon_unavailable`` |
| the writable layer went over the task's ``storage_mb`` | ``agent_error:disk_full`` |
| Bandpass stopped the container itself | ``infra_error:container_died`` |
| any death before the agent's terminal was up (no policy action ran yet) | the infra code |
| a ``kill`` event (``docker kill``/``stop``/``rm -f`` from outside) | ``infra_error:container_died`` |
| OOM kills in the container's memory cgroup while its usage never reached the task's limit
  | ``infra_error:oom`` (host out of memory) |
| an ``oom`` event / ``OOMKilled`` / an OOM kill counted in the container's memory cgroup on the host
  (the container's own limit) | ``agent_error:oom`` |
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

Separate from the watcher so the decision is a pure function of the evidence, unit-testable without a
container (``attribute``).
"""

from __future__ import annotations

from ...core import outcomes
from ...core.plural import counted
from .evidence import Evidence, Verdict

#: Agent-phase codes a policy can cause from inside its sandbox (``agent_error:<code>``).
SANDBOX_AGENT_CODES = ("sandbox_killed", "oom", "pids_exhausted", "disk_full")
#: Infra codes the agent phase reports when the container or terminal went away; these are re-judged here.
DEATH_CODES = frozenset({"container_died", "oom"})
#: "At the pid limit": a fork loop that died of it has freed its own pid and a few more by the time we look.
PIDS_MARGIN = 8


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
    if cgroup_ooms > 0 and ev.cgroup_limit_reached is False:
        return Verdict(
            outcomes.infra_error("oom"),
            "host",
            f"the kernel OOM-killed {counted(cgroup_ooms, 'process', 'processes')} of the container while "
            f"its memory never reached the task's limit of {ev.memory_limit_mb} MB (its own memory cgroup): "
            "the host ran out of memory, not the task",
        )
    if ev.actions("oom") or ev.oom_killed or cgroup_ooms > 0:
        target = "the container" if ev.status != "running" else "the agent's shell"
        said = [
            *(["engine oom event"] if ev.actions("oom") else []),
            *(["OOMKilled"] if ev.oom_killed else []),
            *(
                [f"{counted(cgroup_ooms, 'OOM kill')} in the container's memory cgroup"]
                if cgroup_ooms
                else []
            ),
        ]
        return Verdict(
            outcomes.agent_error("oom"),
            "policy",
            f"{target} was killed for memory under the task's own limit of {ev.memory_limit_mb} MB "
            f"({', '.join(said)})",
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
            f"it when the agent phase ended ({counted(ev.pids_limit_hits or 0, 'fork')} refused, "
            f"{ev.pids_current} "
            f"processes{', forks still refused after the agent returned' if ev.pids_still_refused else ''}"
            "): a fork bomb",
        )
    at_limit = ev.pids_current is not None and ev.pids_current >= ev.pids_limit - PIDS_MARGIN
    if ev.pids_limit and (at_limit or (ev.pids_limit_hits or 0) > 0):
        return Verdict(
            outcomes.agent_error("pids_exhausted"),
            "policy",
            f"the agent's shell ended after the container hit its pid limit of {ev.pids_limit} "
            f"({counted(ev.pids_limit_hits or 0, 'fork')} refused, {ev.pids_current} processes now)",
        )
    status = "unknown" if ev.shell_exit_code is None else str(ev.shell_exit_code)
    return Verdict(
        outcomes.agent_error("sandbox_killed"),
        "policy",
        f"the agent's shell ended from inside (exit status {status}) while the container kept running",
    )
