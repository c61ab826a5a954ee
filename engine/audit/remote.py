"""One audit on a Ray node, and what the head writes of it.

The node runs the ordinary ``audit_version`` in a private scratch workspace holding just this task version
(and the head's probe cache, so cached harness probes are skipped there too), on its own Docker engine, and
streams ``{"node"}``, then ``{"phase"}`` as the audit moves, then ``{"result"}``: the report, every episode
it ran (row, steps, phases, end state, recordings' bytes: what a remote rollout episode sends), the image
builds, the verification mode the footprint settled and the probe outcomes it newly cached.

The scratch store numbers its episodes from a large base (``ID_BASE``) no head id reaches, and the head
writes them under fresh ids of its own: every mention of a scratch id in the report, the rows and the
recordings' paths is renumbered (``renumber``), so ``bandpass show`` on the audit's episodes finds them on
the head as if the audit had run there. A worker killed mid-audit leaves nothing: its detached reaper
removes the scratch dir and every container labelled with it (engine/run/executors/node_cleanup.py).
"""

from __future__ import annotations

import json
import os
import queue
import re
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ...store.models import pk
from ..run.executors.ray_executor import VERSION_FIELDS

if TYPE_CHECKING:
    from ..core.workspace import Workspace
    from .job import AuditJobSpec

__all__ = ["ID_BASE", "commit_remote_audit", "job_spec", "node_label", "renumber", "run_remote_audit"]

#: Scratch episode ids start here (+ job id * 10,000): 13 digits, never a head id, easy to find in text.
ID_BASE = 9_000_000_000_000
#: What a remote episode carries of its task version, plus what the audit itself reads and settles: the
#: task's warnings and unsupported features, and what its footprint learnt so far (the node's audit starts
#: from it).
_VERSION_FIELDS = (*VERSION_FIELDS, "warnings_json", "unsupported_json", "footprint_json")
_ID = re.compile(r"(?<!\d)\d{13,}(?!\d)")


def node_label(node: dict[str, str]) -> str:
    return f"{node.get('host', '?')}:{node.get('id', '')[:8]}" if node else ""


def job_spec(ws: Workspace, job: AuditJobSpec, *, workers: int) -> tuple[dict[str, Any], str]:
    """The audit as data for the node, and the version's path (its files travel as a tar)."""
    from sqlmodel import select

    from ...store import queries
    from ...store.db import session
    from ...store.models import ProbeCache

    with session(ws.engine) as s:
        version = queries.get_version(s, job.version_id)
        if version is None:
            raise KeyError(f"task version {job.version_id} does not exist")
        task = queries.task_by_id(s, version.task_id)
        vrow = {k: getattr(version, k) for k in _VERSION_FIELDS}
        cache = [
            {"key": r.key, "setting_json": r.setting_json, "results_json": r.results_json}
            for r in s.exec(select(ProbeCache))
        ]
    cfg = ws.config_path
    spec = {
        "job": {"id": job.job_id, "batch_id": job.batch_id, "reruns": job.reruns, "workers": workers},
        "version": vrow,
        "task_name": task.name if task else f"task-{version.task_id}",
        "head_workspace": str(ws.root),
        "config_toml": cfg.read_text(encoding="utf-8") if cfg.is_file() else "",
        "probe_cache": cache,
    }
    return spec, version.path


# --- node side ------------------------------------------------------------------------------------------


def _scratch(spec: dict[str, Any], task_tar: bytes) -> Any:
    from ...store.db import session
    from ...store.models import Episode, ProbeCache
    from ..run.executors.scratch import scratch_workspace

    job, version = spec["job"], spec["version"]
    ws = scratch_workspace(
        name=job["batch_id"],
        marker={"workspace": spec["head_workspace"], "batch": job["batch_id"], "episode": 0},
        config_toml=spec.get("config_toml") or "",
        version=version,
        task_name=spec["task_name"],
        task_tar=task_tar,
    )
    with session(ws.engine) as s:
        # the id floor: this row (never collected) makes the audit's episodes ID_BASE + job*10k + 1...
        s.add(
            Episode(
                id=ID_BASE + int(job["id"]) * 10_000,
                task_version_id=version["id"],
                status="done",
                agent="",
                batch_id="",
            )
        )
        for row in spec.get("probe_cache", []):
            s.add(ProbeCache(**row))
    return ws


def _collect_audit(ws: Any, version_id: int, batch: str, report: dict[str, Any]) -> dict[str, Any]:
    from sqlmodel import select

    from ...store import queries
    from ...store.db import session
    from ...store.models import ProbeCache
    from ..run.executors.ray_executor import _collect

    with session(ws.engine) as s:
        eps = [
            {
                "id": pk(e),
                "agent": e.agent,
                "attempt": e.attempt,
                "started_at": e.started_at,
                "ended_at": e.ended_at,
            }
            for e in queries.episodes(s, batch_id=batch)
        ]
        builds = [
            {"tag": b.tag, "ok": b.ok, "log": b.log, "duration_s": b.duration_s}
            for b in queries.image_builds(s, version_id)
        ]
        tv = queries.get_version(s, version_id)
        mode = tv.verify_mode if tv else ""
        footprint = json.loads(tv.footprint_json or "{}") if tv else {}
        adopted = json.loads(tv.adopted_artifacts_json or "[]") if tv else []
        cached = [
            {"key": r.key, "setting": json.loads(r.setting_json), "results": json.loads(r.results_json)}
            for r in s.exec(select(ProbeCache).where(ProbeCache.task_version_id == version_id))
        ]
    episodes = []
    for e in eps:
        data = _collect(ws, int(str(e["id"])), version_id)
        data["builds"] = []  # recorded once per audit, not once per episode
        episodes.append({**e, "data": data})
    return {
        "footprint": footprint,
        "adopted": adopted,
        "report": report,
        "episodes": episodes,
        "builds": builds,
        "verify_mode": mode,
        "probe_cache": cached,
    }


