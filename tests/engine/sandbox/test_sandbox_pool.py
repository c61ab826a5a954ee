"""The warm pool (engine/sandbox/pool.py) in real Docker: spares are pre-started, never reused, locked down
like any episode container, bounded, switchable off, and gone after ``drain``."""

from __future__ import annotations

import dataclasses
import subprocess
import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import docker
import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import NopAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox import labels as L
from bandpass.engine.sandbox import owner as owner_mod
from bandpass.engine.sandbox import pool as sandbox_pool
from bandpass.engine.sandbox.container import Sandbox, SandboxSpec, gc
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.servers.docker_proxy import DockerProxy
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_until

BASE_TAG = "bandpass/base:bookworm"


@pytest.fixture
def client() -> Iterator[docker.DockerClient]:
    c = get_client()
    sandbox_pool.drain()
    yield c
    sandbox_pool.drain()


def _ws_containers(client: docker.DockerClient, root: str) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.api.containers(
        all=True, filters={"label": [f"bandpass.workspace={root}"]}
    )
    return found


def _started_at(attrs: dict[str, Any]) -> datetime:
    return datetime.fromisoformat(attrs["Created"][:26].rstrip("Z") + "+00:00")


@pytest.mark.docker
def test_second_episode_gets_a_prestarted_never_reused_container(
    client: docker.DockerClient, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sandbox_pool.ENV, raising=False)
    assert import_paths(workspace, [make_task(tmp_path / "src", "pool-nop")]).ok
    with session(workspace.engine) as s:
        (row,) = queries.task_rows(s)
    seen: list[tuple[str, str, datetime, str | None]] = []
    real = sandbox_pool.acquire

    rooms: list[str] = []  # each episode's clean room (its verifier's fresh container), pooled too

    def spy(c: docker.DockerClient, spec: SandboxSpec) -> Sandbox:
        sb = real(c, spec)
        sb.container.reload()
        if spec.default_caps:
            rooms.append(sb.id)
        else:
            found_as = sandbox_pool.episode_of(sb.id, sb.container.name, sb.container.labels)
            seen.append((sb.id, sb.container.name, _started_at(sb.container.attrs), found_as))
        return sb

    monkeypatch.setattr(sandbox_pool, "acquire", spy)
    results = []
    hits = sandbox_pool.POOL.hits
    for i in range(3):
        if i:  # the spare the last episode started is up (on a loaded machine that can take a while)
            wait_until(sandbox_pool.POOL.settled, what="the pool's spares to finish starting")
        before = datetime.now().astimezone()
        results.append((run_episode(workspace, row.version_id, NopAgent()), before))
    assert [r.outcome for r, _ in results] == ["failed"] * 3
    assert sandbox_pool.POOL.hits - hits >= 2  # every episode but the first found a ready spare
    used = {cid for cid, _, _, _ in seen}
    assert len(used) == 3  # one fresh container per episode, never reused
    assert len(set(rooms)) == 3 and not set(rooms) & used  # and one clean room each
    for (res, before), (_cid, name, created, found_as) in list(zip(results, seen, strict=True))[1:]:
        assert created < before  # created before the episode began: it was pre-started
        assert name.lstrip("/").startswith(sandbox_pool.SPARE_PREFIX)  # never renamed
        assert found_as == str(res.episode_id)  # clean-up by episode still finds it

    spares = [
        c
        for c in _ws_containers(client, str(workspace.root))  # the last ones may still be being removed
        if c["Id"] not in used | set(rooms)
    ]
    # bounded: one spare per key (the agent's container and the clean room's)
    assert len(spares) <= 2 and all(c["Labels"].get("bandpass.pool") == "1" for c in spares)
    sandbox_pool.drain()
    assert _ws_containers(client, str(workspace.root)) == []  # spares and queued removals: all gone


