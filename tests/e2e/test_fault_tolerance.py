"""Fault tolerance: each fault a rollout can meet, and what Bandpass guarantees when it does.

* runner SIGKILLed mid-rollout, then ``--resume``: no attempt lost or counted twice, integrity_check ok
  (``test_rollouts.test_sigkilled_runner_resumes_without_duplicates``);
* an audit or a batch SIGKILLed mid-episode, warm pool on or off: within a minute none of its containers
  runs (``test_reaper.test_a_sigkilled_audit_or_batch_leaves_nothing_running``);
* container killed mid-episode from outside (the Docker API, ``docker kill``, ``docker stop``):
  ``infra_error:container_died``, retried
  (``test_episode.test_container_killed_mid_episode_is_infra_error_and_retried``,
  ``test_attribution.test_outside_docker_kill_stays_infra_and_is_retried``); the same death from inside the
  container is the policy's ``agent_error:sandbox_killed`` (``tests/engine/sandbox/test_attribution.py``);
* dockerd stopped mid-run: the episode in flight ends ``infra_error:daemon_unavailable``, the batch holds
  its queue and continues once the engine is back (here);
* 16 concurrent episodes while the TUI reads: no "database is locked" for writers or readers (here);
* recordings disk full: ``infra_error`` with "recordings disk full: ...", the store consistent (here);
* a cast writer killed mid-line: the reader keeps every complete event, ``truncated=True`` (here).

The first three live with the code they exercise; ``test_the_catalogue_is_complete`` keeps this table honest.
The dockerd test runs a *second*, private dockerd (its own data/exec roots and socket) so the machine's
engine, which other jobs use, is never touched; it gets a tiny image (bash and a few coreutils copied from
the host) instead of the base image, which would take ~12 s to ``docker save | load``.
"""

from __future__ import annotations

import ast
import contextlib
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.executors import LocalExecutor
from bandpass.engine.run.rollouts import BatchSummary, plan_batch, run_planned
from bandpass.engine.sandbox import pool as sandbox_pool
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.paths import REPO
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_for

TINY_IMAGE = "bandpass-test/tiny:ft"
TINY_BINARIES = (
    "/bin/bash",
    "/bin/sh",
    "/bin/sleep",
    "/bin/mkdir",
    "/bin/cat",
    "/bin/rm",
    "/bin/ls",
    "/bin/chmod",
    "/usr/bin/env",
    "/usr/bin/seq",
)


def _import(ws: Workspace, *dirs: Path) -> dict[str, int]:
    assert import_paths(ws, list(dirs)).ok
    with session(ws.engine) as s:
        return {r.name: r.version_id for r in queries.task_rows(s)}