def run_remote_audit(spec: dict[str, Any], task_tar: bytes) -> Iterator[dict[str, Any]]:
    """The Ray task body (a generator): ``{"node"}``, ``{"phase"}`` items, then ``{"result"}``."""
    from ..run.executors.node_cleanup import spawn_reaper
    from ..run.executors.ray_executor import node_info
    from ..run.executors.scratch import release_scratch
    from ..sandbox.pool import ENV as WARM_POOL_ENV
    from .task_audit import audit_version

    os.environ[WARM_POOL_ENV] = "0"  # a scratch workspace per audit: a spare could serve no later one
    yield {"node": node_info()}
    ws = _scratch(spec, task_tar)
    spawn_reaper(ws.root)
    job, vid = spec["job"], spec["version"]["id"]
    phases: queue.SimpleQueue[str] = queue.SimpleQueue()
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            rep = audit_version(
                ws,
                vid,
                reruns=job["reruns"],
                workers=job["workers"],
                batch=job["batch_id"],
                on_phase=phases.put,
            )
            box["result"] = _collect_audit(ws, vid, job["batch_id"], rep.as_dict())
        except BaseException as exc:  # noqa: BLE001 - reported to the head as data
            box["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=body, name=f"audit-{job['id']}", daemon=True)
    worker.start()
    try:
        while True:
            alive = worker.is_alive()
            try:
                yield {"phase": phases.get(timeout=0.25)}
                continue
            except queue.Empty:
                pass
            if not alive:
                break
        if "error" in box:
            raise RuntimeError(f"audit job {job['id']} on {os.uname().nodename}: {box['error']}")
        yield {"result": box["result"]}
    finally:
        release_scratch(ws, cancelled=worker.is_alive())


# --- head side ------------------------------------------------------------------------------------------


def renumber(value: Any, mapping: dict[int, int]) -> Any:
    """``value`` with every scratch episode id in ``mapping`` replaced by the head's: ints, and numbers
    inside strings (``episode 9000000010003``, ``recordings/episode-9000000010003/agent.cast``)."""
    if isinstance(value, bool):
        return value
    if isinstance(value, int):
        return mapping.get(value, value)
    if isinstance(value, str):
        return _ID.sub(lambda m: str(mapping.get(int(m.group()), m.group())), value)
    if isinstance(value, dict):
        return {renumber(k, mapping): renumber(v, mapping) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(renumber(v, mapping) for v in value)
    return value


def commit_remote_audit(
    ws: Workspace,
    job: AuditJobSpec,
    result: dict[str, Any],
    node: dict[str, str],
    *,
    lost: list[str] | None = None,
) -> int:
    """Writes a node's audit into the head's store (episodes under head ids, then the audit); returns
    the audit's id. ``lost``: the earlier tries lost with their nodes, recorded with the audit."""
    from ...store import queries
    from ...store.db import session
    from ...store.models import Episode
    from ...store.queries import endstate as endstate_store
    from ..run.executors.ray_executor import commit_result

    vid = job.version_id
    mapping: dict[int, int] = {}
    with session(ws.engine) as s:
        for e in result["episodes"]:
            row = queries.create_episode(s, vid, e["agent"], attempt=e["attempt"], batch_id=job.batch_id)
            mapping[e["id"]] = pk(row)
    for e in result["episodes"]:
        new = mapping[e["id"]]
        commit_result(ws, new, vid, renumber(e["data"], mapping), node=node)
        with session(ws.engine) as s:
            done = s.get(Episode, new)
            if done is not None:  # when it ran on the node (its cost), not when the head wrote it
                done.started_at, done.ended_at = e.get("started_at"), e.get("ended_at") or done.ended_at
                s.add(done)
    report = renumber(result["report"], mapping)
    with session(ws.engine) as s:
        for b in result["builds"]:
            queries.record_image_build(s, vid, **b)
        endstate_store.set_version_verify_mode(s, vid, result.get("verify_mode") or "")
        # what the node's footprint learnt (its episodes renumbered): the head's version verifies the same way
        endstate_store.set_version_footprint(
            s, vid, renumber(result.get("footprint") or {}, mapping), list(result.get("adopted") or [])
        )
        for c in result["probe_cache"]:
            queries.put_probe_cache(
                s, c["key"], setting=c["setting"], results=renumber(c["results"], mapping), version_id=vid
            )
        checks = dict(report["checks"])
        checks["node"] = node_label(node)
        if lost:
            checks["lost_tries"] = list(lost)
        audit = queries.record_audit(
            s, vid, verdict=report["verdict"], reasons=report["reasons"], details=checks
        )
        return pk(audit)
