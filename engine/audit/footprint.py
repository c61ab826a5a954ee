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
  is left is proposed as the task's ``artifacts`` line: ``invalidity.artifacts_undeclared`` (blocking), so
  a curator fixes the task once.
"""

from __future__ import annotations

import contextlib
import dataclasses
from typing import Any

import docker

from bandpass.engine.core import outcomes
from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run import cleanroom
from bandpass.engine.run.agents.builtin import OracleAgent
from bandpass.engine.run.endstate import ADDED, DELETED, Change, EndState
from bandpass.engine.run.episode import EpisodeResult, run_episode
from bandpass.engine.run.verifier import run_verifier
from bandpass.engine.sandbox import pool as sandbox_pool
from bandpass.engine.sandbox.container import SandboxSpec
from bandpass.engine.sandbox.labels import episode_labels
from bandpass.engine.tasks.artifacts import CLEAN_ROOM, IN_PLACE, SERVICE, under
from bandpass.engine.tasks.taskdir import TaskSpec
from bandpass.store.db import session
from bandpass.store.queries import endstate as endstate_store

UNDECLARED = "invalidity.artifacts_undeclared"
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
) -> Footprint:
    """Runs the oracle in the clean room and in place (and, for a service, as a service), decides where
    this version is verified, stores it on the version, and returns the evidence. A task that declares
    ``[verifier] environment_mode`` (or ``[metadata.bandpass] verify_mode``) is verified the way it says
    (nothing run here)."""
    if spec.verify_mode:
        return Footprint(spec.verify_mode, f"declared in task.toml ({_declared(spec.verify_mode)})")

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
        return fp
    place = oracle(IN_PLACE)
    fp.in_place = _brief(place)
    if place.outcome != outcomes.PASSED:
        fp.why = "the oracle fails both ways: no footprint to learn from (see the oracle's own findings)"
        _store_mode(ws, version_id, "")
        return fp
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
        _store_mode(ws, version_id, SERVICE)
        return fp
    fp.needed = _needed(ws, client, spec, place, batch)
    fp.why = "the oracle passes in place but fails in the clean room: the verifier reads undeclared state"
    _store_mode(ws, version_id, "")
    return fp


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
    """The audit's finding for a footprint, or None (a service task is accepted, verified as a service)."""
    if fp.mode == SERVICE and fp.service and fp.service.get("outcome") not in (outcomes.PASSED, None):
        if outcomes.is_infra(str(fp.service.get("outcome"))):
            return None
        where = ", ".join(fp.needed)
        changed = f"what the oracle changed at {where}" if fp.needed else "state the oracle left"
        return UNDECLARED, (
            f"the oracle leaves a service and passes in place (episode {fp.in_place['episode']}), but fails "
            f"verified as a service (episode {fp.service['episode']}): the verifier also reads {changed}, "
            "outside the task's artifacts."
            + (f" Declare it in task.toml: {proposal(fp.needed)}" if fp.needed else "")
            + ' (In place, [metadata.bandpass] verify_mode = "in_place", would pass it, but there a process '
            "the policy leaves listening could write the reward.)"
        )
    if fp.mode in (IN_PLACE, SERVICE) or not fp.in_place or fp.in_place.get("outcome") != outcomes.PASSED:
        return None
    if fp.needed:
        return UNDECLARED, (
            f"the oracle passes in place (episode {fp.in_place['episode']}) but fails in the clean room "
            f"(episode {fp.clean_room['episode']}); the verifier needs what the oracle changed at "
            f"{', '.join(fp.needed)}. Declare it in task.toml: {proposal(fp.needed)}"
        )
    return UNDECLARED, (
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


__all__ = ["NOISE", "UNDECLARED", "Footprint", "candidates", "proposal", "report_finding", "settle"]