def _integrity_ok(ws: Workspace) -> None:
    con = sqlite3.connect(ws.db_path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()


def _ws_containers(client: docker.DockerClient, ws: Workspace) -> list[Any]:
    return client.containers.list(all=True, filters={"label": [f"bandpass.workspace={ws.root}"]})


def test_the_catalogue_is_complete() -> None:
    """The faults this docstring says live elsewhere are still tests there (read, not imported: no test
    module imports another)."""
    catalogue = {
        "engine/run/test_rollouts.py": "test_sigkilled_runner_resumes_without_duplicates",
        "engine/sandbox/test_reaper.py": "test_a_sigkilled_audit_or_batch_leaves_nothing_running",
        "engine/run/test_episode.py": "test_container_killed_mid_episode_is_infra_error_and_retried",
        "engine/sandbox/test_attribution.py": "test_outside_docker_kill_stays_infra_and_is_retried",
    }
    for rel, name in catalogue.items():
        tree = ast.parse((REPO / "tests" / rel).read_text())
        tests = {n.name for n in tree.body if isinstance(n, ast.FunctionDef | ast.AsyncFunctionDef)}
        assert name in tests, f"tests/{rel} no longer holds {name}"


# --- dockerd stopped mid-run ------------------------------------------------------------------------------


class _Dockerd:
    """A private dockerd: started and stopped by the test, never the machine's engine."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.sock = root / "d.sock"
        self.url = f"unix://{self.sock}"
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self, timeout: float = 30.0) -> float:
        t0 = time.monotonic()
        log = open(self.root / "dockerd.log", "ab")  # noqa: SIM115 - handed to the child
        self.proc = subprocess.Popen(
            [
                "dockerd",
                "--data-root",
                str(self.root / "data"),
                "--exec-root",
                str(self.root / "x"),
                "--pidfile",
                str(self.root / "d.pid"),
                "-H",
                self.url,
                "--storage-driver=overlay2",
                "--iptables=false",
                "--bridge=none",
                "--shutdown-timeout=1",
            ],  # fmt: skip
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        log.close()
        while True:
            with contextlib.suppress(Exception):
                docker.DockerClient(base_url=self.url, timeout=2).ping()
                return time.monotonic() - t0
            if self.proc.poll() is not None or time.monotonic() - t0 > timeout:
                raise RuntimeError(
                    f"private dockerd did not start: {(self.root / 'dockerd.log').read_text()[-800:]}"
                )
            time.sleep(0.1)

    def stop(self) -> float:
        t0 = time.monotonic()
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(timeout=10)
        self.proc = None
        return time.monotonic() - t0


def _tiny_rootfs_tar(dest: Path) -> bytes:
    """bash, sh and the coreutils an episode uses, with their libraries: a ~5 MB image that loads in
    well under a second (tests/engine/tasks/test_images.py fakes debootstrap the same way)."""
    import io
    import tarfile

    root = dest / "rootfs"
    root.mkdir()
    for binary in TINY_BINARIES:
        libs = subprocess.run(["ldd", binary], capture_output=True, text=True).stdout.split()
        for f in [binary, *(w for w in libs if w.startswith("/"))]:
            subprocess.run(["cp", "--parents", "-L", f, str(root)], check=True)
    for d in ("tmp", "app", "etc", "root"):
        (root / d).mkdir(exist_ok=True)
    (root / "etc" / "passwd").write_text("root:x:0:0:root:/root:/bin/bash\n")
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        tar.add(str(root), arcname=".")
    shutil.rmtree(root)
    return buf.getvalue()


@pytest.fixture
def own_dockerd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[_Dockerd]:
    root = Path(f"/tmp/bpft{os.getpid()}")  # short: the socket path must stay under 108 bytes
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    d = _Dockerd(root)
    try:
        up = d.start()
        t0 = time.monotonic()
        client = docker.DockerClient(base_url=d.url, timeout=60)
        repo, tag = TINY_IMAGE.split(":")
        client.api.import_image_from_data(_tiny_rootfs_tar(tmp_path), repository=repo, tag=tag)
        client.close()
        print(f"private dockerd up in {up:.2f}s, tiny image imported in {time.monotonic() - t0:.2f}s")
        monkeypatch.setenv("DOCKER_HOST", d.url)
        yield d
    finally:
        d.stop()
        for _ in range(20):  # overlay mounts go with the daemon; then the tree can go
            try:
                shutil.rmtree(root)
                break
            except OSError:
                time.sleep(0.2)


@pytest.mark.docker
def test_dockerd_stopped_mid_run_then_back(
    own_dockerd: _Dockerd, workspace: Workspace, tmp_path: Path
) -> None:
    ws = workspace
    slow = "#!/bin/bash\nsleep 2\necho 42 > /app/answer.txt\n"
    vids = _import(
        ws,
        make_task(tmp_path / "src", "slow-tiny", dockerfile=f"FROM {TINY_IMAGE}\nWORKDIR /app\n", solve=slow),
    )
    bid = plan_batch(ws, "oracle", list(vids.values()), 3, kind="builtin")
    client = docker.DockerClient(base_url=own_dockerd.url, timeout=10)
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["summary"] = run_planned(
                ws,
                bid,
                executor=LocalExecutor(1, probe_interval_s=0.2),
                max_infra_retries=1,
                retry_backoff_s=1.0,
                daemon_wait_s=60,
            )
        except BaseException as exc:  # noqa: BLE001 - reported by the assertion below
            out["error"] = exc

    runner = threading.Thread(target=run, daemon=True)
    runner.start()
    t0 = time.monotonic()
    while True:  # an episode mid-agent: its container is up on the private engine
        assert runner.is_alive(), out
        assert time.monotonic() - t0 < 60, "no episode reached its container"
        with session(ws.engine) as s:
            running = [e.id for e in queries.episodes(s, batch_id=bid) if e.status == "running"]
        with contextlib.suppress(Exception):
            live = {
                sandbox_pool.episode_of(c.id, c.name, c.labels) for c in _ws_containers(client, ws)
            }  # pooled: by the pool's record (this process runs the batch)
            if any(str(i) in live for i in running):
                break
        time.sleep(0.05)
    stopped = own_dockerd.stop()

    t1 = time.monotonic()
    while True:  # the episode in flight ends daemon_unavailable...
        assert time.monotonic() - t1 < 60, "the episode in flight never ended"
        with session(ws.engine) as s:
            eps = queries.episodes(s, batch_id=bid)
        if any(e.status == "done" for e in eps):
            break
        time.sleep(0.1)
    down_s = time.monotonic() - t1
    time.sleep(1.5)  # ...and, while the engine is away, nothing more is claimed (the queue is not burnt)
    with session(ws.engine) as s:
        counts = queries.batch_status_counts(s, bid)
    assert counts == {"queued": 2, "running": 0, "done": 1}, counts

    restarted = own_dockerd.start()
    runner.join(timeout=90)
    assert not runner.is_alive() and "error" not in out, out
    sm: BatchSummary = out["summary"]
    assert sm.finished and sm.outcomes == {"infra_error:daemon_unavailable": 1, "passed": 2}, sm.outcomes
    with session(ws.engine) as s:
        eps = queries.episodes(s, batch_id=bid)
    assert Counter(e.attempt for e in eps) == {0: 1, 1: 1, 2: 1}
    (lost,) = [e for e in eps if e.outcome != "passed"]
    assert lost.retries == 1 and "try 0: infra_error:" in lost.error
    client = docker.DockerClient(base_url=own_dockerd.url, timeout=10)
    assert _ws_containers(client, ws) == []  # what the outage left behind was removed once it was back
    _integrity_ok(ws)
    print(f"dockerd stop {stopped:.1f}s, episode ended {down_s:.1f}s after, restart {restarted:.1f}s")


# --- 16 concurrent episodes while the TUI reads --------------------------------------------------------

READER = """
import sys, time
from pathlib import Path
from sqlalchemy.exc import OperationalError
from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries
from bandpass.store.db import session
ws = Workspace.open(sys.argv[1]); stop = Path(sys.argv[2]); deadline = time.monotonic() + 120; n = errors = 0
while not stop.exists() and time.monotonic() < deadline:
    try:
        with session(ws.engine) as s:
            queries.task_rows(s)
        n += 1
    except OperationalError as exc:
        errors += 1; print("ERR", exc, file=sys.stderr)
print(n, errors)
"""


@pytest.mark.docker
async def test_sixteen_episodes_while_the_tui_reads(workspace: Workspace, tmp_path: Path) -> None:
    from bandpass.tui import app as app_mod
    from bandpass.tui.screens import tasks as tasks_screen

    ws = workspace
    vids = _import(
        ws, *(make_task(tmp_path / "src", f"conc-{i}", instruction=f"Write 42 ({i}).") for i in range(4))
    )
    bid = plan_batch(ws, "oracle", list(vids.values()), 4, kind="builtin")
    done = threading.Event()
    out: dict[str, Any] = {}
    errors: list[str] = []
    reads = {"thread": 0, "tui": 0}

    def batch() -> None:
        try:
            out["summary"] = run_planned(ws, bid, concurrency=16)
        except BaseException as exc:  # noqa: BLE001 - a thread's failure, asserted by the test
            out["error"] = exc
        finally:
            done.set()

    def reader() -> None:
        while not done.is_set():
            try:
                with session(ws.engine) as s:
                    queries.task_rows(s)
                    queries.batch_status_counts(s, bid)
                reads["thread"] += 1
            except Exception as exc:  # noqa: BLE001 - a thread's failure, asserted by the test
                errors.append(f"thread: {exc}")

    original = tasks_screen.load_tasks

    def counted(*a: Any, **kw: Any) -> Any:
        try:
            data = original(*a, **kw)
        except Exception as exc:
            errors.append(f"tui: {exc}")
            raise
        reads["tui"] += 1
        return data

    tasks_screen.load_tasks = counted
    proc = subprocess.Popen(
        [sys.executable, "-c", READER, str(ws.root), str(tmp_path / "stop-reading")],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    threads = [threading.Thread(target=batch, daemon=True), threading.Thread(target=reader, daemon=True)]
    try:
        for t in threads:
            t.start()
        app = app_mod.BandpassApp(ws, show_path=False)
        async with app.run_test(size=(160, 48)) as pilot:
            while not done.is_set():  # reload Tasks over and over while the batch writes
                loads = reads["tui"] + len(errors)
                await pilot.press("r")

                def reloaded(loads: int = loads) -> bool:
                    return reads["tui"] + len(errors) > loads or done.is_set()

                await wait_for(pilot, reloaded)
        for t in threads:
            t.join(timeout=120)
        (tmp_path / "stop-reading").touch()
        stdout, stderr = proc.communicate(timeout=60)
    finally:
        tasks_screen.load_tasks = original
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert "error" not in out, out
    sm: BatchSummary = out["summary"]
    assert (sm.total, sm.done, sm.outcomes) == (16, 16, {"passed": 16})
    n, proc_errors = (int(x) for x in stdout.split())
    assert errors == [] and proc_errors == 0 and "locked" not in stderr, (errors, stderr[-500:])
    assert reads["thread"] > 10 and reads["tui"] > 1 and n > 10, (reads, n)
    _integrity_ok(ws)
    print(
        f"16 episodes in {sm.wall_s:.1f}s; reads: thread {reads['thread']}, tui {reads['tui']}, process {n}"
    )


# --- recordings disk full --------------------------------------------------------------------------------


@pytest.fixture
def tiny_recordings_disk(workspace: Workspace) -> Iterator[Path]:
    """A 200 KiB tmpfs as the workspace's recordings dir (we are root in CI); always unmounted."""
    target = workspace.recordings_dir
    res = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=200k", "tmpfs", str(target)], capture_output=True
    )
    if res.returncode != 0:
        pytest.fail(f"mounting a tmpfs needs root: {res.stderr.decode().strip()}")
    try:
        yield target
    finally:
        if subprocess.run(["umount", str(target)], capture_output=True).returncode != 0:
            subprocess.run(["umount", "-l", str(target)], capture_output=True)


