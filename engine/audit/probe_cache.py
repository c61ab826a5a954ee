"""The harness probes (``cheat:kill_sandbox``, ``cheat:memory_hog``, ``cheat:fork_bomb``) test Bandpass, not
the task: whether the sandbox attributes a policy that kills its container, eats its memory or fork-bombs
to the policy. Their outcome depends on the engine (Docker version, storage driver, cgroups, kernel), the
base image the task builds on (its shell and tools) and the task's limits — not on the task's files. So
they run once per such *setting*; the next audit with the same setting reads their outcomes from the
``probe_cache`` table (and says so: ``checks.sandbox_probes.*.cached`` names the audit that ran them).

A setting whose probes did not all end in their expected agent error is not cached: the next audit runs
them again, so a transient infrastructure error never becomes a standing answer.

Audits that run at once (``bandpass audit --concurrency``) would each miss the cache of a setting none of
them has finished: the first to ask ``claim``s the setting and runs the probes, the others wait for it
(after their own probes, so waiting costs nothing) and read its answer, as a later audit would; when its
probes were not cached, the first waiter runs them itself. So the probes still run once per setting.
"""

from __future__ import annotations

import hashlib
import json
import threading
from typing import Any

import docker

from ...store import queries
from ...store.db import session
from ..core.workspace import Workspace
from ..tasks import dockerfile as dockerfile_reader
from ..tasks.images import normalize_ref
from ..tasks.taskdir import TaskSpec

__all__ = ["PROBE_REVISION", "claim", "lookup", "release", "setting_for", "store"]

#: Bumped when the probes or the attribution they test change: every cached outcome is then stale.
PROBE_REVISION = "1"
#: The pid limit an episode gets when the task sets none (engine/run/episode.py).
DEFAULT_PIDS_LIMIT = 512


def _engine(client: docker.DockerClient) -> dict[str, Any]:
    try:
        info = client.info()
    except docker.errors.DockerException:
        info = {}
    return {
        "server": info.get("ServerVersion", ""),
        "storage_driver": info.get("Driver", ""),
        "cgroup": f"{info.get('CgroupDriver', '')}/{info.get('CgroupVersion', '')}",
        "kernel": info.get("KernelVersion", ""),
    }


def _base_image(client: docker.DockerClient, spec: TaskSpec, task_image: str, aliases: dict[str, str]) -> str:
    """The image the task's final stage starts from (through stage names and aliases), by id; the task's
    own image when that cannot be read."""
    ref = spec.docker_image
    df = spec.dockerfile
    if ref is None and df is not None:
        stages = dockerfile_reader.stages(df.read_text(encoding="utf-8", errors="replace"))
        names = {s.name.lower(): s for s in stages if s.name}
        stage = stages[-1] if stages else None
        seen = 0
        while stage is not None and stage.base.lower() in names and seen < len(stages):
            stage, seen = names[stage.base.lower()], seen + 1
        ref = stage.base if stage is not None else None
    if ref:
        normalized = {normalize_ref(k): v for k, v in aliases.items()}
        ref = normalized.get(normalize_ref(ref), ref)
        try:
            return str(client.images.get(ref).id)
        except docker.errors.DockerException:
            pass
    try:
        return str(client.images.get(task_image).id)
    except docker.errors.DockerException:
        return task_image


def setting_for(
    client: docker.DockerClient, spec: TaskSpec, task_image: str, aliases: dict[str, str], probes: list[str]
) -> tuple[str, dict[str, Any]]:
    """(cache key, setting): what the harness probes' outcome depends on."""
    setting = {
        "revision": PROBE_REVISION,
        "probes": sorted(probes),
        "engine": _engine(client),
        "base_image": _base_image(client, spec, task_image, aliases),
        "memory_mb": spec.memory_mb,
        "pids_limit": spec.pids_limit or DEFAULT_PIDS_LIMIT,
        "storage_mb": spec.storage_mb,
        "cpus": spec.cpus,
    }
    key = hashlib.sha256(json.dumps(setting, sort_keys=True).encode()).hexdigest()
    return key, setting


def lookup(ws: Workspace, key: str) -> dict[str, Any] | None:
    """The cached probe outcomes for this setting, each marked with where they came from."""
    with session(ws.engine) as s:
        row = queries.probe_cache(s, key)
        if row is None:
            return None
        version = queries.get_version(s, row.task_version_id) if row.task_version_id else None
        results = json.loads(row.results_json)
        when = row.created_at.isoformat(timespec="seconds")
    source = f"audit of {version.hash[:12]} at {when}" if version is not None else f"an audit at {when}"
    return {name: {**r, "cached": source, "setting": key[:12]} for name, r in results.items()}


def store(ws: Workspace, key: str, setting: dict[str, Any], results: dict[str, Any], version_id: int) -> bool:
    """Keeps the outcomes when every probe ended as expected; returns whether they were kept."""
    if not results or not all(r.get("ok") for r in results.values()):
        return False
    with session(ws.engine) as s:
        queries.put_probe_cache(s, key, setting=setting, results=results, version_id=version_id)
    return True


_claims: dict[tuple[str, str], threading.Event] = {}
_claims_lock = threading.Lock()


def claim(ws: Workspace, key: str) -> threading.Event | None:
    """None: this audit runs the setting's probes (call ``release`` when done); else an event set once the
    audit that runs them has stored (or failed to store) their outcomes."""
    k = (str(ws.root), key)
    with _claims_lock:
        ev = _claims.get(k)
        if ev is None or ev.is_set():
            _claims[k] = threading.Event()
            return None
        return ev


def release(ws: Workspace, key: str) -> None:
    """Ends this audit's claim on the setting: its waiters read the cache (idempotent)."""
    with _claims_lock:
        ev = _claims.pop((str(ws.root), key), None)
    if ev is not None:
        ev.set()
