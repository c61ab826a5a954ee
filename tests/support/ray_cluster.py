"""A real multi-process Ray cluster started with the ``ray`` CLI for tests: a head and one more raylet on
this machine, one CPU each, with its own port, temp dir and auth token.

Both ``ray start --block`` processes run in new sessions and are killed by process group (never ``ray
stop``, which would stop every Ray on the machine); a test that kills the worker raylet leaves the next
test a fresh one (``nodes``). Ray 2.60's ``ray start --head`` turns token authentication on, so every
raylet and driver (the ``bandpass`` CLI) runs with ``ENV``: ``RAY_AUTH_MODE=token`` and
``RAY_AUTH_TOKEN_PATH`` pointing at the cluster's token. A test module uses the fixtures by importing
them (``from tests.support.ray_cluster import cluster, nodes, ray_cli_cluster``).
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
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.waiting import wait_until

ENV = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(REPO)}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ray_bin() -> str:
    return str(Path(sys.executable).with_name("ray"))


COMMON = ["--num-cpus", "1", "--block", "--disable-usage-stats"]


class RayCliCluster:
    """The module's cluster: the head's GCS address, the worker raylet's process group and node id."""

    def __init__(self, port: int) -> None:
        self.address = f"127.0.0.1:{port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.worker: subprocess.Popen[bytes] | None = None
        self.worker_node = ""
        self.worker_address = ""

    def start_worker(self) -> None:
        """One more raylet joining the head; waits until the cluster has two live nodes."""
        before = set(alive_nodes(self.address))
        self.worker = subprocess.Popen(
            [_ray_bin(), "start", "--address", self.address, "--node-ip-address", "127.0.0.1", *COMMON],
            env=ENV, start_new_session=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self.procs.append(self.worker)
        two = lambda: n if len(n := alive_nodes(self.address)) == 2 else {}  # noqa: E731 - a one-line wait condition
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
def ray_cli_cluster() -> Iterator[RayCliCluster]:
    """``ray start --head`` plus one worker raylet; killed by process group at the end."""
    port = _free_port()
    temp = tempfile.mkdtemp(prefix="bp-ray-")
    # Ray 2.60's `ray start --head` turns token auth on: every raylet and driver (the bandpass CLI) needs
    # RAY_AUTH_MODE=token and the same token. This cluster's own token, not the user's ~/.ray/auth_token.
    token = Path(temp) / "auth_token"
    token.write_text(secrets.token_hex(32))
    ENV.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token))
    c = RayCliCluster(port)
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
def nodes(ray_cli_cluster: RayCliCluster) -> RayCliCluster:
    """The cluster with both raylets up (a test before may have killed the worker)."""
    ray_cli_cluster.ensure_worker()
    return ray_cli_cluster


@pytest.fixture
def cluster(nodes: RayCliCluster) -> str:
    """The GCS address of the two-raylet cluster."""
    return nodes.address


def _listening(port: int) -> bool:
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=1):
            return True
    except OSError:
        return False


def alive_nodes(address: str) -> dict[str, str]:
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
