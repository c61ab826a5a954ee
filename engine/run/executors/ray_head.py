"""The head's side of work run as Ray streaming-generator tasks: one piece for episodes and audits.

Two executors put work on a Ray cluster: the rollout executor (ray_executor.py, a task per episode) and
the audit executor (engine/audit/executors.py, a task per task version's audit). Both reach the cluster the
same way (a TCP probe of an explicit address, then ``ray.init``; a connection this process already has is
used as is and never shut down), size their slots from the cluster's CPUs, ship each task version's files
as tar bytes put into the object store once per version, start one streaming task per unit of work and
read its items on a head thread, cancel those tasks after an abort, and have every live node remove what
a dead runner's work left. ``RayTaskHead`` is that shared part, so the two cannot drift apart; each
executor keeps only what its unit of work is (what it sends, how it reads the items, what it writes).
"""

from __future__ import annotations

import contextlib
import io
import logging
import tarfile
import threading
from collections.abc import Callable, Generator, Iterable
from pathlib import Path
from typing import Any

from .base import DaemonPool, ExecutorError
from .node_cleanup import clean_cluster

log = logging.getLogger(__name__)

__all__ = ["RayTaskHead", "check_address", "lost_errors", "pack_dir"]


def _import_ray() -> Any:
    try:
        import ray
    except ImportError:
        raise ExecutorError(
            "the ray executor needs Ray: pip install 'bandpass[cluster]' (ray>=2.9) on the head and all nodes"
        ) from None
    return ray


def pack_dir(path: Path) -> bytes:
    """The task version's files as an uncompressed tar (small: task dirs are text and a Dockerfile)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(path), arcname=".")
    return buf.getvalue()


def lost_errors(ray: Any) -> tuple[type[BaseException], ...]:
    """Ray's errors for a task lost with its worker or node (as opposed to the work's own failure, an
    episode's or an audit's): such a try gets a fresh one on a live node."""
    names = ("WorkerCrashedError", "NodeDiedError", "LocalRayletDiedError", "ObjectLostError")
    found = tuple(getattr(ray.exceptions, n) for n in names if hasattr(ray.exceptions, n))
    return found or (RuntimeError,)


def check_address(address: str | None) -> None:
    """Refuses a Ray Client address at once: the executor streams each episode's events with a streaming
    generator task, which Ray Client does not support, so ``ray://`` could only fail later."""
    if address and address.strip().lower().startswith("ray://"):
        raise ExecutorError(
            f"--ray-address {address}: Ray Client (ray://) is not supported (episodes stream their events "
            "with Ray streaming generators, which Ray Client lacks); run bandpass on a cluster node with "
            "--ray-address auto or HOST:6379"
        )


def _probe(address: str | None, timeout_s: float = 5.0) -> None:
    """A TCP connect to an explicit ``HOST:PORT`` first: ``ray.init`` retries an address where nothing
    listens for minutes, and the CLI must say at once that the cluster is not there."""
    import socket

    if not address or address == "auto" or ":" not in address:
        return
    host, _, port = address.rpartition(":")
    try:
        with socket.create_connection((host.strip("[]"), int(port)), timeout=timeout_s):
            pass
    except (OSError, ValueError) as exc:
        raise ExecutorError(
            f"cannot connect to the Ray cluster at {address}: {type(exc).__name__}: {exc}"
        ) from None


class RayTaskHead:
    """Connection, slots, shipped task files, streaming tasks in flight and their cancelling, node
    clean-up and shutdown, for an executor whose units of work are Ray streaming-generator tasks. Units
    are keyed by an int id (an episode's, an audit job's)."""

    def __init__(
        self, concurrency: int | None, *, address: str | None, init_kwargs: dict[str, Any] | None
    ) -> None:
        check_address(address)
        self.address = address
        self.init_kwargs = init_kwargs or {}
        self._concurrency = concurrency
        self._slots = max(1, concurrency or 1)
        self._pool: DaemonPool | None = None
        self._ray: Any = None
        self._owns_ray = False
        self._remote: Any = None
        self._lock = threading.Lock()
        self._tars: dict[int, Any] = {}  # version id -> ObjectRef of its tar bytes
        self._gens: dict[int, Any] = {}  # unit id -> its generator (for cancel)

    @property
    def slots(self) -> int:
        return self._slots

    def connect(self) -> None:
        """Joins the cluster (idempotent). The CLI calls it before planning, so a cluster that does not
        answer leaves nothing queued."""
        ray = self._ray = self._ray or _import_ray()
        if not ray.is_initialized():
            _probe(self.address)
            try:
                ray.init(address=self.address or "auto", **self.init_kwargs)
            except Exception as exc:  # noqa: BLE001 - ConnectionError, RuntimeError...: one line for the CLI
                first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
                raise ExecutorError(
                    f"cannot connect to the Ray cluster at {self.address or 'auto'}: {first}"
                ) from None
            self._owns_ray = True

    def cleanup_stale(self, ws: Any, batch_id: str) -> int:
        """Every live node removes this batch's containers and scratch dirs (a dead driver's leftovers)."""
        self.connect()
        reports = clean_cluster(self._ray, str(ws.root), batch_id)
        for rep in reports:
            if rep.get("error"):
                log.warning("clean-up on node %s failed: %s", rep["node_id"], rep["error"])
        return sum(int(r.get("containers", 0)) for r in reports)

    def _open_tasks(self, body: Callable[..., Any], *, cpus: float, name: str, pool: str) -> None:
        """Connects, sizes the slots (the cluster's CPUs over ``cpus`` each unless a concurrency was
        given), declares ``body`` as a streaming task Ray never retries (the head counts tries) and
        starts the head threads that drive the tasks."""
        self.connect()
        ray = self._ray
        if self._concurrency is None:
            total = float(ray.cluster_resources().get("CPU", 1))
            self._slots = max(1, int(total // max(cpus, 0.01)))
        self._remote = ray.remote(num_returns="streaming", max_retries=0)(body).options(
            num_cpus=cpus, name=name
        )
        self._pool = DaemonPool(self._slots, pool)

    def _shipped(self, version_id: int, path: Path) -> Any:
        """The object-store ref of the version's files as a tar, packed and put once per version."""
        with self._lock:
            ref = self._tars.get(version_id)
            if ref is None:
                ref = self._tars[version_id] = self._ray.put(pack_dir(path))
        return ref

    def _items(self, key: int, *args: Any) -> Generator[Any, None, None]:
        """Starts the task for unit ``key`` and yields its items as they come; the task can be
        cancelled (``_cancel``) until its last item is read. Close it (``contextlib.closing``)."""
        gen = self._remote.remote(*args)
        with self._lock:
            self._gens[key] = gen
        try:
            for ref in gen:
                yield self._ray.get(ref)
        finally:
            with self._lock:
                self._gens.pop(key, None)

    def _cancel(self, keys: Iterable[int]) -> None:
        """Best effort: cancels the tasks of these units (their workers remove what they started)."""
        with self._lock:
            gens = [self._gens.get(i) for i in keys]
        for gen in gens:
            if gen is not None:
                with contextlib.suppress(Exception):
                    self._ray.cancel(gen)

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown()
            self._pool = None
        self._tars.clear()
        if self._owns_ray and self._ray is not None:
            with contextlib.suppress(Exception):
                self._ray.shutdown()
            self._owns_ray = False
