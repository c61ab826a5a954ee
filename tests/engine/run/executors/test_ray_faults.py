"""Ray batches leave nothing behind (issue #23): labels and per-node clean-up, a worker killed
mid-episode, connection refused before planning, no descriptor or directory leaks in workers.

Real parts only: a real local Ray instance (``ray.init``; its workers are separate processes, so killing
one is a real worker death), real containers on the Docker engine, a real SQLite file. Every test waits
for conditions with a deadline, never a fixed sleep.
"""

from __future__ import annotations

import contextlib
import gc
import json
import os
import signal
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import docker
import pytest

from bandpass.engine.core.events import Event, EventBus, PtyOutput
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.executors.node_cleanup import SCRATCH_PREFIX, clean_cluster, scratch_dirs
from bandpass.engine.run.rollouts import plan_batch, run_planned
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.sandbox.labels import BATCH, HEAD_MARKER, LABEL, SCRATCH, WORKSPACE
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.narrow import present
from tests.support.paths import REPO
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_until

BASE = "bandpass/base:bookworm"


def _containers(**labels: str) -> list[dict[str, Any]]:
    filt = [f"{LABEL}=1", *(f"{k}={v}" for k, v in labels.items())]
    found: list[dict[str, Any]] = get_client().api.containers(all=True, filters={"label": filt})
    return found


def _labelled_container(labels: dict[str, str]) -> str:
    c = get_client().containers.run(
        BASE, ["sleep", "infinity"], labels={LABEL: "1", **labels}, detach=True, network_mode="none"
    )
    return present(c.id)


def _cli(*args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )


# --- connect before planning; ray:// refused -----------------------------------------------------------


def test_ray_client_address_is_refused_at_once_and_nothing_is_queued(workspace: Workspace) -> None:
    res = _cli("-w", str(workspace.root), "run", "--agent", "oracle", "--executor", "ray",
               "--ray-address", "ray://head:10001")  # fmt: skip
    assert res.returncode != 0
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and "Ray Client (ray://) is not supported" in lines[0], res.stderr


def test_unreachable_cluster_fails_fast_and_leaves_nothing_queued(
    workspace: Workspace, tmp_path: Path
) -> None:
    assert import_paths(workspace, [make_task(tmp_path / "src", "unreached")]).ok
    res = _cli("-w", str(workspace.root), "run", "--agent", "oracle", "--executor", "ray",
               "--ray-address", "127.0.0.1:9")  # fmt: skip
    assert res.returncode != 0
    assert "cannot connect to the Ray cluster at 127.0.0.1:9" in res.stderr
    assert "nothing was queued" in res.stderr
    with session(workspace.engine) as s:
        assert queries.batches(s) == [] and queries.episodes(s) == []


# --- clean-up by label, on every node -------------------------------------------------------------------


@pytest.mark.docker
def test_cluster_cleanup_removes_only_that_batch_of_that_workspace(ray_cluster: Any, tmp_path: Path) -> None:
    ws_a, ws_b = str(tmp_path / "a"), str(tmp_path / "b")
    mine = _labelled_container({WORKSPACE: ws_a, BATCH: "b1"})
    other_batch = _labelled_container({WORKSPACE: ws_a, BATCH: "b2"})
    other_ws = _labelled_container({WORKSPACE: ws_b, BATCH: "b1"})
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}b1-e1-"))
    (scratch / HEAD_MARKER).write_text(json.dumps({"workspace": ws_a, "batch": "b1", "episode": 1}))
    try:
        reports = clean_cluster(ray_cluster, ws_a, "b1")
        assert sum(r["containers"] for r in reports) == 1 and sum(r["dirs"] for r in reports) == 1
        ids = {c["Id"] for c in _containers()}
        assert mine not in ids and {other_batch, other_ws} <= ids
        assert not scratch.exists()
    finally:
        for cid in (mine, other_batch, other_ws):
            with contextlib.suppress(docker.errors.NotFound):
                get_client().api.remove_container(cid, force=True)


@pytest.mark.docker
def test_gc_counts_per_workspace_and_keeps_a_live_one_unless_told(tmp_path: Path) -> None:
    import fcntl

    live_ws, dead_ws = tmp_path / "live", tmp_path / "dead"
    (live_ws / ".locks").mkdir(parents=True)
    lock = os.open(live_ws / ".locks" / "batch-bX.lock", os.O_RDWR | os.O_CREAT)
    fcntl.flock(lock, fcntl.LOCK_SH)  # a runner is alive in that workspace
    live = _labelled_container({WORKSPACE: str(live_ws), BATCH: "bX"})
    dead = _labelled_container({WORKSPACE: str(dead_ws), BATCH: "bY"})
    try:
        # Never a bare `gc` here: the engine is shared, other people's containers are on it.
        res = _cli("gc", "--dry-run")
        assert res.returncode == 0, res.stderr
        assert f"{dead_ws}: would remove 1 container\n" in res.stdout
        assert f"{live_ws}: kept 1 container (live: bX" in res.stdout
        assert {live, dead} <= {c["Id"] for c in _containers()}
        res = _cli("gc", "--workspace", str(dead_ws))
        assert res.returncode == 0 and "removed 1 container, " in res.stdout, res.stdout + res.stderr
        res = _cli("gc", "--batch", "bX", "--workspace", str(live_ws))
        assert res.returncode == 0 and "removed 1 container, " in res.stdout, res.stdout + res.stderr
        assert not {live, dead} & {c["Id"] for c in _containers()}
    finally:
        os.close(lock)
        for cid in (live, dead):
            with contextlib.suppress(docker.errors.NotFound):
                get_client().api.remove_container(cid, force=True)


