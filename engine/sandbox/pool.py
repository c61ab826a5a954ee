"""A per-process warm pool: the next episode's container is created and started while this one runs.

Why: creating and starting a container is ~half of a nop episode's overhead, and removing it is another
slice; neither decides the outcome. So ``acquire`` hands out a spare that was started in the background
(same image, limits, labels and security defaults: it comes from the same ``Sandbox.start``), and
``release`` removes the used container on a background thread. Nothing is ever reused: a spare serves
exactly one episode, and a new spare is started for the next one.

Never renamed: a spare keeps its ``bandpass-pool-<hex>`` name for life. Renaming a *running* container
goes through libnetwork (``sandbox.Rename`` -> ``endpoint.rename``), which takes the network controller's
lock and then a network's, while a container's exit clean-up takes them the other way round; Docker 20.10
deadlocked on exactly that (every later start, remove and inspect hung until dockerd restarted). Labels
are fixed at creation and the spare's episode is not known yet, so which episode a container served is
known only to the process that handed it out: ``acquire`` records it in memory (``served``), and the record
goes once the container is removed. ``remove_containers`` (rollouts' resume and Ctrl-C clean-up, the local
executor's cancel) finds an episode's containers by the ``bandpass.episode`` label (cold starts), by that
record (this process), or by the ``bandpass-e<episode>-`` name an older Bandpass gave its claimed spares;
and it removes every pool container (``bandpass.pool=1``) whose owner (``bandpass.owner``, judged by
engine/sandbox/owner.py as the reaper does) is gone or cannot be judged here, since a spare and a served
container look alike from outside: a dead runner's are among them. A live process's, this one's included,
are never touched by that rule. ``gc`` removes all of them too (they carry ``bandpass=1`` and
``bandpass.workspace``).

Bounds: one spare per (daemon, image, limits, labels) key and at most ``MAX_SPARES`` in the process (the
oldest key is evicted). ``BANDPASS_WARM_POOL=0`` turns the pool off (cold start, synchronous removal).
``drain()`` removes the spares and waits for background removals; it runs at exit and at the end of a
batch, and a test that checks for leftover containers calls it first.

Nothing outlives the process: a spare, like every sandbox, has a lifeline (engine/sandbox/lifeline.py) and
stops when its owner is gone. Its hard lifetime is the episode's plus ``SPARE_IDLE_S``, and a spare is
handed out only while it has at least the new episode's lifetime left. A background removal that fails
(a loaded engine, an engine restarting) is retried until ``DRAIN_TIMEOUT_S``; the container has stopped
meanwhile anyway, since its lifeline is let go first.
"""

from __future__ import annotations

import atexit
import contextlib
import dataclasses
import logging
import os
import re
import threading
import time
import uuid
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import docker
import docker.errors

from . import labels as L
from . import lifeline
from . import owner as owner_mod
from .container import LABEL, Sandbox, SandboxSpec
from .removal import force_remove

log = logging.getLogger(__name__)

ENV = "BANDPASS_WARM_POOL"
MAX_SPARES = 4
POOL_LABEL = "bandpass.pool"
SPARE_PREFIX = "bandpass-pool-"
DRAIN_TIMEOUT_S = 60.0
#: How long a spare may wait for its episode: added to its hard lifetime, checked when it is claimed.
SPARE_IDLE_S = 600.0


def enabled() -> bool:
    """Read at every acquisition so a test or a user can switch it per run."""
    return os.environ.get(ENV, "1").strip() not in ("0", "false", "no", "off")


def legacy_episode_prefix(episode: str | int) -> str:
    """The name prefix an older Bandpass renamed a claimed spare to; its containers may still be about."""
    return f"bandpass-e{episode}-"


_Key = tuple[Any, ...]


