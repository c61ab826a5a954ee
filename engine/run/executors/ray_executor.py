"""Episodes as Ray tasks on an existing Ray cluster; the head's store stays the single record.

Why this shape: an RL trainer already runs a Ray cluster, and each of its nodes can run containers on its
own Docker engine. The SQLite file lives on the head and must have one writer process tree (WAL works
only on a local filesystem, never across machines), so workers never open it:

* the head claims a row, packs the task version's files as tar bytes (once per version, shared through
  Ray's object store) and starts a *streaming generator* task;
* the worker unpacks them into a private scratch workspace (its own temporary SQLite file holding just
  this task version and this episode, under the same ids as on the head) and calls the ordinary
  ``run_episode`` against its node's Docker engine, so an episode on Ray behaves exactly like a local one
  (same tries, outcomes, recordings);
* events (``PtyOutput``, ``BuildLog``, ...) are streamed back in batches of at most ``EVENT_BATCH_S`` as
  generator items and republished on the head's bus, so live panes work for remote episodes;
* the last item carries the outcome, steps, image builds and the cast files' bytes; the head writes the
  casts, then the steps and the finished row in one transaction, runs what the application wired to an
  episode's end (its diagnosis: engine/run/hooks.py; a worker's scratch store is thrown away, so nothing
  is wired there) and only then publishes ``EpisodeFinished``.

A head killed mid-batch loses only the episodes in flight: their rows stay ``running`` and
``bandpass run --resume`` requeues them (Ray kills the dead driver's workers; each worker's detached reaper
then removes its container and scratch dir, and ``--resume`` runs a clean-up task on every live node). A
worker or node that dies costs its episode one try: the head starts a fresh task (Ray itself never retries:
the head counts tries like any infra error) and, once the tries are spent, records
``infra_error:orchestrator_failure``. Each episode row keeps the Ray node id and address of its last try.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import pickle
import queue
import threading
import time
from collections.abc import Iterator, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

from ....store.models import STEP_FIELDS
from ...core.events import EpisodeFinished, Event, EventBus
from ...tasks.artifacts import MODES
from .base import (
    EpisodeJob,
    Executor,
    ExecutorError,
    JobResult,
    RunContext,
)
from .node_cleanup import spawn_reaper
from .ray_head import RayTaskHead, check_address, lost_errors, pack_dir
from .scratch import release_scratch, scratch_workspace

log = logging.getLogger(__name__)

#: Longest a worker holds events before sending them: panes stay live, the object store sees few items.
EVENT_BATCH_S = 0.25
#: Fields of a task_version row a worker needs to run it (copied, never the head's database); a remote
#: audit carries these and more (engine/audit/remote.py).
VERSION_FIELDS = (
    "id",
    "verify_mode",  # where the audit settled its verifier runs (a service task: in place)
    "adopted_artifacts_json",  # what its oracle's footprint showed the verifier reads: carried too
    "task_id",
    "hash",
    "path",
    "instruction",
    "category",
    "difficulty",
    "tags_json",
    "metadata_json",
    "origin",
    "image_aliases_json",
)


# --- worker side (runs inside a Ray task; imports only what an episode needs) ------------------------


def _scratch_workspace(spec: dict[str, Any], task_tar: bytes) -> Any:
    """A private workspace holding just this episode's task version and row, under the head's ids, so
    ``run_episode`` runs unchanged and its relative cast paths are the head's."""
    from ....store.db import session
    from ....store.models import Episode

    ep, version = spec["episode"], spec["version"]
    ws = scratch_workspace(
        name=f"{ep['batch_id']}-e{ep['id']}",
        marker={"workspace": spec.get("head_workspace", ""), "batch": ep["batch_id"], "episode": ep["id"]},
        config_toml=spec.get("config_toml") or "",
        version=version,
        task_name=spec["task_name"],
        task_tar=task_tar,
    )
    with session(ws.engine) as s:
        s.add(
            Episode(
                id=ep["id"],
                task_version_id=version["id"],
                agent=ep["agent"],
                attempt=ep["attempt"],
                batch_id=ep["batch_id"],
                status="running",
            )
        )
    return ws


