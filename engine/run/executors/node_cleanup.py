"""Cleaning up where the episodes ran: every node removes *its own* leftovers of one workspace or batch.

Why per node: on a Ray cluster each node runs containers on its own Docker engine, which the head cannot
reach, and keeps its scratch workspaces on its own disk. So cleanup is a task pinned to each live node
(``clean_cluster``), running ``clean_node`` there. Three moments call for it:

* ``--resume`` of a batch no runner owns any more (the driver died; its episodes' containers may be up);
* ``bandpass gc --batch B`` / ``--workspace W`` with ``--ray-address``;
* a worker process killed under a running episode (driver SIGKILLed, node's raylet killed, double
  Ctrl-C): a *reaper* process, detached from the worker when the episode starts, sees the worker gone and
  removes that episode's container and scratch directory (``spawn_reaper``/``reap``). Ray kills a dead
  driver's workers without running their ``finally`` blocks, so only something outside the worker can.

Only containers labelled with the given head workspace (and batch) are touched: never another
workspace's, never an image.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from ...sandbox import labels as L

#: Prefix of a Ray worker's scratch workspace directory (under the node's temporary directory).
SCRATCH_PREFIX = "bandpass-ray-"
#: How often a reaper checks its worker.
REAP_POLL_S = 0.5


def scratch_dirs(workspace: str, batch: str | None = None, tmp: str | None = None) -> list[Path]:
    """This node's scratch workspaces that run (ran) for ``workspace`` (and ``batch``)."""
    out = []
    for d in Path(tmp or tempfile.gettempdir()).glob(f"{SCRATCH_PREFIX}*"):
        head = L.head_of(d)
        if head.get("workspace") == workspace and (batch is None or head.get("batch") == batch):
            out.append(d)
    return out


def _match(workspace: str, batch: str | None) -> dict[str, str]:
    return {L.WORKSPACE: workspace, **({L.BATCH: batch} if batch else {})}


def labelled(client: Any, workspace: str, batch: str | None = None) -> list[dict[str, Any]]:
    """This engine's Bandpass containers of ``workspace`` (and ``batch``), stopped ones included."""
    filters = {"label": [f"{L.LABEL}=1", *(f"{k}={v}" for k, v in _match(workspace, batch).items())]}
    return list(client.api.containers(all=True, filters=filters))


def remove_labelled(match: dict[str, str], *, dry_run: bool = False) -> int:
    """Removes this node's Bandpass containers carrying every label in ``match`` (each removal retried:
    ``leftovers.remove``; ``dry_run`` only counts them); 0 without an engine."""
    from ...sandbox import leftovers
    from ...sandbox.docker_engine import get_client

    try:
        client = get_client()
    except Exception:  # noqa: BLE001 - no engine here: nothing of ours can be running on it either
        return 0
    filters = {"label": [f"{L.LABEL}=1", *(f"{k}={v}" for k, v in match.items())]}
    found = list(client.api.containers(all=True, filters=filters))
    return len(found) if dry_run else leftovers.remove(client, found)


def clean_node(workspace: str, batch: str | None = None, *, dry_run: bool = False) -> dict[str, Any]:
    """Runs on one node: removes the containers and scratch dirs of ``workspace`` (and ``batch``);
    ``dry_run`` only counts them."""
    containers = remove_labelled(_match(workspace, batch), dry_run=dry_run)
    dirs = 0
    for d in scratch_dirs(workspace, batch):
        if not dry_run:
            shutil.rmtree(d, ignore_errors=True)
        dirs += 1
    return {"host": os.uname().nodename, "containers": containers, "dirs": dirs}


def clean_cluster(ray: Any, workspace: str, batch: str | None = None) -> list[dict[str, Any]]:
    """Schedules ``clean_node`` on every live node (hard affinity) and returns each node's report."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(num_cpus=0, max_retries=0)(clean_node)
    refs = {}
    for node in ray.nodes():
        if node.get("Alive"):
            strategy = NodeAffinitySchedulingStrategy(node_id=node["NodeID"], soft=False)
            refs[node["NodeID"]] = task.options(scheduling_strategy=strategy).remote(workspace, batch)
    reports = []
    for node_id, ref in refs.items():
        try:
            rep = ray.get(ref, timeout=120)
        except Exception as exc:  # noqa: BLE001 - a node dying now has nothing left to clean
            rep = {"host": "", "containers": 0, "dirs": 0, "error": f"{type(exc).__name__}: {exc}"}
        reports.append({"node_id": node_id, **rep})
    return reports


def spawn_reaper(scratch: Path) -> None:
    """Starts a reaper for this worker process and ``scratch``, detached (double fork, new session) so
    that neither a killed worker nor Ray's clean-up of a worker's children takes it down."""
    root = str(Path(__file__).resolve().parents[3])
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))}
    cmd = [sys.executable, "-m", "bandpass.engine.run.executors.node_cleanup", str(os.getpid()), str(scratch)]
    # sh starts the reaper in the background and exits at once: the reaper is re-parented to init.
    subprocess.run(
        ["sh", "-c", '"$@" >/dev/null 2>&1 </dev/null &', "reaper", *cmd],
        env=env,
        start_new_session=True,
        check=False,
    )


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie (killed, not yet reaped by its parent) is dead for our purposes.
    with contextlib.suppress(OSError):
        if Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0] == "Z":
            return False
    return True


def reap(pid: int, scratch: Path) -> int:
    """Waits until ``scratch`` is gone (the episode cleaned up after itself) or worker ``pid`` died
    (then removes the episode's container and ``scratch``); returns containers removed."""
    while scratch.exists():
        if not _alive(pid):
            n = remove_labelled({L.SCRATCH: str(scratch)})
            shutil.rmtree(scratch, ignore_errors=True)
            return n
        time.sleep(REAP_POLL_S)
    return 0


if __name__ == "__main__":  # the reaper process (spawn_reaper)
    reap(int(sys.argv[1]), Path(sys.argv[2]))