class _Spare:
    """A container being started on a background thread; ``sandbox`` is set once it runs."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.sandbox: Sandbox | None = None
        self.error: BaseException | None = None


class WarmPool:
    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._spares: OrderedDict[_Key, _Spare] = OrderedDict()
        self._threads: set[threading.Thread] = set()
        #: container id -> the episode it was handed to, until the container is removed
        self._served: dict[str, str] = {}
        self.hits = 0
        self.misses = 0
        self.spares_started = 0

    # public --------------------------------------------------------------------------------------------

    def acquire(self, client: docker.DockerClient, spec: SandboxSpec) -> Sandbox:
        """A started sandbox for ``spec``: a ready spare when there is one, else a cold start.

        Either way a fresh spare for the same key is then started in the background for the next episode.
        """
        # a container joined to another's network serves only it; a task network lives as long as its
        # episode: no spare for either
        if not enabled() or spec.network_of or spec.network_name:
            return self._serve(Sandbox(client, spec).start(), spec)
        key = self._key(client, spec)
        with self._lock:
            spare = self._spares.get(key)
            if spare is not None and spare.done.is_set():
                del self._spares[key]
            else:
                spare = None  # one still starting stays in the pool for the next episode
        sandbox = self._claim(client, spare, spec) if spare is not None else None
        if sandbox is None:
            self.misses += 1
            sandbox = Sandbox(client, spec).start()
        else:
            self.hits += 1
        self._serve(sandbox, spec)
        self._refill(client, spec, key)
        return sandbox

    def served(self, episode: str | int) -> set[str]:
        """Ids of the containers this process handed to ``episode`` that are not removed yet (a pooled one
        carries neither the episode's label nor its name: this is the only place that says so)."""
        with self._lock:
            return {cid for cid, ep in self._served.items() if ep == str(episode)}

    def episode_served(self, container_id: str) -> str | None:
        """The episode this process handed ``container_id`` to; None if it did not (or it is removed)."""
        with self._lock:
            return self._served.get(container_id)

    def settled(self) -> bool:
        """True when no spare is still starting: what the next acquisition finds is what it gets (a test
        that checks an episode took a pre-started container waits for this instead of racing the refill)."""
        with self._lock:
            return all(s.done.is_set() for s in self._spares.values())

    def release(self, sandbox: Sandbox) -> None:
        """Remove the used container; in the background when the pool is on (the outcome is already
        known, and ``drain`` waits for it before the process exits). One on a task's own network goes at
        once: the network is removed right after it (engine/sandbox/services.py)."""
        if not enabled() or sandbox.spec.network_name:
            with contextlib.suppress(Exception):
                sandbox.remove()
                self.forget(sandbox.id)
            return
        self._spawn(self._remove_quietly, sandbox)

    def forget(self, container_id: str) -> None:
        """Drop a removed container from the record of what was served."""
        with self._lock:
            self._served.pop(container_id, None)

    def drain(self, timeout: float = DRAIN_TIMEOUT_S) -> None:
        """Remove every spare and wait for the background work started so far (spare starts, removals).

        One pass, bounded by ``timeout``: work another thread starts meanwhile (a concurrent batch in the
        same process) is that thread's, and a later drain or the exit hook finishes it.
        """
        deadline = time.monotonic() + timeout
        with self._lock:
            spares = list(self._spares.values())
            self._spares.clear()
            threads = list(self._threads)
        for t in threads:
            t.join(max(0.0, deadline - time.monotonic()))
        for spare in spares:
            spare.done.wait(max(0.0, deadline - time.monotonic()))
            if spare.sandbox is not None:
                self._remove_quietly(spare.sandbox)

    # internals -----------------------------------------------------------------------------------------

    @staticmethod
    def _key(client: docker.DockerClient, spec: SandboxSpec) -> _Key:
        return (
            getattr(client.api, "base_url", id(client)),
            spec.image,
            spec.cpus,
            spec.memory_mb,
            spec.pids_limit,
            spec.network,
            spec.default_caps,
            spec.workdir,
            tuple(sorted(spec.labels.items())),
            tuple(sorted(spec.env.items())),
        )

    def _serve(self, sandbox: Sandbox, spec: SandboxSpec) -> Sandbox:
        """Record which episode ``sandbox`` now serves (before anything can ask to clean it up)."""
        if spec.episode is not None:
            with self._lock:
                self._served[sandbox.id] = str(spec.episode)
        return sandbox

    def _claim(self, client: docker.DockerClient, spare: _Spare, spec: SandboxSpec) -> Sandbox | None:
        """Take a finished spare for this episode: it must still run with enough of its lifetime left. A
        spare that fails either check is removed and the caller starts cold. It is never renamed (see the
        module's docstring: a running container's rename can deadlock the engine)."""
        sb = spare.sandbox
        if sb is None:
            return None
        try:
            if sb.remaining_s() < spec.max_lifetime_s:
                raise RuntimeError(f"spare has {sb.remaining_s():.0f} s of its lifetime left")
            if not sb.is_running():
                raise RuntimeError("spare is no longer running")
        except Exception as exc:  # noqa: BLE001 - any doubt about a spare: do not use it
            log.info("warm pool: discarding spare %s: %s", sb.id[:12], exc)
            self._spawn(self._remove_quietly, sb)
            return None
        sb.client = client
        sb.spec = spec
        return sb

    def _refill(self, client: docker.DockerClient, spec: SandboxSpec, key: _Key) -> None:
        with self._lock:
            if key in self._spares:
                return
            spare = _Spare()
            self._spares[key] = spare
            evicted = []
            while len(self._spares) > MAX_SPARES:
                _, old = self._spares.popitem(last=False)
                evicted.append(old)
        spare_spec = dataclasses.replace(
            spec,
            episode=None,
            name=f"{SPARE_PREFIX}{uuid.uuid4().hex[:12]}",
            labels={**spec.labels, POOL_LABEL: "1"},
            max_lifetime_s=spec.max_lifetime_s + SPARE_IDLE_S,
        )
        self._spawn(self._start_spare, client, spare_spec, spare)
        for old in evicted:
            self._spawn(self._remove_spare, old)

    def _start_spare(self, client: docker.DockerClient, spec: SandboxSpec, spare: _Spare) -> None:
        sb = Sandbox(client, spec)
        try:
            spare.sandbox = sb.start()
            self.spares_started += 1
        except BaseException as exc:  # noqa: BLE001 - a failed spare only means a cold start later
            spare.error = exc
            log.info("warm pool: spare did not start: %s", exc)
            with self._lock:  # let the next acquisition try again instead of finding a dud
                for k, v in list(self._spares.items()):
                    if v is spare:
                        del self._spares[k]
        finally:
            spare.done.set()
        if spare.sandbox is None and sb.container is not None:
            # created, then the start failed (the engine went away, say): this thread, which ``drain``
            # waits for, retries the removal until the engine is back
            self._remove_quietly(sb)
        elif spare.sandbox is None and spec.name:
            # the create request itself failed: the engine may have made the container and gone away
            # before answering (no id came back), so it is removed by the name it was asked to take
            try:
                force_remove(client, spec.name, within_s=DRAIN_TIMEOUT_S)
            except Exception as exc:  # noqa: BLE001 - the next start's reaping removes it
                log.warning("warm pool: could not remove spare %s: %s", spec.name, exc)

    def _remove_spare(self, spare: _Spare) -> None:
        spare.done.wait(DRAIN_TIMEOUT_S)
        if spare.sandbox is not None:
            self._remove_quietly(spare.sandbox)

    def _remove_quietly(self, sandbox: Sandbox) -> None:
        """Removes, retrying for up to ``DRAIN_TIMEOUT_S`` (a removal that failed once is not left). The
        record of what it served goes only once it is removed: until then clean-up by episode finds it."""
        try:
            sandbox.remove(within_s=DRAIN_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - it has stopped; the next start's reaping removes it
            log.warning("warm pool: could not remove %s: %s", sandbox.id[:12], exc)
        else:
            self.forget(sandbox.id)

    def _spawn(self, fn: Any, *args: Any) -> None:
        def run() -> None:
            try:
                fn(*args)
            finally:
                with self._lock:
                    self._threads.discard(threading.current_thread())

        t = threading.Thread(target=run, name="bandpass-warm-pool", daemon=True)
        with self._lock:
            self._threads.add(t)
        t.start()


POOL = WarmPool()
atexit.register(POOL.drain)


def acquire(client: docker.DockerClient, spec: SandboxSpec) -> Sandbox:
    return POOL.acquire(client, spec)


def release(sandbox: Sandbox) -> None:
    POOL.release(sandbox)


def drain(timeout: float = DRAIN_TIMEOUT_S) -> None:
    POOL.drain(timeout)


def served(episode: str | int) -> set[str]:
    return POOL.served(episode)


def episode_of(container_id: str, name: str, labels: dict[str, str]) -> str | None:
    """The episode a container served: its ``bandpass.episode`` label (cold start), this process's record
    of what it handed out (a pooled container keeps its spare's name), or the id in the
    ``bandpass-e<episode>-`` name an older Bandpass renamed its claimed spares to; None otherwise (a spare,
    or another process's pooled container)."""
    if labels.get("bandpass.episode"):
        return labels["bandpass.episode"]
    ep = POOL.episode_served(container_id)
    if ep is not None:
        return ep
    m = _LEGACY_EPISODE_NAME.match(name.lstrip("/"))
    return m.group(1) if m else None


_LEGACY_EPISODE_NAME = re.compile(r"bandpass-e(\d+)-")


def remove_containers(client: docker.DockerClient, workspace: str, episode_ids: Iterable[int | str]) -> int:
    """Remove this workspace's containers that served ``episode_ids`` (``episode_of``), and the pool's
    containers whose owner is gone or cannot be judged here (a killed runner's spares and the containers
    it had handed out, which carry no episode). Never a live process's pool container, unless it served one
    of ``episode_ids``. One listing, whatever the number of episodes."""
    wanted = {str(e) for e in episode_ids}
    local = lifeline.local_engine(client)
    n = 0
    filters = {"label": [f"{LABEL}=1", f"{L.WORKSPACE}={workspace}"]}
    for c in client.api.containers(all=True, filters=filters):
        labels = c.get("Labels") or {}
        names = [str(x).lstrip("/") for x in c.get("Names") or []] or [""]
        served = {episode_of(c["Id"], x, labels) for x in names} & wanted
        if not served and labels.get(POOL_LABEL) == "1":
            state, _ = owner_mod.liveness(
                owner_mod.Owner.parse(labels.get(L.OWNER, "")),
                created=float(c.get("Created") or 0),
                local_engine=local,
            )
            if state == owner_mod.ALIVE:
                continue
        elif not served:
            continue
        try:
            n += force_remove(client, c["Id"])
            POOL.forget(c["Id"])
        except Exception as exc:  # noqa: BLE001 - the others still go; the next start reaps it
            log.warning("could not remove %s: %s", c["Id"][:12], exc)
    return n


def remove_episode_containers(workspace: str | Path, episode_ids: Sequence[int]) -> int:
    """Removes leftover containers of the given episodes of this workspace; 0 when Docker is away (no
    engine: its containers cannot be running either). Never raises: cleanup must not mask the error that
    led to it."""
    if not episode_ids:
        return 0
    try:
        from .docker_engine import get_client

        client = get_client()
        return remove_containers(client, str(workspace), episode_ids)
    except Exception as exc:  # noqa: BLE001 - best-effort cleanup: logged, never fatal
        log.warning("could not clean containers of episodes %s: %s", list(episode_ids), exc)
        return 0


__all__ = [
    "ENV",
    "POOL",
    "WarmPool",
    "acquire",
    "drain",
    "enabled",
    "release",
    "episode_of",
    "legacy_episode_prefix",
    "remove_containers",
    "remove_episode_containers",
    "served",
]