@pytest.mark.docker
def test_reaper_removes_the_container_and_scratch_of_a_killed_worker(tmp_path: Path) -> None:
    scratch = Path(tempfile.mkdtemp(prefix=f"{SCRATCH_PREFIX}reap-"))
    cid = _labelled_container({SCRATCH: str(scratch)})
    worker = subprocess.Popen(["sleep", "600"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    reaper = subprocess.Popen(
        [sys.executable, "-m", "bandpass.engine.run.executors.node_cleanup", str(worker.pid), str(scratch)],
        env=env,
    )
    try:
        assert reaper.poll() is None and scratch.exists()  # the worker lives: nothing is touched
        worker.kill()
        worker.wait()
        wait_until(lambda: reaper.poll() is not None, 60, "the reaper to finish")
        assert not scratch.exists() and cid not in {c["Id"] for c in _containers()}
    finally:
        worker.kill()
        reaper.kill()
        with contextlib.suppress(docker.errors.NotFound):
            get_client().api.remove_container(cid, force=True)


# --- a worker lost mid-episode --------------------------------------------------------------------------

SLOW_SOLVE = "#!/bin/bash\necho SLOW-START\nsleep 20\necho 42 > /app/answer.txt\n"


@pytest.mark.docker
def test_worker_killed_mid_episode_gets_a_fresh_try_and_nothing_is_left(
    ray_cluster: Any, workspace: Workspace, tmp_path: Path
) -> None:
    from bandpass.engine.run.executors.ray_executor import RayExecutor

    ws = workspace
    assert import_paths(ws, [make_task(tmp_path / "src", "slow", solve=SLOW_SOLVE)]).ok
    with session(ws.engine) as s:
        vids = [r.version_id for r in queries.task_rows(s)]
    bid = plan_batch(ws, "oracle", vids, 1, kind="builtin")
    bus = EventBus()
    started: list[int] = []

    def on_event(ev: Event) -> None:
        if isinstance(ev, PtyOutput) and "SLOW-START" in ev.data:
            started.append(1)

    bus.subscribe(Event, on_event)
    ex = RayExecutor(1)
    killed: dict[str, str] = {}

    def kill_first_worker() -> None:
        wait_until(lambda: started, 240, "the first try to start its solution")
        node = next(iter(ex.node_info.values()))
        killed.update(node)
        os.kill(int(node["pid"]), signal.SIGKILL)

    import threading

    t = threading.Thread(target=kill_first_worker, daemon=True)
    t.start()
    sm = run_planned(ws, bid, bus=bus, executor=ex, retry_backoff_s=0)
    t.join(5)
    assert killed, "the worker was never killed"
    assert (sm.done, sm.outcomes) == (1, {"passed": 1})  # the fresh try passed: k attempts, not k-1
    with session(ws.engine) as s:
        (ep,) = queries.episodes(s, batch_id=bid)
    assert ep.retries == 1 and "try 1 lost with node" in ep.error and killed["address"] in ep.error
    assert ep.node_id == ray_cluster.get_runtime_context().get_node_id() and ep.node_address
    shown = _cli("-w", str(ws.root), "show", str(ep.id))
    assert shown.returncode == 0, shown.stderr
    assert f"ran on   ray node {ep.node_id} at {ep.node_address}" in shown.stdout
    assert "try 1 lost with node" in shown.stdout
    # The killed try's container and scratch dir are removed by its reaper; the second try's by itself.
    wait_until(lambda: not _containers(**{WORKSPACE: str(ws.root)}), 60, "no container of the workspace")
    wait_until(lambda: not scratch_dirs(str(ws.root)), 60, "no scratch dir of the workspace")


# --- no descriptor or directory leaks in workers --------------------------------------------------------


@pytest.mark.slow
def test_scratch_workspaces_leak_no_descriptors_or_dirs(tmp_path: Path) -> None:
    """A few hundred scratch workspaces, created, written, collected and released as a worker does for
    each episode: the process's open descriptors and the temp dir end where they began."""
    from bandpass.engine.run.executors.ray_executor import (
        _collect,
        _scratch_workspace,
        pack_dir,
        release_scratch,
    )

    task = make_task(tmp_path / "src", "tiny")
    tar = pack_dir(task)
    head = str(tmp_path / "head")

    def fds() -> int:
        return len(os.listdir("/proc/self/fd"))

    def one(i: int) -> None:
        spec = {
            "episode": {"id": i, "attempt": 0, "batch_id": "bleak", "agent": "oracle"},
            "version": {"id": 1, "task_id": 1, "hash": "h", "path": "tasks/tiny", "instruction": "x"},
            "task_name": "tiny",
            "config_toml": "",
            "head_workspace": head,
        }
        ws = _scratch_workspace(spec, tar)
        _collect(ws, i, 1)
        release_scratch(ws)

    one(0)  # warm-up: imports, SQLAlchemy caches
    gc.collect()
    # Cyclic GC off, as in a busy worker between collections: an engine that is not disposed keeps its
    # three descriptors (database, WAL, shm) instead of being freed by luck.
    gc.disable()
    try:
        before = fds()
        for i in range(1, 301):
            one(i)
        assert fds() == before
    finally:
        gc.enable()
    assert scratch_dirs(head) == []