@pytest.mark.docker
def test_recordings_disk_full_is_a_clear_infra_error(
    tiny_recordings_disk: Path, workspace: Workspace, tmp_path: Path
) -> None:
    ws = workspace
    noisy = "#!/bin/bash\nseq 1 60000\necho 42 > /app/answer.txt\n"  # ~350 KB of output: over 200 KiB
    vids = _import(ws, make_task(tmp_path / "src", "noisy", solve=noisy))
    bid = plan_batch(ws, "oracle", list(vids.values()), 2, kind="builtin")
    sm = run_planned(ws, bid, concurrency=1)
    assert sm.finished and sm.outcomes == {"infra_error:disk_full": 2}, sm.outcomes
    with session(ws.engine) as s:
        eps = queries.episodes(s, batch_id=bid)
    for e in eps:
        assert e.status == "done" and e.reward is None and e.retries == 0  # a full disk is not retried
        assert e.error.startswith("recordings disk full: ") and "No space left on device" in e.error
        assert "\n" not in e.error
        assert e.verifier_cast == ""  # the verifier never ran: its cast is not claimed
        if e.agent_cast:  # a cast that got any bytes is kept, and reads up to where the disk ended
            assert ws.abs(e.agent_cast).stat().st_size > 0
            cast = read_cast(ws.abs(e.agent_cast))
            assert cast.events
    assert any(e.agent_cast for e in eps)  # the first one recorded until the disk filled up
    _integrity_ok(ws)
    assert _ws_containers(get_client(), ws) == []


