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

import contextlib
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
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
from tests.support.paths import REPO
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_until

SLOW_SOLVE = "#!/bin/bash\necho SLOW-START\nsleep 25\necho 42 > /app/answer.txt\n"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_bin() -> str:
    return str(Path(sys.executable).with_name("ray"))


COMMON = ["--num-cpus", "1", "--block", "--disable-usage-stats"]


class _Cluster:
    """The module's cluster: the head's GCS address, the worker raylet's process group and node id."""

    def __init__(self, port: int) -> None:
        self.address = f"127.0.0.1:{port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.worker: subprocess.Popen[bytes] | None = None
        self.worker_node = ""
        self.worker_address = ""

    def start_worker(self) -> None:
        """One more raylet joining the head; waits until the cluster has two live nodes."""
        before = set(_alive_nodes(self.address))
        self.worker = subprocess.Popen(
            [_ray_bin(), "start", "--address", self.address, "--node-ip-address", "127.0.0.1", *COMMON],
            env=ENV, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.procs.append(self.worker)
        two = lambda: n if len(n := _alive_nodes(self.address)) == 2 else {}  # noqa: E731 - a one-line wait condition
        ids = wait_until(two, 240, "two live Ray nodes")
        (self.worker_node,) = set(ids) - before
        self.worker_address = ids[self.worker_node]

    def kill_worker(self) -> None:
        """SIGKILLs the worker raylet's whole process group (``ray start``, raylet, its Ray workers)."""
        assert self.worker is not None
        os.killpg(self.worker.pid, signal.SIGKILL)
        self.worker.wait(30)

    def ensure_worker(self) -> None:
        if self.worker is None or self.worker.poll() is not None:
            self.start_worker()

    def stop(self) -> None:
        for p in reversed(self.procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)


@pytest.fixture(scope="module")
def ray_cli_cluster() -> Iterator[_Cluster]:
    """``ray start --head`` plus one worker raylet; killed by process group at the end."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="bp-ray-")
    # Ray 2.60's `ray start --head` turns token auth on: every raylet and driver (the bandpass CLI) needs
    # RAY_AUTH_MODE=token and the same token. This cluster's own token, not the user's ~/.ray/auth_token.
    token = Path(temp) / "auth_token"
    token.write_text(secrets.token_hex(32))
    ENV.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    c = _Cluster(port)
    try:
        c.procs.append(
            subprocess.Popen(
                [_ray_bin(), "start", "--head", "--port", str(port), "--temp-dir", temp,
                 "--include-dashboard", "false", "--node-ip-address", "127.0.0.1", *COMMON],
                env=ENV, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        )  # fmt: skip
        wait_until(lambda: _listening(port), 180, "the Ray head's GCS")
        c.start_worker()
        yield c
    finally:
        c.stop()


@pytest.fixture
def nodes(ray_cli_cluster: _Cluster) -> _Cluster:
    """The cluster with both raylets up (a test before may have killed the worker)."""
    ray_cli_cluster.ensure_worker()
    return ray_cli_cluster


@pytest.fixture
def cluster(nodes: _Cluster) -> str:
    """The GCS address of the two-raylet cluster."""
    return nodes.address


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _alive_nodes(address: str) -> dict[str, str]:
    """Live node id -> its address as Ray lists it (``NodeManagerAddress``)."""
    code = (
        f"import ray; ray.init(address={address!r}, log_to_driver=False); "
        "print(','.join(n['NodeID'] + '=' + n['NodeManagerAddress'] for n in ray.nodes() if n['Alive']))"
    )
    res = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120)
    lines = res.stdout.strip().splitlines()
    if res.returncode != 0 or not lines:
        return {}
    return dict(n.split("=", 1) for n in lines[-1].split(",") if "=" in n)


def _running_containers(ws: Workspace) -> list[dict[str, Any]]:
    return get_client().api.containers(filters={"label": [f"{LABEL}=1", f"{WORKSPACE}={ws.root}"]})


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
    return get_client().api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{WORKSPACE}={ws.root}"]})


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
    assert "resumed: 2 interrupted episode(s) requeued" in res.stdout
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
    nodes: _Cluster, workspace: Workspace, tmp_path: Path, infra_retries: int
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
