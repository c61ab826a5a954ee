"""The episode sandbox really is locked down, and its helpers work under those locks.

Every container here carries a per-run ``bandpass.test`` label; clean-up and the final leftover check use
it, so this module never touches other people's containers on a shared engine.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest
import requests

from bandpass.engine.sandbox import lifeline
from bandpass.engine.sandbox.container import (
    EXEC_TIMEOUT_EXIT,
    Sandbox,
    SandboxError,
    SandboxSpec,
    classify_docker_error,
    gc,
)
from bandpass.engine.sandbox.docker_engine import Check, DockerUnavailable, doctor, get_client
from bandpass.engine.tasks.images import BASE_TAG

RUN_LABEL = {"bandpass.test": uuid.uuid4().hex[:12]}


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    try:
        c = get_client()
    except DockerUnavailable as exc:
        pytest.fail(f"{exc} (Docker tests never skip: scripts/test starts an engine)")
    try:
        c.images.get(BASE_TAG)
    except docker.errors.ImageNotFound:
        pytest.fail(f"{BASE_TAG} missing: run `bandpass images base`")
    yield c
    gc(c, RUN_LABEL)


def _spec(**kw: Any) -> SandboxSpec:
    kw.setdefault("image", BASE_TAG)
    kw.setdefault("labels", dict(RUN_LABEL))
    return SandboxSpec(**kw)


@pytest.fixture(scope="module")
def sb(client: docker.DockerClient) -> Iterator[Sandbox]:
    """One shared default sandbox for the read-only checks (starting one costs ~0.4 s)."""
    with Sandbox(client, _spec(memory_mb=256, pids_limit=64, cpus=0.5, episode=42)) as box:
        yield box


# ------------------------------------------------------------------------------------------ isolation


@pytest.mark.docker
def test_no_network_but_loopback(sb: Sandbox) -> None:
    code, out = sb.exec("ls /sys/class/net")
    assert code == 0 and out.split() == ["lo"]
    code, out = sb.exec("tail -n +3 /proc/net/dev")
    assert [ln.split(":")[0].strip() for ln in out.splitlines()] == ["lo"]
    assert sb.container.attrs["HostConfig"]["NetworkMode"] == "none"


@pytest.mark.docker
def test_capabilities_dropped_and_no_new_privs(sb: Sandbox) -> None:
    code, out = sb.exec("grep -E '^(Cap|NoNewPrivs)' /proc/self/status")
    fields = dict(line.split(":\t") for line in out.strip().splitlines())
    assert fields["CapEff"] == fields["CapPrm"] == fields["CapBnd"] == "0000000000000000"
    assert fields["NoNewPrivs"] == "1"
    code, out = sb.exec("chown nobody /tmp")  # root without CAP_CHOWN
    assert code != 0 and "Operation not permitted" in out


@pytest.mark.docker
def test_limits_and_labels(sb: Sandbox) -> None:
    host = sb.container.attrs["HostConfig"]
    assert host["Memory"] == 256 * 1024 * 1024
    assert host["MemorySwap"] == 256 * 1024 * 1024
    assert host["NanoCpus"] == 500_000_000
    assert host["PidsLimit"] == 64
    assert host["CapDrop"] == ["ALL"] and host["SecurityOpt"] == ["no-new-privileges"] and host["Init"]
    # The kernel's view, cgroup v1 or v2:
    _, mem = sb.exec(
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max"
    )
    _, pids = sb.exec("cat /sys/fs/cgroup/pids/pids.max 2>/dev/null || cat /sys/fs/cgroup/pids.max")
    assert mem.strip() == str(256 * 1024 * 1024)
    assert pids.strip() == "64"
    labels = sb.container.attrs["Config"]["Labels"]
    assert labels["bandpass"] == "1" and labels["bandpass.episode"] == "42"


@pytest.mark.docker
def test_init_is_pid1_and_workdir(sb: Sandbox) -> None:
    _, out = sb.exec("tr '\\0' ' ' < /proc/1/cmdline")
    assert "docker-init" in out or "tini" in out
    sb.kill_all_processes_except_init()  # learns the main command's pid on first use
    assert sb.main_pid and sb.main_pid != "1" and sb.is_running()
    assert sb.exec("pwd") == (0, "/app\n")
    assert sb.exec(["id", "-u"]) == (0, "0\n")
    assert sb.exec("id -u", user="nobody") == (0, "65534\n")


# ------------------------------------------------------------------------------------------ files and exec


@pytest.mark.docker
def test_put_get_file_round_trip(sb: Sandbox, tmp_path: Path) -> None:
    data = bytes(range(256)) * 100
    sb.put_file("/logs/verifier/deep/blob.bin", data, 0o640)
    assert sb.get_file("/logs/verifier/deep/blob.bin") == data
    assert sb.exec("stat -c '%a %U' /logs/verifier/deep/blob.bin") == (0, "640 root\n")
    assert sb.get_file("/nope/missing") is None
    assert sb.get_file("/logs/verifier") is None  # a directory is not a file

    src = tmp_path / "tests"
    (src / "sub").mkdir(parents=True)
    (src / "test.sh").write_text("#!/bin/sh\necho ok\n")
    (src / "test.sh").chmod(0o755)
    (src / "sub" / "data.txt").write_text("x")
    sb.put_dir(src, "/tests")
    assert sb.exec("/tests/test.sh") == (0, "ok\n")
    assert sb.get_file("/tests/sub/data.txt") == b"x"


@pytest.mark.docker
def test_exec_timeout_kills_the_command(sb: Sandbox) -> None:
    t0 = time.monotonic()
    code, out = sb.exec("echo started; sleep 30 & sleep 31; echo never", timeout=1)
    assert code == EXEC_TIMEOUT_EXIT and out == "started\n"
    assert time.monotonic() - t0 < 25  # ended by the timeout, not by the command's own 31 s
    _, ps = sb.exec("ps -eo args")
    assert "sleep 30\n" not in ps and "sleep 31\n" not in ps
    assert sb.exec("exit 3", timeout=5) == (3, "")


# ------------------------------------------------------------------------------------------ killing


@pytest.mark.docker
def test_kill_all_processes_except_init(client: docker.DockerClient) -> None:
    with Sandbox(client, _spec()) as box:
        box.exec("nohup sh -c 'while true; do sleep 1; done' >/dev/null 2>&1 &")
        box.exec(["sh", "-c", "(while :; do sleep 1; done) >/dev/null 2>&1 &"], user="nobody")
        before = box.list_processes()
        assert {uid for _, uid in before} == {0, 65534}
        assert box.kill_all_processes_except_init() == "kill"  # the kill path, not the restart
        assert box.list_processes() == []
        assert box.is_running()
        _, ps = box.exec("ps -eo pid,args --no-headers")
        assert "while" not in ps and "sleep 1\n" not in ps + "\n"  # (the watchdog's timers sleep longer)
        (main,) = [line for line in ps.splitlines() if line.split()[0] == box.main_pid]
        assert lifeline.SCRIPT_MOUNT in main  # the lifeline watchdog (engine/sandbox/lifeline.py) is kept


FORK_HOLDER = """
import os, time
while True:
    try:
        if os.fork() == 0:
            time.sleep(1000)
            os._exit(0)
    except OSError:
        time.sleep(0.01)
