"""A real multi-process Ray cluster started with the ``ray`` CLI (a head and one more raylet on this
machine, one CPU each): a SIGKILLed driver then ``--resume``, and a double Ctrl-C, leave no container
behind, end with the right outcomes and never run an attempt twice (issue #23).

The cluster is this module's own: its own port and temp dir, both ``ray start --block`` processes in new
sessions, killed by process group at teardown (never ``ray stop``, which would stop every Ray on the
machine). Ray 2.60 starts without token authentication unless ``RAY_AUTH_MODE=token``; these tests use
the default, so the CLI needs no token.
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
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from engine.core.workspace import Workspace
from engine.sandbox.docker_engine import get_client
from engine.sandbox.labels import LABEL, WORKSPACE
from engine.tasks.importer import import_paths
from store import queries
from store.db import session
from tests.conftest import REPO
from tests.taskfactory import make_task

SLOW_SOLVE = "#!/bin/bash\necho SLOW-START\nsleep 25\necho 42 > /app/answer.txt\n"
ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO)}


def _wait(cond: Callable[[], Any], timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if value := cond():
            return value
        time.sleep(0.5)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_bin() -> str:
    return str(Path(sys.executable).with_name("ray"))


@pytest.fixture(scope="module")
def cluster() -> Iterator[str]:
    """``ray start --head`` plus one worker raylet; yields the GCS address; killed by process group."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="bp-ray-")
    # Ray 2.60's `ray start --head` turns token auth on: every raylet and driver (the bandpass CLI) needs
    # RAY_AUTH_MODE=token and the same token. This cluster's own token, not the user's ~/.ray/auth_token.
    token = Path(temp) / "auth_token"
    token.write_text(secrets.token_hex(32))
    ENV.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    address = f"127.0.0.1:{port}"
    procs: list[subprocess.Popen[bytes]] = []
    common = ["--num-cpus", "1", "--block", "--disable-usage-stats"]
    try:
        procs.append(
            subprocess.Popen(
                [_ray_bin(), "start", "--head", "--port", str(port), "--temp-dir", temp,
                 "--include-dashboard", "false", "--node-ip-address", "127.0.0.1", *common],
                env=ENV, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        )  # fmt: skip
        _wait(lambda: _listening(port), 180, "the Ray head's GCS")
        procs.append(
            subprocess.Popen(
                [_ray_bin(), "start", "--address", address, "--node-ip-address", "127.0.0.1", *common],
                env=ENV, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
        )  # fmt: skip
        _wait(lambda: _alive_nodes(address) == 2, 240, "two live Ray nodes")
        yield address
    finally:
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def _alive_nodes(address: str) -> int:
    code = f"import ray; ray.init(address={address!r}, log_to_driver=False); print(sum(n['Alive'] for n in ray.nodes()))"  # noqa: E501
    res = subprocess.run([sys.executable, "-c", code], env=ENV, capture_output=True, text=True, timeout=120)
    try:
        return int(res.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        return 0


def _running_containers(ws: Workspace) -> list[dict[str, Any]]:
    return get_client().api.containers(filters={"label": [f"{LABEL}=1", f"{WORKSPACE}={ws.root}"]})


def _all_containers(ws: Workspace) -> list[dict[str, Any]]:
    return get_client().api.containers(all=True, filters={"label": [f"{LABEL}=1", f"{WORKSPACE}={ws.root}"]})


def _run(ws: Workspace, address: str, *args: str, log: Path) -> subprocess.Popen[bytes]:
    cmd = [sys.executable, "-m", "tui.cli", "-w", str(ws.root), "run", *args]
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
        [sys.executable, "-m", "tui.cli", "-w", str(ws.root), "run", "--resume",
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
        _wait(lambda: len(_running_containers(ws)) == 2, 300, "both episodes' containers running")
        driver.send_signal(signal.SIGKILL)
        driver.wait(30)
    finally:
        driver.kill()
    # The dead driver's containers go, on whatever node they ran: no five-minute leftovers.
    _wait(lambda: not _all_containers(ws), 120, "the dead driver's containers removed")
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
        _wait(lambda: len(_running_containers(ws)) == 2, 300, "both episodes' containers running")
        driver.send_signal(signal.SIGINT)
        _wait(lambda: "stopping: letting running episodes finish" in log.read_text(), 60, "the first Ctrl-C")
        driver.send_signal(signal.SIGINT)
        assert driver.wait(120) != 0
    finally:
        driver.kill()
    with session(ws.engine) as s:
        assert {e.status for e in queries.episodes(s)} == {"queued"}  # handed back, not half-recorded
    _wait(lambda: not _all_containers(ws), 120, "the aborted episodes' containers removed")
    res = _resume(ws, cluster)
    assert res.returncode == 0, res.stdout + res.stderr
    _check_finished_once(ws)
    assert not _all_containers(ws)
