"""The warm pool (engine/sandbox/pool.py) in real Docker: spares are pre-started, never reused, locked down
like any episode container, bounded, switchable off, and gone after ``drain``."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import docker
import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import NopAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox import pool as sandbox_pool
from bandpass.engine.sandbox.container import Sandbox, SandboxSpec, gc
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_until

BASE_TAG = "bandpass/base:bookworm"


@pytest.fixture
def client() -> Iterator[docker.DockerClient]:
    c = get_client()
    sandbox_pool.drain()
    yield c
    sandbox_pool.drain()


def _ws_containers(client: docker.DockerClient, root: str) -> list[dict]:
    return client.api.containers(all=True, filters={"label": [f"bandpass.workspace={root}"]})


def _started_at(attrs: dict) -> datetime:
    return datetime.fromisoformat(attrs["Created"][:26].rstrip("Z") + "+00:00")


@pytest.mark.docker
def test_second_episode_gets_a_prestarted_never_reused_container(
    client: docker.DockerClient, workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sandbox_pool.ENV, raising=False)
    assert import_paths(workspace, [make_task(tmp_path / "src", "pool-nop")]).ok
    with session(workspace.engine) as s:
        (row,) = queries.task_rows(s)
    seen: list[tuple[str, str, datetime]] = []
    real = sandbox_pool.acquire

    rooms: list[str] = []  # each episode's clean room (its verifier's fresh container), pooled too

    def spy(c: docker.DockerClient, spec: SandboxSpec) -> Sandbox:
        sb = real(c, spec)
        sb.container.reload()
        if spec.default_caps:
            rooms.append(sb.id)
        else:
            seen.append((sb.id, sb.container.name, _started_at(sb.container.attrs)))
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
    assert len({cid for cid, _, _ in seen}) == 3  # one fresh container per episode, never reused
    assert len(set(rooms)) == 3 and not set(rooms) & {cid for cid, _, _ in seen}  # and one clean room each
    for (res, before), (_cid, name, created) in list(zip(results, seen, strict=True))[1:]:
        assert created < before  # created before the episode began: it was pre-started
        assert name.startswith(sandbox_pool.episode_prefix(res.episode_id))  # clean-up finds it by name

    spares = [
        c
        for c in _ws_containers(client, str(workspace.root))  # the last one may still be being removed
        if any(n.lstrip("/").startswith(sandbox_pool.SPARE_PREFIX) for n in c["Names"])
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
def test_resume_clean_up_finds_pooled_containers_and_orphan_spares(
    client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(sandbox_pool.ENV, raising=False)
    root = f"/pool-test/{uuid.uuid4().hex}"
    labels = {"bandpass": "1", "bandpass.workspace": root, sandbox_pool.POOL_LABEL: "1"}
    orphan = client.containers.create(
        BASE_TAG,
        ["true"],
        name=f"{sandbox_pool.SPARE_PREFIX}{uuid.uuid4().hex[:12]}",
        labels={**labels, sandbox_pool.OWNER_LABEL: "elsewhere:1"},
    )
    acquired = client.containers.create(
        BASE_TAG,
        ["true"],
        name=f"{sandbox_pool.episode_prefix(99)}{uuid.uuid4().hex[:12]}",
        labels={**labels, sandbox_pool.OWNER_LABEL: "elsewhere:1"},
    )
    try:
        assert sandbox_pool.episode_of(acquired.name, acquired.labels) == "99"
        assert sandbox_pool.episode_of(orphan.name, orphan.labels) is None
        assert sandbox_pool.remove_containers(client, root, [98]) == 1  # only the other process's spare
        assert [c["Id"] for c in _ws_containers(client, root)] == [acquired.id]
        assert sandbox_pool.remove_containers(client, root, [99]) == 1  # found by its pooled name
        assert _ws_containers(client, root) == []
    finally:
        assert orphan.id
        gc(client, match={"bandpass.workspace": root})