"""


@pytest.mark.docker
def test_kill_with_pid_table_held_full(client: docker.DockerClient) -> None:
    """A process that refills the pid table as fast as slots free up: exec may not even start."""
    with Sandbox(client, _spec(pids_limit=24)) as box:
        box.put_file("/app/keep.txt", b"state the verifier must see")
        box.put_file("/app/holder.py", FORK_HOLDER.encode())
        box.exec("nohup python3 /app/holder.py >/dev/null 2>&1 &")
        deadline = time.monotonic() + 30  # until the table is full (docker top reads it from the host)
        while len(box.container.top()["Processes"]) < 24:
            assert time.monotonic() < deadline, "the holder never filled the pid table"
            time.sleep(0.05)
        method = box.kill_all_processes_except_init()
        assert method in ("kill", "restart")
        assert box.is_running()
        assert box.list_processes() == []
        assert box.get_file("/app/keep.txt") == b"state the verifier must see"


@pytest.mark.docker
def test_kill_falls_back_to_restart(client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch) -> None:
    with Sandbox(client, _spec()) as box:
        box.put_file("/app/keep.txt", b"kept")
        box.exec("nohup sleep 1000 >/dev/null 2>&1 &")

        def exec_cannot_start(user: str, then: str = "") -> list[tuple[int, int]]:
            raise SandboxError("exec_failed", "OCI runtime exec failed: simulated")

        monkeypatch.setattr(box, "_kill_as", exec_cannot_start)
        assert box.kill_all_processes_except_init() == "restart"
        assert box.restarts == 1 and box.is_running()
        assert box.list_processes() == []
        assert box.get_file("/app/keep.txt") == b"kept"
        assert box.exec("pwd") == (0, "/app\n")


@pytest.mark.docker
def test_oom_is_detected(client: docker.DockerClient) -> None:
    with Sandbox(client, _spec(memory_mb=64)) as box:
        assert not box.oom_killed()
        code, _ = box.exec(["python3", "-c", "x = bytearray(512 * 1024 * 1024)"])
        assert code == 137
        assert box.oom_killed()
        assert box.is_running()


@pytest.mark.docker
def test_died_container_and_missing_image(client: docker.DockerClient) -> None:
    box = Sandbox(client, _spec())
    box.start()
    try:
        box.container.kill()
        with pytest.raises(SandboxError) as info:
            box.exec("true")
        assert info.value.code == "container_died"
        assert classify_docker_error(info.value) == "container_died"
    finally:
        box.remove()
    box.remove()  # idempotent
    assert box.status() == "removed"
    with pytest.raises(SandboxError) as info:
        Sandbox(client, _spec(image="bandpass-nonexistent/none:1")).start()
    assert info.value.code == "image_missing"


@pytest.mark.docker
def test_gc_removes_labelled_leftovers(client: docker.DockerClient) -> None:
    extra = {**RUN_LABEL, "bandpass.gc": "yes"}
    for _ in range(2):
        client.containers.create(BASE_TAG, ["sleep", "infinity"], labels={"bandpass": "1", **extra})
    assert gc(client, extra) == 2
    assert client.containers.list(all=True, filters={"label": [f"{k}={v}" for k, v in extra.items()]}) == []


# ------------------------------------------------------------------------------------------ engine helpers


def test_unreachable_engine_message(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(DockerUnavailable) as info:
        get_client()
    msg = str(info.value)
    assert "\n" not in msg
    assert msg.startswith("Docker engine not reachable at unix:///nonexistent/docker.sock: ")
    assert "scripts/ensure-docker.sh" in msg
    assert classify_docker_error(info.value) == "daemon_unavailable"
    assert doctor() == [Check("engine reachable", False, msg)]


def test_classify_docker_error() -> None:
    assert classify_docker_error(requests.exceptions.ConnectionError("refused")) == "daemon_unavailable"
    assert classify_docker_error(requests.exceptions.ReadTimeout("slow")) == "env_start_timeout"
    assert classify_docker_error(docker.errors.ImageNotFound("x")) == "image_missing"
    assert classify_docker_error(docker.errors.APIError("Container abc is not running")) == "container_died"
    assert classify_docker_error(SandboxError("oom", "x")) == "oom"
    assert classify_docker_error(ValueError("weird")) == "orchestrator_failure"


@pytest.mark.docker
def test_doctor_on_live_engine(client: docker.DockerClient) -> None:
    checks = {c.name: c for c in doctor(client)}
    assert checks["engine reachable"].ok and checks["server version"].ok
    assert checks["storage driver"].ok
    assert checks["base image"].ok


@pytest.mark.docker
def test_zz_module_leaves_no_containers(client: docker.DockerClient, sb: Sandbox) -> None:
    sb.remove()
    left = client.containers.list(all=True, filters={"label": [f"{k}={v}" for k, v in RUN_LABEL.items()]})
    assert left == []


def test_ensure_engine_does_not_start_a_daemon_for_a_remote_host(monkeypatch: pytest.MonkeyPatch) -> None:
    """With DOCKER_HOST set, starting a local dockerd would not help: the error must come straight back."""
    from bandpass.engine.sandbox.docker_engine import ensure_engine

    monkeypatch.setenv("DOCKER_HOST", "tcp://127.0.0.1:9")
    t0 = time.monotonic()
    with pytest.raises(DockerUnavailable, match="connection refused"):
        ensure_engine()
    assert time.monotonic() - t0 < 60  # straight back: no install script (up to 300 s) was run