def _agent_factory(spec: dict[str, Any], ws: Any) -> Any:
    """The head's factory when it pickles (built-in agents, test agents), else the batch's agent rebuilt
    from its row and the head's bandpass.toml (policy agents hold an HTTP client, which does not)."""
    if spec.get("factory") is not None:
        return pickle.loads(spec["factory"])
    from ....store.models import Batch
    from ..agents.factory import batch_agent_factory

    factory, _close = batch_agent_factory(ws, Batch(**spec["batch"]))
    return factory


def _collect(ws: Any, episode_id: int, version_id: int) -> dict[str, Any]:
    """Everything the head must write, as plain data: the row's fields, steps, builds, cast bytes."""
    from ....store import queries
    from ....store.db import session

    with session(ws.engine) as s:
        ep = queries.get_episode(s, episode_id)
        assert ep is not None
        steps = queries.steps(s, episode_id)
        builds = queries.image_builds(s, version_id)
        tv = queries.get_version(s, version_id)
        out: dict[str, Any] = {
            "row": {
                k: getattr(ep, k)
                for k in (
                    "status",
                    "outcome",
                    "reward",
                    "error",
                    "agent_cast",
                    "verifier_cast",
                    "verifier_output",
                    "retries",
                    "evidence_json",  # attribution: who ended the sandbox
                    "verify_mode",  # clean_room | service | in_place
                )
            },
            "steps": [{k: getattr(st, k) for k in STEP_FIELDS} for st in steps],
            "builds": [{"tag": b.tag, "ok": b.ok, "log": b.log, "duration_s": b.duration_s} for b in builds],
            "image_aliases_json": tv.image_aliases_json if tv else "[]",
            # end state and phase timings (the archive travels with the recordings' files)
            "phases_json": ep.phases_json,
            "endstate": _endstate_fields(s, episode_id),
            # a multi-step task's steps (store/queries/task_steps.py), as the head stores them
            "task_steps": _task_step_fields(s, episode_id),
        }
    rec = ws.recordings_dir / f"episode-{episode_id}"
    out["files"] = {p.name: p.read_bytes() for p in sorted(rec.glob("*")) if p.is_file()}
    return out


def node_info() -> dict[str, str]:
    """The Ray node this worker runs on: id, address and host name (stored on the episode row)."""
    import ray

    try:
        node_id = ray.get_runtime_context().get_node_id() or ""
    except Exception:  # noqa: BLE001 - outside Ray (tests of the worker body): no node id
        node_id = ""
    try:  # the node's own address (its raylet's --node-ip-address, as ray.nodes() lists it), not a guess
        address = ray._private.worker.global_worker.node_ip_address
    except Exception:  # noqa: BLE001 - not a connected worker: the address seen from this host
        try:
            address = ray.util.get_node_ip_address()  # type: ignore[no-untyped-call]  # unannotated in Ray
        except Exception:  # noqa: BLE001 - no address known: left empty
            address = ""
    return {"id": node_id, "address": address, "host": os.uname().nodename, "pid": str(os.getpid())}


def _task_step_fields(s: Any, episode_id: int) -> list[dict[str, Any]]:
    from ....store.queries import task_steps as task_steps_store

    return [
        {
            "position": t.position,
            "name": t.name,
            "outcome": t.outcome,
            "reward": t.reward,
            "rewards": json.loads(t.rewards_json or "{}"),
            "detail": t.detail,
            "marker_time": t.marker_time,
            "verifier_cast": t.verifier_cast,
            "verifier_output": t.verifier_output,
            "verify_mode": t.verify_mode,
            "counted": t.counted,
            "duration_s": t.duration_s,
            "carry": json.loads(t.carry_json or "{}"),
        }
        for t in task_steps_store.task_steps(s, episode_id)
    ]


def _endstate_fields(s: Any, episode_id: int) -> dict[str, Any] | None:
    from ....store.queries import endstate as endstate_store

    row = endstate_store.get_endstate(s, episode_id)
    if row is None:
        return None
    return {
        "archive": row.archive,
        "image": row.image,
        "changes": json.loads(row.changes_json),
        "findings": json.loads(row.findings_json),
        "archived_bytes": row.archived_bytes,
        "cap_bytes": row.cap_bytes,
        "over_cap": row.over_cap,
        "capture_s": row.capture_s,
        "carry": json.loads(row.carry_json or "{}"),
    }


