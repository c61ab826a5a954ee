"""A real multi-process Ray cluster started with the ``ray`` CLI (a head and one more raylet on this
machine, one CPU each): a SIGKILLed driver then ``--resume``, a double Ctrl-C, and the worker raylet
SIGKILLed mid-batch leave no container behind, end with the right outcomes and never run an attempt twice
(issue #23).

The cluster is this module's own: its own port and temp dir, both ``ray start --block`` processes in new
sessions, killed by process group (never ``ray stop``, which would stop every Ray on the machine); a test
that kills the worker raylet leaves the next test a fresh one. Ray 2.60's ``ray start --head`` turns token
authentication on, so the cluster gets its own token and every raylet and driver (the ``bandpass`` CLI)
runs with ``RAY_AUTH_MODE=token`` and ``RAY_AUTH_TOKEN_PATH`` pointing at it.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import docker
import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.sandbox.labels import LABEL, WORKSPACE
from bandpass.engine.sandbox.pool import SPARE_PREFIX
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.footprints import footprints_known
from tests.support.paths import REPO
from tests.support.ray_cluster import ENV, RayCliCluster
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_until

SLOW_SOLVE = "#!/bin/bash\necho SLOW-START\nsleep 25\necho 42 > /app/answer.txt\n"


def _running_containers(ws: Workspace) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = get_client().api.containers(
        filters={"label": [f"{LABEL}=1", f"{WORKSPACE}={ws.root}"]}
    )
    return found


def _agents_running(ws: Workspace) -> int:
    """Episodes whose agent is at work: running agent sandboxes (all capabilities dropped), not the clean
    rooms claimed beside them for their verifiers nor the warm pool's idle spares (either may or may not
    be up at the same moment, so counting every container raced)."""
    client = get_client()
    n = 0
    for info in _running_containers(ws):
        if any(name.lstrip("/").startswith(SPARE_PREFIX) for name in info.get("Names") or []):
            continue
        try:
            caps = client.api.inspect_container(info["Id"])["HostConfig"].get("CapDrop") or []
        except docker.errors.NotFound:  # removed between the listing and the look
            continue
        n += "ALL" in caps
    return n


def _all_containers(ws: Workspace) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = get_client().api.containers(
        all=True, filters={"label": [f"{LABEL}=1", f"{WORKSPACE}={ws.root}"]}
    )
    return found


def _run(ws: Workspace, address: str, *args: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), "run", *args]
    with log.open("wb") as out:
        return subprocess.Popen(
            [*cmd, "--executor", "ray", "--ray-address", address],
            cwd=REPO,
            env=ENV,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def _resume(ws: Workspace, address: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), "run", "--resume",
         "--executor", "ray", "--ray-address", address],
        cwd=REPO, env=ENV, capture_output=True, text=True, timeout=420,
    )  # fmt: skip


def _slow_workspace(ws: Workspace, tmp_path: Path) -> None:
    assert import_paths(ws, [make_task(tmp_path / "src", "slow", solve=SLOW_SOLVE)]).ok
    footprints_known(ws)  # the batch's episodes are the only ones: counted, none run twice


def _check_finished_once(ws: Workspace) -> None:
    with session(ws.engine) as s:
        eps = queries.episodes(s)
    assert Counter((e.task_version_id, e.attempt) for e in eps) == {
        (eps[0].task_version_id, a): 1 for a in (0, 1)
    }
    assert [(e.status, e.outcome) for e in eps] == [("done", "passed")] * 2, [
        (e.outcome, e.error) for e in eps
    ]
    assert all(e.node_id and e.node_address for e in eps)


@pytest.mark.docker
def test_sigkilled_driver_then_resume_leaves_nothing_and_runs_nothing_twice(
    cluster: str, workspace: Workspace, tmp_path: Path
) -> None:
    ws = workspace
    _slow_workspace(ws, tmp_path)
    driver = _run(ws, cluster, "--agent", "oracle", "--k", "2", log=tmp_path / "driver.log")
    try:
        wait_until(lambda: _agents_running(ws) == 2, 300, "both episodes' agents running")
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    finally:
        driver.kill()
    # The dead driver's containers go, on whatever node they ran: no five-minute leftovers.
    wait_until(lambda: not _all_containers(ws), 120, "the dead driver's containers removed")
    res = _resume(ws, cluster)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "resumed: 2 interrupted episodes requeued" in res.stdout
    _check_finished_once(ws)
    assert not _all_containers(ws)


@pytest.mark.docker
def test_double_ctrl_c_requeues_removes_containers_and_resume_finishes(
    cluster: str, workspace: Workspace, tmp_path: Path
) -> None:
    ws = workspace
    _slow_workspace(ws, tmp_path)
    log = tmp_path / "driver.log"
    driver = _run(ws, cluster, "--agent", "oracle", "--k", "2", log=log)
    try:
        wait_until(lambda: _agents_running(ws) == 2, 300, "both episodes' agents running")
        driver.send_signal(signal.SIGINT)
        wait_until(
            lambda: "stopping: letting running episodes finish" in log.read_text(), 60, "the first Ctrl-C"
        )
        driver.send_signal(signal.SIGINT)
        assert driver.wait(120) != 0
    finally:
        driver.kill()
    with session(ws.engine) as s:
        assert {e.status for e in queries.episodes(s)} == {"queued"}  # handed back, not half-recorded
    wait_until(lambda: not _all_containers(ws), 120, "the aborted episodes' containers removed")
    res = _resume(ws, cluster)
    assert res.returncode == 0, res.stdout + res.stderr
    _check_finished_once(ws)
    assert not _all_containers(ws)


@pytest.mark.docker
@pytest.mark.parametrize("infra_retries", [2, 0])
def test_worker_raylet_killed_mid_batch(
    nodes: RayCliCluster, workspace: Workspace, tmp_path: Path, infra_retries: int
) -> None:
    """Both episodes run at once, one per raylet; the worker raylet's process group is SIGKILLed while
    they run. The episode on it loses that try (an infra error, recorded with the dead node) and gets a
    fresh one on the head, or, with no infra retries left, ends ``infra_error:orchestrator_failure``; the
    other is untouched. No attempt runs twice, nothing is left behind."""
    ws = workspace
    _slow_workspace(ws, tmp_path)
    log = tmp_path / "driver.log"
    args = ("--agent", "oracle", "--k", "2", "--infra-retries", str(infra_retries), "--json")
    driver = _run(ws, nodes.address, *args, log=log)
    try:
        wait_until(lambda: _agents_running(ws) == 2, 300, "both episodes' agents running")
        nodes.kill_worker()
        assert driver.wait(420) == 0, log.read_text()
    finally:
        driver.kill()
    with session(ws.engine) as s:
        eps = queries.episodes(s)
    # each attempt once, each finished once
    assert sorted(e.attempt for e in eps) == [0, 1] and {e.status for e in eps} == {"done"}
    (lost,) = [e for e in eps if "lost with node" in (e.error or "")]
    (kept,) = [e for e in eps if e is not lost]
    assert (kept.outcome, kept.retries) == ("passed", 0), kept.error
    assert f"try 1 lost with node {nodes.worker_node} at {nodes.worker_address}: NodeDiedError" in lost.error
    assert kept.node_id != nodes.worker_node
    if infra_retries:  # a fresh try on the surviving head node, which passed: k attempts, not k-1
        assert (lost.outcome, lost.retries) == ("passed", 1), lost.error
        assert lost.node_id == kept.node_id
    else:  # no try left: the infra error is the outcome, with the dead node recorded
        assert (lost.outcome, lost.retries) == ("infra_error:orchestrator_failure", 0), lost.error
        assert (lost.node_id, lost.node_address) == (nodes.worker_node, nodes.worker_address)
    shown = subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), "show", str(lost.id)],
        cwd=REPO, env=ENV, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert shown.returncode == 0 and f"try 1 lost with node {nodes.worker_node}" in shown.stdout, shown
    # the dead raylet's container goes with its worker (the reaper): no leftover on the engine
    wait_until(lambda: not _all_containers(ws), 120, "the dead node's container removed")
