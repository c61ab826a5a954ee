"""Executors: the queue stays on the head whatever runs the episodes; Ray runs them for real.

The Ray test starts a local Ray instance (``ray.init(num_cpus=2)``), runs a small oracle/nop batch over a
tiny task through ``RayExecutor`` and through ``bandpass run --executor ray --ray-address``, and checks
that outcomes are right, every row is written once by the head and the events came back. Ray is the
``cluster`` extra: CI installs it (see docs/design/fault-tolerance.md).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.core.events import EpisodeFinished, EpisodeStarted, Event, EventBus, PtyOutput
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.endstate import episode_changes
from bandpass.engine.run.executors import (
    EpisodeJob,
    Executor,
    ExecutorError,
    JobResult,
    RunContext,
    make_executor,
)
from bandpass.engine.run.rollouts import plan_batch, run_batch, run_planned
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import pk
from tests.support.footprints import footprints_known
from tests.support.narrow import present
from tests.support.paths import REPO
from tests.support.taskfactory import make_task


def _import(ws: Workspace, *dirs: Path) -> dict[str, int]:
    assert import_paths(ws, list(dirs)).ok
    with session(ws.engine) as s:
        return {r.name: r.version_id for r in queries.task_rows(s)}


# --- the contract, without Docker ---------------------------------------------------------------------


class _FakeExecutor(Executor):
    """Finishes rows itself (as the contract says), fails one on purpose, records its high-water mark."""

    name = "fake"

    def __init__(self, slots: int, fail: int | None = None) -> None:
        self._slots, self.fail = slots, fail
        self.ctx: RunContext | None = None
        self.flying = 0
        self.most = 0
        self.lock = threading.Lock()
        self.closed = False

    @property
    def slots(self) -> int:
        return self._slots

    def open(self, ctx: RunContext) -> None:
        self.ctx = ctx

    def _run(self, job: EpisodeJob, fut: Future[JobResult]) -> None:
        time.sleep(0.05)  # the job's own duration (jobs overlap in flight), not a wait for anything
        assert self.ctx is not None
        with self.lock:
            self.flying -= 1
        if job.episode_id == self.fail:
            fut.set_exception(RuntimeError("node lost"))
            return
        with session(self.ctx.ws.engine) as s:
            queries.finish_episode(s, job.episode_id, outcome="passed", reward=1.0)
        fut.set_result(JobResult(job.episode_id, "passed", 1.0))

    def submit(self, job: EpisodeJob) -> Future[JobResult]:
        fut: Future[JobResult] = Future()
        with self.lock:
            self.flying += 1
            self.most = max(self.most, self.flying)
        threading.Thread(target=self._run, args=(job, fut), daemon=True).start()
        return fut

    def abandon(self, episode_ids: Sequence[int]) -> None:
        pass

    def close(self) -> None:
        self.closed = True


def test_run_batch_goes_through_the_executor(workspace: Workspace, tmp_path: Path) -> None:
    vids = _import(workspace, make_task(tmp_path / "src", "t"))
    bid = plan_batch(workspace, "oracle", list(vids.values()), 7, kind="builtin")
    with session(workspace.engine) as s:
        failing = queries.episodes(s, batch_id=bid)[3].id
    ex = _FakeExecutor(3, fail=failing)
    sm = run_batch(workspace, bid, lambda: None, executor=ex)  # type: ignore[arg-type,return-value]
    assert ex.closed and ex.most == 3 and sm.executor == "fake"
    assert (sm.total, sm.done, sm.ran) == (7, 7, 7)
    assert sm.outcomes == {"passed": 6, "infra_error:orchestrator_failure": 1}
    with session(workspace.engine) as s:
        ep = queries.get_episode(s, failing)  # type: ignore[arg-type]
        assert ep is not None and ep.error == "runner: RuntimeError: node lost"


def test_unknown_executor_is_one_line() -> None:
    with pytest.raises(ExecutorError, match=r"unknown executor 'k8s' \(executors: local, ray\)"):
        make_executor("k8s")


# --- Ray, for real --------------------------------------------------------------------------------------


@pytest.mark.docker
def test_ray_executor_runs_a_batch_and_the_head_writes_it(
    ray_cluster: Any, workspace: Workspace, tmp_path: Path
) -> None:
    from bandpass.engine.run.executors.ray_executor import RayExecutor

    ws = workspace
    vids = _import(ws, make_task(tmp_path / "src", "ray-answer"))
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(Event, seen.append)
    results = {}
    for agent, k, want in (("oracle", 2, "passed"), ("nop", 1, "failed")):
        bid = plan_batch(ws, agent, list(vids.values()), k, kind="builtin")
        ex = RayExecutor(2)
        sm = run_planned(ws, bid, bus=bus, executor=ex)
        assert (sm.executor, sm.total, sm.done, sm.ran, sm.outcomes) == ("ray", k, k, k, {want: k})
        assert all(ex.nodes.values()) and len(ex.nodes) == k
        results[agent] = bid

    with session(ws.engine) as s:
        eps = queries.episodes(s)
        steps = {e.id: queries.steps(s, e.id) for e in eps}  # type: ignore[arg-type]
    assert Counter((e.batch_id, e.attempt) for e in eps) == {
        (results["oracle"], 0): 1,
        (results["oracle"], 1): 1,
        (results["nop"], 0): 1,
    }
    for e in eps:
        assert e.status == "done" and e.retries == 0 and "infra" not in e.error
        cast = read_cast(ws.abs(e.agent_cast))  # the head holds the worker's recordings
        assert not cast.truncated and f"episode {e.id}" in cast.header.get("title", "")
        assert read_cast(ws.abs(e.verifier_cast)).events
        changes = episode_changes(ws, pk(e))  # the end state and phase timings came back too
        assert changes["captured"] and changes["phases"][-1]["name"] == "finalise"
        if e.agent == "oracle":
            assert "/app/answer.txt" in {c["path"] for c in changes["changes"]}
            assert [st.index for st in steps[e.id]] == [0]  # written once, by the head
            assert "__BANDPASS_SOLUTION__" in steps[e.id][0].action_json
            assert "42" in cast.output()
        else:
            assert steps[e.id] == []
    # Events streamed back: every episode started, printed to its pty, and finished exactly once.
    ids = {pk(e) for e in eps}
    assert {ev.episode_id for ev in seen if isinstance(ev, EpisodeStarted)} == ids
    assert {ev.episode_id for ev in seen if isinstance(ev, PtyOutput)} == ids
    finished = [present(ev.episode_id) for ev in seen if isinstance(ev, EpisodeFinished)]
    assert sorted(finished) == sorted(ids)


@pytest.mark.docker
def test_cli_runs_a_batch_on_a_ray_cluster(ray_cluster: Any, workspace: Workspace, tmp_path: Path) -> None:
    ws = workspace
    vids = _import(ws, make_task(tmp_path / "src", "ray-cli"))
    footprints_known(ws)  # every episode in the store is the batch's
    address = ray_cluster.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    cmd = [
        sys.executable,
        "-m",
        "bandpass.tui.cli",
        "-w",
        str(ws.root),
        "run",
        "--agent",
        "oracle",
        "--k",
        "2",
    ]
    res = subprocess.run(
        [*cmd, "--executor", "ray", "--ray-address", address, "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    sm = json.loads(res.stdout.strip().splitlines()[-1])
    assert (sm["executor"], sm["done"], sm["outcomes"]) == ("ray", 2, {"passed": 2})
    with session(ws.engine) as s:
        eps = queries.episodes(s)
    assert sorted((e.task_version_id, e.attempt) for e in eps) == [
        (v, a) for v in vids.values() for a in (0, 1)
    ]

    bad = subprocess.run(
        [*cmd, "--ray-address", address], cwd=REPO, env=env, capture_output=True, text=True, timeout=60
    )
    assert bad.returncode != 0 and "--ray-address goes with --executor ray" in bad.stderr