def run_remote_episode(spec: dict[str, Any], task_tar: bytes) -> Iterator[dict[str, Any]]:
    """The Ray task body (a generator): yields ``{"events": [...]}`` batches, then ``{"result": {...}}``.

    ``run_episode`` runs in a thread so this generator can keep streaming its events while it works.
    """
    from ...sandbox.pool import ENV as WARM_POOL_ENV
    from ..episode import run_episode

    # Each remote episode gets a scratch workspace of its own, so a warm-pool spare (keyed by workspace)
    # could never serve the next one: it would only cost a container per episode. Off in Ray workers.
    os.environ[WARM_POOL_ENV] = "0"
    events: queue.SimpleQueue[Event] = queue.SimpleQueue()
    bus = EventBus()
    bus.subscribe(Event, events.put)
    yield {"node": node_info()}  # first, so the head knows where the episode ran even if this node dies
    ws = _scratch_workspace(spec, task_tar)
    spawn_reaper(ws.root)  # removes the container and ws.root if this worker is killed mid-episode
    ep, version = spec["episode"], spec["version"]
    box: dict[str, Any] = {}

    def body() -> None:
        try:
            run_episode(
                ws,
                version["id"],
                _agent_factory(spec, ws),
                bus=bus,
                episode_id=ep["id"],
                attempt=ep["attempt"],
                batch_id=ep["batch_id"],
                max_infra_retries=spec["max_infra_retries"],
                retry_backoff_s=spec["retry_backoff_s"],
                oracle_verify_s=spec.get("oracle_verify_s"),
            )
            box["result"] = _collect(ws, ep["id"], version["id"])
        except BaseException as exc:  # noqa: BLE001 - reported to the head as data, with its type
            box["error"] = f"{type(exc).__name__}: {exc}"

    worker = threading.Thread(target=body, name=f"episode-{ep['id']}", daemon=True)
    worker.start()
    try:
        while True:
            alive = worker.is_alive()
            batch: list[Event] = []
            deadline = time.monotonic() + EVENT_BATCH_S
            while (left := deadline - time.monotonic()) > 0:
                try:
                    batch.append(events.get(timeout=left))
                except queue.Empty:
                    break
            while not alive:  # the episode is over: send everything that is left
                try:
                    batch.append(events.get_nowait())
                except queue.Empty:
                    break
            if batch:
                yield {"events": batch}
            if not alive:
                break
        if "error" in box:
            raise RuntimeError(f"episode {ep['id']} on {os.uname().nodename}: {box['error']}")
        yield {"result": box["result"]}
    finally:
        release_scratch(ws, cancelled=worker.is_alive())


# --- head side ----------------------------------------------------------------------------------------