@pytest.mark.docker
def test_pooled_container_keeps_the_security_defaults(
    client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sandbox_pool.ENV, raising=False)
    root = f"/pool-test/{uuid.uuid4().hex}"
    spec = SandboxSpec(image=BASE_TAG, episode=7, labels={"bandpass.workspace": root}, memory_mb=256)
    first = sandbox_pool.acquire(client, spec)
    sandbox_pool.release(first)
    hits = sandbox_pool.POOL.hits
    for _ in range(100):  # the spare starts in the background; wait for it without timing assumptions
        with sandbox_pool.POOL._lock:
            spare = next(iter(sandbox_pool.POOL._spares.values()), None)
        if spare is not None and spare.done.wait(0.1):
            break
    sb = sandbox_pool.acquire(client, spec)
    try:
        assert sandbox_pool.POOL.hits == hits + 1 and sb.id != first.id
        code, out = sb.exec("grep -E '^(Cap|NoNewPrivs)' /proc/self/status")
        fields = dict(line.split(":\t") for line in out.strip().splitlines())
        assert code == 0 and fields["CapEff"] == fields["CapBnd"] == "0000000000000000"
        assert fields["NoNewPrivs"] == "1"
        code, out = sb.exec("ls /sys/class/net")
        assert code == 0 and out.split() == ["lo"]
        host = sb.container.attrs["HostConfig"]
        assert host["NetworkMode"] == "none" and host["Init"] is True
        assert host["Memory"] == 256 * 1024 * 1024 and host["PidsLimit"] == 512
        assert sb.container.attrs["Config"]["Labels"]["bandpass"] == "1"
    finally:
        sandbox_pool.release(sb)
        sandbox_pool.drain()
    assert _ws_containers(client, root) == []
    gc(client, match={"bandpass.workspace": root})


@pytest.mark.docker
def test_pool_off_creates_no_spare_and_removes_synchronously(
    client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sandbox_pool.ENV, "0")
    root = f"/pool-test/{uuid.uuid4().hex}"
    spec = SandboxSpec(image=BASE_TAG, episode=8, labels={"bandpass.workspace": root})
    misses = sandbox_pool.POOL.misses
    sb = sandbox_pool.acquire(client, spec)
    assert [c["Id"] for c in _ws_containers(client, root)] == [sb.id]  # no spare beside it
    assert sb.container.labels.get("bandpass.episode") == "8"  # cold start keeps the episode label
    sandbox_pool.release(sb)
    assert _ws_containers(client, root) == []  # removed before release returned
    assert sandbox_pool.POOL.misses == misses  # the pool was not consulted at all