# --- cast writer killed mid-line ---------------------------------------------------------------------------

WRITER = """
import sys
from bandpass.engine.sandbox.asciicast import CastWriter
w = CastWriter(sys.argv[1], 80, 24, title="killed")
for i in range(5):
    w.output(f"line {i}\\r\\n")
w.output("x" * 1_000_000)  # one 1 MB event: the pipe holds 64 KiB, so the writer blocks mid-line
"""


def test_cast_writer_killed_mid_line_is_read_back(tmp_path: Path) -> None:
    """The writer writes into a FIFO the test drains: it is SIGKILLed while provably inside one line's
    write (blocked on a full pipe), and everything it managed to write is what a file would hold."""
    fifo = tmp_path / "agent.cast.fifo"
    os.mkfifo(fifo)
    proc = subprocess.Popen([sys.executable, "-c", WRITER, str(fifo)], cwd=REPO)
    data = b""
    try:
        with open(fifo, "rb") as r:
            while data.count(b"\n") < 6 or len(data) < 200_000:  # header + 5 events + part of the 6th
                chunk = r.read1(65536)
                assert chunk, "writer ended before it was killed"
                data += chunk
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=10)
            while chunk := r.read1(65536):  # what was already in the pipe had been written
                data += chunk
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL and not data.endswith(b"\n")
    path = tmp_path / "agent.cast"
    path.write_bytes(data)
    cast = read_cast(path)
    assert cast.truncated
    assert [e.data for e in cast.events] == [f"line {i}\r\n" for i in range(5)]
    assert cast.header["title"] == "killed"