class RayExecutor(RayTaskHead, Executor):
    """Episodes as Ray tasks; ``address`` is the cluster (``auto``, ``HOST:6379``...). When Ray is
    already initialised in this process (a trainer's driver, a test) that connection is used as is."""

    name = "ray"

    def __init__(
        self,
        concurrency: int | None = None,
        *,
        address: str | None = None,
        cpus_per_episode: float = 1.0,
        init_kwargs: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(concurrency, address=address, init_kwargs=init_kwargs)
        self.cpus_per_episode = cpus_per_episode
        self._ctx: RunContext | None = None
        self._stopping = False  # set by abandon(): a lost try is then not tried again
        self.nodes: dict[int, str] = {}  # episode id -> node that ran it (for reports and tests)
        self.node_info: dict[int, dict[str, str]] = {}  # episode id -> node of its current try

    def open(self, ctx: RunContext) -> None:
        self._ctx = ctx
        self._open_tasks(
            run_remote_episode,
            cpus=self.cpus_per_episode,
            name="bandpass-episode",
            pool=f"ray-{ctx.batch.id}",
        )

    def submit(self, job: EpisodeJob) -> Future[JobResult]:
        if self._pool is None:
            raise ExecutorError("ray executor used before open()")
        return self._pool.submit(self._drive, job)

    def _spec(self, job: EpisodeJob) -> tuple[dict[str, Any], Any]:
        """The episode as data for the worker, plus the (shared) ref of its version's tar."""
        from ....store import queries
        from ....store.db import session
        from ....store.queries import endstate as endstate_store

        ctx = self._ctx
        assert ctx is not None
        with session(ctx.ws.engine) as s:
            version = queries.get_version(s, job.version_id)
            if version is None:
                raise KeyError(f"task version {job.version_id} does not exist")
            task = queries.task_by_id(s, version.task_id)
            vrow = {k: getattr(version, k) for k in VERSION_FIELDS}
            # the oracle's verify times live in the head's store: the yardstick for a verifier timeout
            yardstick = {
                mode: max(times, default=None)
                for mode in MODES
                if (times := endstate_store.oracle_verify_seconds(s, job.version_id, mode))
            }
            ep = queries.get_episode(s, job.episode_id)
            agent = ep.agent if ep else ctx.batch.agent
        ref = self._shipped(job.version_id, ctx.ws.abs(version.path))
        try:
            factory: bytes | None = self._ray.cloudpickle.dumps(ctx.agent_factory)
        except Exception:  # noqa: BLE001 - not picklable: the worker rebuilds it from the batch row
            factory = None
        cfg = ctx.ws.config_path
        spec = {
            "episode": {
                "id": job.episode_id,
                "attempt": job.attempt,
                "batch_id": job.batch_id,
                "agent": agent,
            },
            "version": vrow,
            "head_workspace": str(ctx.ws.root),
            "task_name": task.name if task else f"task-{version.task_id}",
            "config_toml": cfg.read_text(encoding="utf-8") if cfg.is_file() else "",
            "factory": factory,
            "batch": ctx.batch.model_dump(),
            "max_infra_retries": ctx.max_infra_retries,
            "retry_backoff_s": ctx.retry_backoff_s,
            "oracle_verify_s": yardstick,
        }
        return spec, ref

    def _drive(self, job: EpisodeJob) -> JobResult:
        """Runs on a head thread: starts the task, republishes its events, writes its result.

        A try lost with its node or worker (not a failure of the episode: nothing came back) is an infra
        error like a dead container: it gets a fresh try, up to ``max_infra_retries``, and the row records
        the node of the last try and, in ``error``, the nodes that were lost."""
        ctx = self._ctx
        assert ctx is not None
        spec, tar_ref = self._spec(job)
        lost: list[str] = []
        while True:
            node: dict[str, str] = {}
            try:
                result = self._one_try(job, spec, tar_ref, node)
                break
            except lost_errors(self._ray) as exc:
                where = f"node {node.get('id', '?')} at {node.get('address', '?')}" if node else "its node"
                lost.append(f"try {len(lost) + 1} lost with {where}: {type(exc).__name__}")
                log.warning("episode %s: %s", job.episode_id, lost[-1])
                if len(lost) > ctx.max_infra_retries or self._stopping:
                    row = commit_lost(ctx.ws, job.episode_id, node, lost)
                    ctx.bus.publish(
                        EpisodeFinished(episode_id=job.episode_id, outcome=row["outcome"], reward=None)
                    )
                    return JobResult(job.episode_id, row["outcome"], None)
        result["row"]["retries"] = int(result["row"].get("retries") or 0) + len(lost)
        if lost:
            note = "; ".join(lost)
            result["row"]["error"] = f"{note}\n{result['row']['error']}".strip()
        row = commit_result(ctx.ws, job.episode_id, job.version_id, result, node=node)
        ctx.bus.publish(
            EpisodeFinished(episode_id=job.episode_id, outcome=row["outcome"], reward=row["reward"])
        )
        return JobResult(job.episode_id, row["outcome"], row["reward"])

    def _one_try(self, job: EpisodeJob, spec: dict[str, Any], tar_ref: Any, node: dict[str, str]) -> Any:
        """One Ray task for the episode; fills ``node`` as soon as the worker says where it runs."""
        ctx = self._ctx
        assert ctx is not None
        result: dict[str, Any] | None = None
        with contextlib.closing(self._items(job.episode_id, spec, tar_ref)) as items:
            for item in items:
                if "node" in item:
                    node.update(item["node"])
                    self.nodes[job.episode_id] = node.get("host", "")
                    self.node_info[job.episode_id] = dict(node)
                for ev in item.get("events", ()):
                    if not isinstance(ev, EpisodeFinished):  # published once the row is written
                        ctx.bus.publish(ev)
                if "result" in item:
                    result = item["result"]
        if result is None:
            raise RuntimeError(f"episode {job.episode_id}: the Ray task ended without a result")
        return result

    def abandon(self, episode_ids: Sequence[int]) -> None:
        """Cancels the tasks of abandoned episodes; the worker removes their containers on the way out."""
        self._stopping = True
        self._cancel(episode_ids)


def _set_node(s: Any, episode_id: int, node: dict[str, str] | None) -> None:
    from ....store import queries

    ep = queries.get_episode(s, episode_id)
    if ep is not None and node:
        ep.node_id, ep.node_address = node.get("id", ""), node.get("address", "")
        s.add(ep)


def commit_lost(ws: Any, episode_id: int, node: dict[str, str], lost: list[str]) -> dict[str, Any]:
    """Ends an episode whose every try was lost with its node: ``infra_error:orchestrator_failure``."""
    from ....store import queries
    from ....store.db import session
    from ...core import outcomes

    outcome = outcomes.infra_error("orchestrator_failure")
    with session(ws.engine) as s:
        queries.delete_steps(s, episode_id)
        queries.finish_episode(
            s, episode_id, outcome=outcome, reward=None, error="; ".join(lost), retries=len(lost) - 1
        )
        _set_node(s, episode_id, node)
    return {"outcome": outcome, "reward": None}


def commit_result(
    ws: Any, episode_id: int, version_id: int, result: dict[str, Any], node: dict[str, str] | None = None
) -> dict[str, Any]:
    """Writes a remote episode into the head's workspace: casts first (so a finished row never points at
    a missing file), then steps, builds, aliases and the finished row in one transaction."""
    from ....store import queries
    from ....store.db import session

    rec = ws.recordings_dir / f"episode-{episode_id}"
    rec.mkdir(parents=True, exist_ok=True)
    for name, data in result["files"].items():
        tmp = rec / f".{name}.part"
        tmp.write_bytes(data)
        os.replace(tmp, rec / Path(name).name)
    row: dict[str, Any] = result["row"]
    with session(ws.engine) as s:
        queries.delete_steps(s, episode_id)
        for st in result["steps"]:
            queries.add_step(s, episode_id, **st)
        for b in result["builds"]:
            queries.record_image_build(s, version_id, **b)
        aliases = json.loads(result.get("image_aliases_json") or "[]")
        if aliases:
            queries.set_version_aliases(s, version_id, [tuple(a) for a in aliases])
        queries.finish_episode(
            s,
            episode_id,
            outcome=row["outcome"],
            reward=row["reward"],
            error=row["error"],
            agent_cast=row["agent_cast"],
            verifier_cast=row["verifier_cast"],
            verifier_output=row["verifier_output"],
            retries=row["retries"],
        )
        _set_node(s, episode_id, node)
        evidence = json.loads(row.get("evidence_json") or "{}")
        queries.set_episode_evidence(s, episode_id, evidence if isinstance(evidence, dict) else {})
        from ....store.queries import endstate as endstate_store

        endstate_store.set_phases(s, episode_id, json.loads(result.get("phases_json") or "[]"))
        endstate_store.set_verify_mode(s, episode_id, row.get("verify_mode") or "")
        if result.get("endstate"):
            endstate_store.record_endstate(s, episode_id, **result["endstate"])
        from ....store.queries import task_steps as task_steps_store

        task_steps_store.record_task_steps(s, episode_id, result.get("task_steps") or [])
    from .. import hooks

    hooks.episode_ended(ws, episode_id)  # on the head, which alone holds the store (engine/run/hooks.py)
    return row


__all__ = [
    "EVENT_BATCH_S",
    "VERSION_FIELDS",
    "RayExecutor",
    "check_address",
    "commit_lost",
    "commit_result",
    "node_info",
    "pack_dir",
    "release_scratch",
    "run_remote_episode",
]
