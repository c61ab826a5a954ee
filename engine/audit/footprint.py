"""The oracle's footprint: does the task's verifier work in the clean room, and if not, why not?

Verifying in a clean room (engine/run/cleanroom.py) carries only the task's artifacts into a fresh
container. A task whose verifier also reads something else the solution changes (a config under
``/etc``, a tool installed in ``/usr/local/bin``) fails its own oracle there, and a task whose deliverable
is a *running service* (the test curls it) cannot be verified anywhere but where the service runs. So the
audit runs the oracle both ways before anything else:

* it passes in the clean room: nothing to do, the task is verified there;
* it fails in the clean room, passes in place, and the in-place oracle left a process listening on a TCP
  port (engine/sandbox/hostview.py): a **service task**. The oracle then runs once more as a service (a
  fresh container of the image, the artifacts carried in, joined to the agent container's network
  namespace: engine/run/episode.py). When that passes, the version is verified that way from now on
  (``task_version.verify_mode = service``) and the audit's probes run against it that way: the service
  answers, and no process the policy left (a background reward writer, a listener that also writes the
  reward) shares the verifier's processes or its ``/logs``. When it fails, the verifier also reads what
  the oracle changed outside the artifacts: ``invalidity.artifacts_undeclared``, naming those changes
  (never verified in place unless the task asks for it, ``[metadata.bandpass] verify_mode``);
* it fails in the clean room, passes in place, and no service: the verifier needs files outside the
  artifacts. The oracle's changes outside them are grouped (a new directory counts once), all of them are
  carried into a clean room to confirm, then dropped one by one while the verifier still passes, and what
  is left is **adopted** for the version (``task_version.adopted_artifacts_json``: carried into every
  later clean room like a declared artifact, written into the ``task.toml`` an export writes) and named
  as the ``artifacts`` line the task's author can add: ``invalidity.artifacts_undeclared``, a finding
  that leaves the verdict as it is. Where a task is verified is Bandpass's choice, so it must never cost
  honest work its reward (Harbor verifies such a task where the agent worked, and passes it).

A service task whose verifier also reads the oracle's other changes gets them adopted the same way
(confirmed by one more oracle run as a service). What no carried file can give — a verifier that passes
only in the agent's own container — stays blocking: ``invalidity.needs_agent_container``.

The same :func:`settle` runs before the first rollout of a version no audit settled
(engine/audit/adoption.py): its result is stored on the version (``task_version.footprint_json``) either
way, so it is learnt once per version.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import docker

from ...store.db import session
from ...store.models import utcnow
from ...store.queries import endstate as endstate_store
from ..core import outcomes
from ..core.events import EventBus
from ..core.workspace import Workspace
from ..run import cleanroom
from ..run.agents.builtin import OracleAgent
from ..run.endstate import ADDED, DELETED, Change, EndState
from ..run.episode import EpisodeResult, run_episode
from ..run.verifier import run_verifier
from ..sandbox import pool as sandbox_pool
from ..sandbox.container import SandboxSpec
from ..sandbox.labels import episode_labels
from ..tasks.artifacts import CLEAN_ROOM, IN_PLACE, SERVICE, under
from ..tasks.taskdir import TaskSpec

UNDECLARED = "invalidity.artifacts_undeclared"
#: The verifier passes only in the agent's own container: nothing carried into a fresh one helps.
NEEDS_AGENT = "invalidity.needs_agent_container"
#: What a solution leaves behind that no verifier needs: caches, logs, package lists, temporary files.
NOISE = (
    "/tmp",
    "/var/tmp",
    "/run",
    "/var/run",
    "/var/log",
    "/var/cache",
    "/var/lib/apt/lists",
    "/root/.cache",
    "/root/.bash_history",
    "/root/.python_history",
    "/root/.wget-hsts",
    "/root/.lesshst",
    "/root/.viminfo",
    "/logs",
)
#: Candidates tried one by one when minimising (beyond this the whole set is proposed).
MAX_MINIMISE = 10


@dataclasses.dataclass
class Footprint:
    """The settled mode and the evidence for it (stored in the audit's checks under ``footprint``)."""

    mode: str
    why: str
    clean_room: dict[str, Any] = dataclasses.field(default_factory=dict)
    in_place: dict[str, Any] = dataclasses.field(default_factory=dict)
    service: dict[str, Any] = dataclasses.field(default_factory=dict)  # the oracle verified as a service
    services: list[dict[str, Any]] = dataclasses.field(default_factory=list)
    needed: list[str] = dataclasses.field(default_factory=list)  # proposed artifact paths
    #: What was adopted for the version (``needed``, once an oracle verified with it passed).
    adopted: list[str] = dataclasses.field(default_factory=list)
    #: The service oracle run again with the adopted artifacts carried (a service task only).
    service_adopted: dict[str, Any] = dataclasses.field(default_factory=dict)

    def as_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def _brief(r: EpisodeResult) -> dict[str, Any]:
    return {"episode": r.episode_id, "outcome": r.outcome, "reward": r.reward}


def candidates(changes: list[Change], roots: list[str]) -> list[str]:
    """The oracle's changes outside the artifact roots and the noise, grouped: a file under a directory
    the oracle created counts as that directory (its highest new ancestor)."""
    added_dirs = {c.path for c in changes if c.kind == ADDED and c.type == "dir"}
    out: list[str] = []
    for c in sorted(changes, key=lambda c: c.path):
        if c.type == "dir" and c.kind != DELETED:
            continue
        if any(under(c.path, r) for r in roots) or any(under(c.path, n) for n in NOISE):
            continue
        if c.path.endswith(".pyc") or "/__pycache__/" in c.path:
            continue
        top, parent = c.path, c.path.rsplit("/", 1)[0]
        while parent and parent in added_dirs:
            top, parent = parent, parent.rsplit("/", 1)[0]
        if top not in out:
            out.append(top)
    return out


def settle(
    ws: Workspace,
    version_id: int,
    spec: TaskSpec,
    *,
    client: docker.DockerClient,
    bus: EventBus | None,
    batch: str,
    workers: int = 2,
    source: str = "audit",
) -> Footprint:
    """Runs the oracle in the clean room and in place (and, for a service, as a service), decides where
    this version is verified, adopts what its verifier needs outside the artifacts, stores both on the
    version (``source`` says who learnt it: ``audit`` or ``rollout``), and returns the evidence. A task
    that declares ``[verifier] environment_mode`` (or ``[metadata.bandpass] verify_mode``) is verified the
    way it says (nothing run here)."""
    if spec.verify_mode:
        fp = Footprint(spec.verify_mode, f"declared in task.toml ({_declared(spec.verify_mode)})")
        return _record(ws, version_id, fp, source)
    # an earlier adoption is forgotten first: the clean room is tried with the task's own artifacts
    _record(ws, version_id, None, source)

    def oracle(mode: str) -> EpisodeResult:
        return run_episode(
            ws, version_id, OracleAgent, client=client, bus=bus, batch_id=batch, verify_mode=mode
        )

    clean = oracle(CLEAN_ROOM)
    fp = Footprint(CLEAN_ROOM, "the oracle passes in the clean room", clean_room=_brief(clean))
    if clean.outcome == outcomes.PASSED or outcomes.is_infra(clean.outcome):
        if outcomes.is_infra(clean.outcome):
            fp.why = f"the clean-room oracle ended {clean.outcome}: nothing learnt, the clean room stays"
        _store_mode(ws, version_id, "")
        return _record(ws, version_id, fp, source)
    place = oracle(IN_PLACE)
    fp.in_place = _brief(place)
    if place.outcome != outcomes.PASSED:
        fp.why = "the oracle fails both ways: no footprint to learn from (see the oracle's own findings)"
        if outcomes.is_infra(place.outcome):
            fp.why = f"the in-place oracle ended {place.outcome}: nothing learnt, the clean room stays"
        _store_mode(ws, version_id, "")
        return _record(ws, version_id, fp, source)
    services = place.carry.get("kept") or []
    if services:
        fp.mode, fp.services = SERVICE, services
        ports = ", ".join(sorted({f":{s['port']}" for s in services}))
        svc = oracle(SERVICE)
        fp.service = _brief(svc)
        if svc.outcome == outcomes.PASSED or outcomes.is_infra(svc.outcome):
            fp.why = (
                f"the oracle passes in place and leaves a service listening ({ports}) but fails in the "
                "clean room: its deliverable is a running process, verified as a service (a fresh "
                "container with the artifacts, in the agent container's network namespace)"
            )
            if outcomes.is_infra(svc.outcome):
                fp.why += f"; the service oracle ended {svc.outcome}: nothing more learnt"
        else:
            fp.needed = _outside(spec, place)
            fp.why = (
                f"the oracle leaves a service listening ({ports}) and passes in place, but fails as a "
                "service: the verifier also reads what the oracle changed outside its artifacts"
            )
            if fp.needed:  # confirmed by the service oracle verified with them carried
                _store_mode(ws, version_id, SERVICE)
                _record(ws, version_id, dataclasses.replace(fp, adopted=fp.needed), source)
                again = oracle(SERVICE)
                fp.service_adopted = _brief(again)
                if again.outcome == outcomes.PASSED:
                    fp.adopted = list(fp.needed)
                    fp.why += f"; with {', '.join(fp.adopted)} carried it passes: adopted for the version"
        _store_mode(ws, version_id, SERVICE)
        return _record(ws, version_id, fp, source)
    fp.needed = _needed(ws, client, spec, place, batch)
    fp.adopted = list(fp.needed)
    fp.why = "the oracle passes in place but fails in the clean room: the verifier reads undeclared state"
    if fp.adopted:
        fp.why += f"; {', '.join(fp.adopted)} adopted for the version (carried into the clean room)"
    _store_mode(ws, version_id, "")
    return _record(ws, version_id, fp, source)


def learnt(fp: Footprint) -> bool:
    """Whether a footprint says where the version is verified (an oracle that ended an infra error
    taught nothing: the next rollout tries again)."""
    tried = [fp.clean_room, fp.in_place, fp.service]
    return not any(outcomes.is_infra(str(t.get("outcome") or "")) for t in tried)


def _record(ws: Workspace, version_id: int, fp: Footprint | None, source: str) -> Footprint:
    """Stores the footprint (``None``: forgets one) and what it adopted on the version."""
    row: dict[str, Any] = {}
    if fp is not None and learnt(fp):
        row = {**fp.as_dict(), "source": source, "learnt_at": utcnow().isoformat(timespec="seconds")}
    with session(ws.engine) as s:
        endstate_store.set_version_footprint(s, version_id, row, fp.adopted if fp is not None else [])
    return fp if fp is not None else Footprint(CLEAN_ROOM, "forgotten")


def _declared(mode: str) -> str:
    if mode == IN_PLACE:
        return '[metadata.bandpass] verify_mode = "in_place"'
    return f'[verifier] environment_mode = "{"shared" if mode == SERVICE else "separate"}"'


def _outside(spec: TaskSpec, place: EpisodeResult) -> list[str]:
    """What the in-place oracle changed outside the artifacts (grouped, noise left out): the candidates a
    service task's verifier reads. Not minimised: a clean room without the service cannot tell."""
    return candidates(place.endstate.changes, spec.artifact_roots) if place.endstate is not None else []


def _store_mode(ws: Workspace, version_id: int, mode: str) -> None:
    with session(ws.engine) as s:
        endstate_store.set_version_verify_mode(s, version_id, mode)


def proposal(needed: list[str]) -> str:
    """The task.toml line a curator adds."""
    return "artifacts = [" + ", ".join(f'"{p}"' for p in needed) + "]"


def report_finding(fp: Footprint) -> tuple[str, str] | None:
    """The audit's finding for a footprint, or None (a service task is accepted, verified as a service).
    ``invalidity.artifacts_undeclared`` names what was adopted (a finding, the verdict unchanged:
    engine/audit/verdict.py); ``invalidity.needs_agent_container`` is what no carried file can give."""
    if fp.mode == SERVICE and fp.service and fp.service.get("outcome") not in (outcomes.PASSED, None):
        if outcomes.is_infra(str(fp.service.get("outcome"))):
            return None
        if fp.adopted:
            return UNDECLARED, (
                f"the oracle leaves a service and passes in place (episode {fp.in_place['episode']}) but "
                f"fails verified as a service (episode {fp.service['episode']}); with what it changed at "
                f"{', '.join(fp.adopted)} carried it passes (episode {fp.service_adopted['episode']}): "
                "adopted for this version (carried from now on, declared in the task.toml an export "
                f"writes). Declare it in task.toml: {proposal(fp.adopted)}"
            )
        where = ", ".join(fp.needed)
        changed = f"what the oracle changed at {where}" if fp.needed else "state the oracle left"
        return NEEDS_AGENT, (
            f"the oracle leaves a service and passes in place (episode {fp.in_place['episode']}), but fails "
            f"verified as a service (episode {fp.service['episode']}), even with {changed} carried: the "
            "verifier needs what only the agent's own container holds. "
            '(In place, [metadata.bandpass] verify_mode = "in_place", would pass it, but there a process '
            "the policy leaves listening could write the reward.)"
        )
    if fp.mode in (IN_PLACE, SERVICE) or not fp.in_place or fp.in_place.get("outcome") != outcomes.PASSED:
        return None
    if fp.adopted:
        return UNDECLARED, (
            f"the oracle passes in place (episode {fp.in_place['episode']}) but fails in the clean room "
            f"(episode {fp.clean_room['episode']}); the verifier needs what the oracle changed at "
            f"{', '.join(fp.adopted)}: adopted for this version (carried into the clean room from now on, "
            f"declared in the task.toml an export writes). Declare it in task.toml: {proposal(fp.adopted)}"
        )
    return NEEDS_AGENT, (
        f"the oracle passes in place (episode {fp.in_place['episode']}) but fails in the clean room "
        f"(episode {fp.clean_room['episode']}), and carrying every file it changed does not help: the "
        'verifier needs a running process; verify it as a service: [verifier] environment_mode = "shared"'
    )


def _needed(
    ws: Workspace, client: docker.DockerClient, spec: TaskSpec, place: EpisodeResult, batch: str
) -> list[str]:
    """The smallest set of the oracle's changed paths (grouped) that makes the clean room pass; empty when
    even all of them do not."""
    state = place.endstate
    if state is None:
        return []
    cands = candidates(state.changes, spec.artifact_roots)
    if not cands:
        return []
    base = SandboxSpec(
        image=place.image,
        cpus=spec.cpus,
        memory_mb=spec.memory_mb,
        pids_limit=spec.pids_limit or 512,
        network=spec.verifier_network,
        workdir=spec.workdir,
        labels=episode_labels(ws.root, batch),
        default_caps=True,
    )

    def passes(extra: list[str]) -> bool:
        return _verify_with(client, base, spec, state, [*spec.artifact_roots, *extra]) == 1.0

    if not passes(cands):
        return []
    if len(cands) > MAX_MINIMISE:
        return cands
    needed = list(cands)
    for c in cands:
        trial = [x for x in needed if x != c]
        if passes(trial):
            needed = trial
    return needed


def _verify_with(
    client: docker.DockerClient, base: SandboxSpec, spec: TaskSpec, state: EndState, roots: list[str]
) -> float | None:
    """The verifier's reward in a clean room that carries ``roots`` from the oracle's end state."""
    carry = cleanroom.plan(state.changes, roots, spec.workdir)
    data = cleanroom.build(carry, state.archive)
    fresh = sandbox_pool.acquire(client, base)
    try:
        cleanroom.apply(fresh, carry, data)
        return run_verifier(client, fresh, spec, agent_stopped=True).reward
    except Exception:  # noqa: BLE001 - a failed probe is "does not pass"
        return None
    finally:
        with contextlib.suppress(Exception):
            sandbox_pool.release(fresh)


__all__ = [
    "NEEDS_AGENT",
    "NOISE",
    "UNDECLARED",
    "Footprint",
    "candidates",
    "learnt",
    "proposal",
    "report_finding",
    "settle",
]