@pytest.mark.docker
def test_an_acquired_spare_keeps_its_name_no_rename_reaches_the_engine(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A running container's rename takes libnetwork's locks in the order that deadlocked Docker 20.10
    against a container's exit clean-up: the pool never asks for one (every request is seen at a proxy)."""
    monkeypatch.setenv(sandbox_pool.ENV, "1")
    root = f"/pool-test/{uuid.uuid4().hex}"
    with DockerProxy() as proxy:
        monkeypatch.setenv("DOCKER_HOST", proxy.url)
        via_proxy = get_client(reap=False)
        pool = sandbox_pool.WarmPool()
        spec = SandboxSpec(image=BASE_TAG, episode=41, labels={"bandpass.workspace": root})
        try:
            first = pool.acquire(via_proxy, spec)  # cold: carries the episode's label
            wait_until(pool.settled, what="the spare to finish starting")
            (spare,) = [c for c in _ws_containers(via_proxy, root) if c["Id"] != first.id]
            sb = pool.acquire(via_proxy, dataclasses.replace(spec, episode=42))
            assert pool.hits == 1 and sb.id == spare["Id"]
            sb.container.reload()
            assert sb.container.name == spare["Names"][0].lstrip("/")  # the spare's name, unchanged
            assert sb.container.name.startswith(sandbox_pool.SPARE_PREFIX)
            assert "bandpass.episode" not in sb.container.labels
            assert pool.served(42) == {sb.id} and pool.served(41) == {first.id}  # the record says whose
            pool.release(sb)
            pool.release(first)
            pool.drain()
            assert pool.served(42) == set() == pool.served(41)  # gone with the containers
            assert proxy.seen("POST", r"/containers/[^/]+/rename") == []
            assert _ws_containers(via_proxy, root) == []
        finally:
            pool.drain()
            gc(via_proxy, match={"bandpass.workspace": root})


def _owner_of(pid: int) -> str:
    """The ``bandpass.owner`` label a process ``pid`` of this machine would put on its containers."""
    me = owner_mod.current()
    start = owner_mod.pid_started(pid)
    assert start is not None
    return owner_mod.Owner(me.host, pid, start, me.boot, me.pidns).label()


@pytest.mark.docker
def test_resume_clean_up_finds_served_containers_and_spares_of_dead_owners_only(
    client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``remove_containers`` (resume, Ctrl-C, cancel): an episode's containers by label, by this process's
    record or by an older Bandpass's name; pool containers of owners that are gone or cannot be judged
    here; never a live process's pool container of another episode (its spare or its running episode)."""
    monkeypatch.setenv(sandbox_pool.ENV, "1")
    root = f"/pool-test/{uuid.uuid4().hex}"
    pooled = {"bandpass": "1", "bandpass.workspace": root, sandbox_pool.POOL_LABEL: "1"}
    other = subprocess.Popen(["sleep", "600"])  # another live Bandpass process, as far as labels go
    dead = subprocess.Popen(["true"])
    dead_start = owner_mod.pid_started(dead.pid)
    dead.wait()
    me = owner_mod.current()
    dead_owner = owner_mod.Owner(me.host, dead.pid, dead_start or 1, me.boot, me.pidns).label()

    def leftover(owner: str | None, name: str = "", **extra: str) -> str:
        labels = {**pooled, **extra, **({L.OWNER: owner} if owner else {})}
        name = name or f"{sandbox_pool.SPARE_PREFIX}{uuid.uuid4().hex[:12]}"
        return str(client.api.create_container(BASE_TAG, ["true"], name=name, labels=labels)["Id"])

    try:
        live_other = leftover(_owner_of(other.pid))  # served or a spare: kept either way
        dead_served = leftover(dead_owner)  # a killed runner's container, whatever it served
        unjudged = leftover(owner_mod.Owner("another-host", 1, 1, me.boot, me.pidns).label())
        legacy = leftover(
            _owner_of(other.pid), name=f"{sandbox_pool.legacy_episode_prefix(99)}{uuid.uuid4().hex[:8]}"
        )
        cold = leftover(_owner_of(other.pid), **{"bandpass.episode": "97"})
        spec = SandboxSpec(image=BASE_TAG, episode=95, labels={"bandpass.workspace": root})
        mine_cold = sandbox_pool.acquire(client, spec)
        wait_until(sandbox_pool.POOL.settled, what="this process's spare to finish starting")
        mine = sandbox_pool.acquire(client, dataclasses.replace(spec, episode=96))  # a pooled one
        assert mine.container.name.startswith(sandbox_pool.SPARE_PREFIX)
        wait_until(sandbox_pool.POOL.settled, what="this process's next spare to finish starting")

        def ids() -> set[str]:
            return {c["Id"] for c in _ws_containers(client, root)}

        everything = ids()
        assert {live_other, dead_served, unjudged, legacy, cold, mine_cold.id, mine.id} < everything
        my_spares = everything - {live_other, dead_served, unjudged, legacy, cold, mine_cold.id, mine.id}
        assert len(my_spares) == 1

        assert sandbox_pool.remove_containers(client, root, [98]) == 2  # no episode of 98: only dead ones
        assert ids() == everything - {dead_served, unjudged}
        assert sandbox_pool.remove_containers(client, root, [96]) == 1  # by this process's record
        assert mine.id not in ids() and sandbox_pool.served(96) == set()
        assert sandbox_pool.remove_containers(client, root, [99, 97, 95]) == 3  # older name, labels
        assert ids() == {live_other, *my_spares}  # the live process's and this one's spare stay
    finally:
        other.kill()
        other.wait()
        sandbox_pool.drain()
        gc(client, match={"bandpass.workspace": root})
