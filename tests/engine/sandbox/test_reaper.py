"""Nothing left running: no container outlives the Bandpass process that made it (issue 34).

* bounded by construction: a container's lifeline (engine/sandbox/lifeline.py) ends it when its owner is
  SIGKILLed, when the owner lets go, when its hard lifetime runs out (not extended by a restart), and when
  it is started again after its owner died; the policy, root inside, can neither hold nor forge it;
* reaped on start: the next Bandpass command removes containers whose owner is gone, in every workspace,
  and says so; a reused pid is not mistaken for the owner; ``bandpass gc --dry-run`` lists what a start
  would reap and removes nothing; a failed removal is retried (pool and reaping), through a real
  fault-injecting proxy in front of the real engine (tests/support/servers/docker_proxy.py);
* SIGKILLed audits and batches, with the warm pool on and off: within a minute none of their containers
  runs;
* the fork-bomb probe's container is gone within its phase timeout under a CPU load generator.

Containers here carry a per-run ``bandpass.test`` label or a per-test workspace label; nothing else on
the shared engine is touched. The pytest process itself does not reap (``BANDPASS_REAP_ON_START=0``):
each test decides which process reaps.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import ForkBombCheat
from bandpass.engine.run.episode import CAPTURE_TIMEOUT_S, run_episode
from bandpass.engine.sandbox import guardian, hostview, leftovers, lifeline
from bandpass.engine.sandbox import labels as L
from bandpass.engine.sandbox import owner as owner_mod
from bandpass.engine.sandbox import pool as sandbox_pool
from bandpass.engine.sandbox.container import Sandbox, SandboxSpec, gc
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.images import BASE_TAG
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.tui.app import BandpassApp
from tests.support.paths import REPO
from tests.support.servers.docker_proxy import DockerProxy
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_for, wait_until

RUN_LABEL = {"bandpass.test": f"reaper-{uuid.uuid4().hex[:10]}"}
#: The issue's bound: no container outlives its owner by more than this.
OUTLIVE_S = 60.0
#: States in which a container still holds what it ran (``docker ps`` lists both).
UP = ("running", "paused")


@pytest.fixture(autouse=True)
def _no_reaping_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(leftovers.ENV, "0")


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    c = get_client(reap=False)
    yield c
    gc(c, RUN_LABEL)


def _env(**extra: str) -> dict[str, str]:
    return {**os.environ, "PYTHONUNBUFFERED": "1", leftovers.ENV: "1", **extra}


def _bandpass(ws: Workspace | Path, *args: str) -> list[str]:
    root = ws.root if isinstance(ws, Workspace) else ws
    return [sys.executable, "-m", "bandpass.tui.cli", "-w", str(root), *args]


def _state(client: docker.DockerClient, cid: str) -> str:
    try:
        return str(client.api.inspect_container(cid)["State"]["Status"])
    except docker.errors.NotFound:
        return "removed"


def _of(client: docker.DockerClient, **labels: str) -> list[dict[str, Any]]:
    """Bandpass containers with these labels, stopped ones included."""
    filters = {"label": [f"{L.LABEL}=1", *(f"{k}={v}" for k, v in labels.items())]}
    found: list[dict[str, Any]] = client.api.containers(all=True, filters=filters)
    return found


# --- owner identity ------------------------------------------------------------------------------------


def test_the_owner_label_tells_a_reused_pid_from_its_owner() -> None:
    me = owner_mod.current()
    assert owner_mod.Owner.parse(me.label()) == me
    assert owner_mod.liveness(me)[0] == owner_mod.ALIVE
    # the same pid with another start time: the owner died and its pid went to this process
    reused = owner_mod.Owner(me.host, me.pid, me.start + 1, me.boot, me.pidns)
    state, why = owner_mod.liveness(reused)
    assert state == owner_mod.GONE and "another process" in why
    proc = subprocess.Popen(["true"])
    proc.wait()
    dead = owner_mod.Owner(me.host, proc.pid, 1, me.boot, me.pidns)
    assert owner_mod.liveness(dead)[0] == owner_mod.GONE
    # owners this machine cannot judge are never reaped
    assert owner_mod.liveness(owner_mod.Owner("elsewhere", proc.pid, 1, me.boot, me.pidns))[0] == "unknown"
    assert owner_mod.liveness(owner_mod.Owner(me.host, proc.pid, 1, me.boot, "1"))[0] == "unknown"
    assert owner_mod.liveness(None)[0] == "unknown"
    assert owner_mod.Owner.parse("vm:1234") is None and owner_mod.Owner.parse("") is None


# --- the lifeline -----------------------------------------------------------------------------------------

OWNER_SCRIPT = """
import sys, time
from bandpass.engine.sandbox.container import Sandbox, SandboxSpec
from bandpass.engine.sandbox.docker_engine import get_client
sb = Sandbox(get_client(), SandboxSpec(image=sys.argv[1], labels={"bandpass.test": sys.argv[2],
    "bandpass.workspace": sys.argv[3]}, pids_limit=64)).start()
sb.exec("nohup sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 &")
print(sb.id, flush=True)
time.sleep(3600)
"""


@pytest.mark.docker
def test_a_sigkilled_owners_container_stops_and_the_next_start_reaps_it(
    client: docker.DockerClient, tmp_path: Path
) -> None:
    ws = tmp_path / "ws"
    owner = subprocess.Popen(
        [sys.executable, "-c", OWNER_SCRIPT, BASE_TAG, RUN_LABEL["bandpass.test"], str(ws)],
        cwd=REPO,
        env=_env(**{guardian.ENV: "0"}),  # the lifeline alone: its own grace ends the restarted container
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        cid = owner.stdout.readline().strip() if owner.stdout else ""
        assert cid and _state(client, cid) == "running", owner.communicate()
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
    finally:
        if owner.poll() is None:
            owner.kill()
    wait_until(lambda: _state(client, cid) != "running", OUTLIVE_S, "the dead owner's container stopped")
    assert client.api.inspect_container(cid)["State"]["ExitCode"] == lifeline.EXIT_RELEASED
    # started again with nobody holding its pipe (as when a start request was in flight at the SIGKILL):
    # the watchdog cannot open the pipe, and ends the container after its grace
    client.api.start(cid)
    wait_until(lambda: _state(client, cid) != "running", OUTLIVE_S, "the ownerless container ended")
    assert client.api.inspect_container(cid)["State"]["ExitCode"] == lifeline.EXIT_EXPIRED

    # `gc --dry-run` lists what a start would reap, and removes nothing
    res = subprocess.run(
        _bandpass(ws, "gc", "--dry-run"), cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert res.returncode == 0, res.stderr
    (line,) = [x for x in res.stdout.splitlines() if str(ws) in x and "has exited" in x]
    assert f"owner pid {owner.pid} has exited" in line and "(exited;" in line
    assert "removed" not in res.stdout + res.stderr and _state(client, cid) == "exited"

    # any command that reaches the engine reaps it, in any workspace, and says how many
    res = subprocess.run(
        _bandpass(tmp_path / "another-ws", "doctor"), cwd=REPO, env=_env(), capture_output=True, text=True
    )
    assert "bandpass: reaped " in res.stderr and f"of {ws}" in res.stderr, res.stderr
    assert _state(client, cid) == "removed"


FROZEN_OWNER = OWNER_SCRIPT.replace(
    "print(sb.id, flush=True)",
    "from bandpass.engine.sandbox import hostview\nassert hostview.freeze(sb.client, sb.id)\n"
    "print(sb.id, flush=True)",
)


@pytest.mark.docker
def test_a_sigkilled_owners_frozen_container_is_ended_by_its_guardian(client: docker.DockerClient) -> None:
    """A paused container's watchdog cannot run; the owner's guardian, outside every container, kills it
    once the owner is gone (no later Bandpass process needed: this process does not reap)."""
    owner = subprocess.Popen(
        [sys.executable, "-c", FROZEN_OWNER, BASE_TAG, RUN_LABEL["bandpass.test"], "frozen-owner"],
        cwd=REPO,
        env=_env(**{leftovers.ENV: "0"}),
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        cid = owner.stdout.readline().strip() if owner.stdout else ""
        assert cid and _state(client, cid) == "paused", owner.communicate()
        owner.send_signal(signal.SIGKILL)
        owner.wait(timeout=30)
    finally:
        if owner.poll() is None:
            owner.kill()
    wait_until(lambda: _state(client, cid) not in UP, OUTLIVE_S, "the dead owner's frozen container ended")
    assert _state(client, cid) == "exited"  # stopped, not removed: the next start reaps it as before


@pytest.mark.docker
def test_the_hard_lifetime_ends_a_container_and_a_restart_does_not_extend_it(
    client: docker.DockerClient,
) -> None:
    sb = Sandbox(client, SandboxSpec(image=BASE_TAG, labels=dict(RUN_LABEL), max_lifetime_s=3)).start()
    try:
        assert sb.lifeline is not None and sb.lifeline.open  # the owner lives and holds on
        wait_until(lambda: not sb.is_running(), OUTLIVE_S, "the container's lifetime ended")
        assert sb.container.attrs["State"]["ExitCode"] == lifeline.EXIT_EXPIRED
        sb.container.start()  # a restart after the deadline: the watchdog exits at once
        wait_until(lambda: not sb.is_running(), OUTLIVE_S, "the restarted container ended again")
        assert sb.container.attrs["State"]["ExitCode"] == lifeline.EXIT_RELEASED
    finally:
        sb.remove()


@pytest.mark.docker
def test_the_policy_cannot_hold_or_forge_the_lifeline(client: docker.DockerClient) -> None:
    with Sandbox(client, SandboxSpec(image=BASE_TAG, labels=dict(RUN_LABEL))) as sb:
        main = sb.main_pid
        assert main
        attempts = {
            "write": f": > {lifeline.MOUNT}",
            "hold open for writing": f"exec 4<> {lifeline.MOUNT}",
            "write through the watchdog's descriptor": f": > /proc/{main}/fd/3",
            "chmod": f"chmod 666 {lifeline.MOUNT}",
            "remove": f"rm -f {lifeline.MOUNT}",
            "unmount": f"umount {lifeline.MOUNT}",
            "replace the script": f": > {lifeline.SCRIPT_MOUNT}",
        }
        for what, cmd in attempts.items():
            code, out = sb.exec(cmd)
            assert code != 0, f"root in the container could {what}: {out}"
        # the agent's processes die at the end of its phase; the watchdog and its timer do not
        sb.exec("nohup sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 &")
        assert sb.kill_all_processes_except_init() == "kill"
        assert sb.list_processes() == [] and sb.is_running()
        _, ps = sb.exec("ps -eo args --no-headers")
        timers = [int(x.split()[1]) for x in ps.splitlines() if x.startswith("sleep ")]
        assert max(timers) > sb.spec.max_lifetime_s - 60  # the hard lifetime's timer survived the kill
        assert sb.lifeline is not None
        sb.lifeline.close()  # the owner lets go: the container ends on its own
        wait_until(lambda: not sb.is_running(), OUTLIVE_S, "the container ended when its owner let go")


@pytest.mark.docker
def test_the_hosts_kill_keeps_the_watchdog_and_its_timers(client: docker.DockerClient) -> None:
    """Killed from the host (a service's capture), the policy's processes go and the lifeline's timers
    stay: killing a timer's ``sleep`` before its shell once let that shell end the watchdog, and the
    container with it (an in-place episode ended ``infra_error:container_died``)."""
    if not hostview.local(client):
        pytest.skip("the host's view of a container's processes needs a local engine and root")
    with Sandbox(client, SandboxSpec(image=BASE_TAG, labels=dict(RUN_LABEL))) as sb:
        sb.exec("nohup sh -c 'while :; do sleep 1; done' >/dev/null 2>&1 &")
        killed = hostview.kill_except(client, sb.id, set())
        assert any("while" in p.cmd for p in killed), killed
        assert not any("bandpass-watchdog" in p.cmd for p in killed), killed
        wait_until(lambda: sb.list_processes() == [], 10, "the policy's processes are gone")
        _, ps = sb.exec("ps -eo args --no-headers")
        assert [x for x in ps.splitlines() if x.startswith("sleep ")], ps  # the hard lifetime's timer
        assert sb.is_running()


# --- reaping and retried removals ---------------------------------------------------------------------------


def _dead_owner_label() -> str:
    proc = subprocess.Popen(["true"])
    proc.wait()
    me = owner_mod.current()
    return owner_mod.Owner(me.host, proc.pid, 1, me.boot, me.pidns).label()


@pytest.mark.docker
def test_reaping_takes_only_dead_or_expired_owners_and_retries_a_failed_removal(
    client: docker.DockerClient, tmp_path: Path
) -> None:
    ws = str(tmp_path / "ws")
    me = owner_mod.current()

    def leftover(owner: str | None, **extra: str) -> str:
        labels = {L.LABEL: "1", L.WORKSPACE: ws, **RUN_LABEL, **extra}
        if owner is not None:
            labels[L.OWNER] = owner
        return str(client.api.create_container(BASE_TAG, ["sleep", "600"], labels=labels)["Id"])

    dead = leftover(_dead_owner_label())
    expired = leftover(me.label(), **{L.EXPIRES: str(int(time.time()) - 3600)})
    alive = leftover(me.label(), **{L.EXPIRES: str(int(time.time()) + 3600)})
    elsewhere = leftover(owner_mod.Owner("another-host", 1, 1, me.boot, me.pidns).label())
    unlabelled = leftover(None)
    with DockerProxy() as proxy:
        proxy.refuse("DELETE", f"/containers/{dead}", times=1)
        report = leftovers.reap(docker.DockerClient(base_url=proxy.url, timeout=60))
        assert proxy.seen("DELETE", f"/containers/{dead}") == [f"DELETE /containers/{dead}"] * 2
    assert {s.id for s in report.removed if s.workspace == ws} == {dead, expired}, report
    assert not [f for f in report.failed if f[0].workspace == ws]
    assert "has exited" in next(s.why for s in report.removed if s.id == dead)
    assert "hard lifetime ended" in next(s.why for s in report.removed if s.id == expired)
    assert {c["Id"] for c in _of(client, **{L.WORKSPACE: ws})} == {alive, elsewhere, unlabelled}


@pytest.mark.docker
async def test_the_tui_says_what_its_start_reaped(
    client: docker.DockerClient, workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(leftovers.ENV, "1")
    labels = {L.LABEL: "1", L.WORKSPACE: str(workspace.root), L.OWNER: _dead_owner_label(), **RUN_LABEL}
    cid = client.api.create_container(BASE_TAG, ["sleep", "600"], labels=labels)["Id"]
    app = BandpassApp(workspace)
    async with app.run_test() as pilot:
        with DockerProxy() as proxy:  # an engine this process has not reached yet: its first contact
            first = docker.DockerClient(base_url=proxy.url, timeout=60)
            await asyncio.to_thread(leftovers.reap_on_start, first)  # as a worker's get_client() does
        await wait_for(
            pilot,
            lambda: any(f"of {workspace.root}" in str(n.message) for n in app._notifications),
            what="a notification of the reaped container",
        )
    assert _state(client, cid) == "removed"


@pytest.mark.docker
def test_a_pool_containers_removal_that_fails_once_is_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(sandbox_pool.ENV, "1")
    with DockerProxy() as proxy:
        monkeypatch.setenv("DOCKER_HOST", proxy.url)
        pool = sandbox_pool.WarmPool()
        via_proxy = get_client(reap=False)
        sb = pool.acquire(via_proxy, SandboxSpec(image=BASE_TAG, labels=dict(RUN_LABEL), episode=1))
        proxy.refuse("DELETE", f"/containers/{sb.id}", times=1)
        pool.release(sb)
        pool.drain()  # waits for the background removal (and removes the spare)
        assert proxy.seen("DELETE", f"/containers/{sb.id}") == [f"DELETE /containers/{sb.id}"] * 2
        assert _state(via_proxy, sb.id) == "removed"
        assert [c for c in _of(via_proxy, **RUN_LABEL) if c["Labels"].get(sandbox_pool.POOL_LABEL)] == []


# --- SIGKILLed audits and batches ---------------------------------------------------------------------------

SLOW_ORACLE = "#!/bin/bash\nsleep 300\necho 42 > /app/answer.txt\n"


@pytest.mark.docker
@pytest.mark.parametrize("pool", ["1", "0"], ids=["warm-pool", "cold"])
@pytest.mark.parametrize("command", ["audit", "run"])
def test_a_sigkilled_audit_or_batch_leaves_nothing_running(
    client: docker.DockerClient, workspace: Workspace, tmp_path: Path, command: str, pool: str
) -> None:
    task = make_task(tmp_path / "src", "slow-oracle", solve=SLOW_ORACLE, agent_timeout=600)
    assert import_paths(workspace, [task]).ok
    args = (
        ["audit", "--reruns", "1"]
        if command == "audit"
        else ["run", "--agent", "oracle", "--k", "2", "-j", "2"]
    )
    proc = subprocess.Popen(
        _bandpass(workspace, *args),
        cwd=REPO,
        env=_env(**{sandbox_pool.ENV: pool}),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    mine = {L.WORKSPACE: str(workspace.root)}

    def mid_episode() -> bool:
        assert proc.poll() is None, proc.communicate()
        with session(workspace.engine) as s:
            if not any(e.status == "running" for e in queries.episodes(s)):
                return False
        running = [c for c in _of(client, **mine) if c["State"] == "running"]
        spares = [c for c in running if c["Labels"].get(sandbox_pool.POOL_LABEL)]
        return len(running) - len(spares) >= 1 and (pool == "0" or len(spares) >= 1)

    try:
        wait_until(mid_episode, 300, f"a {command} mid-episode (pool {pool})")
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    left = [c["Id"] for c in _of(client, **mine)]
    assert left
    try:
        wait_until(
            lambda: not [c for c in _of(client, **mine) if c["State"] in UP],
            OUTLIVE_S,
            f"no container of the SIGKILLed {command} runs",
        )
    finally:
        for cid in left:
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(cid, force=True)


#: A verifier that takes its time: while it runs in the clean room the agent's container stays frozen
#: (``docker pause``), which also freezes that container's lifeline watchdog.
SLOW_VERIFIER = (
    "#!/bin/bash\nmkdir -p /logs/verifier\nsleep 45\n"
    'if [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ]; then echo 1 > /logs/verifier/reward.txt; '
    "else echo 0 > /logs/verifier/reward.txt; fi\n"
)


def sigkill_while_paused(client: docker.DockerClient, root: Path, command: str, runs: int = 1) -> list[float]:
    """``runs`` times: starts ``bandpass audit`` (or a batch) on a task whose verifier takes 45 s, waits
    until one of its containers is paused (an agent's container frozen while its clean room verifies),
    SIGKILLs it, and measures how long until no container of that workspace is up (running or paused);
    fails past OUTLIVE_S. Returns the seconds of each run. Shared with bench/bench_reaper.py."""
    ws = Workspace.open(root / "ws")
    task = make_task(root / "src", "slow-verifier", test=SLOW_VERIFIER, verifier_timeout=120)
    assert import_paths(ws, [task]).ok
    args = (
        ["audit", "--reruns", "1"] if command == "audit" else ["run", "--agent", "nop", "--k", "2", "-j", "2"]
    )
    mine = {L.WORKSPACE: str(ws.root)}
    took: list[float] = []
    for _ in range(runs):
        proc = subprocess.Popen(
            _bandpass(ws, *args),
            cwd=REPO,
            env=_env(**{sandbox_pool.ENV: "1", leftovers.ENV: "0"}),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            text=True,
        )

        def paused(proc: subprocess.Popen[str] = proc) -> bool:
            assert proc.poll() is None, proc.communicate()
            return any(c["State"] == "paused" for c in _of(client, **mine))

        try:
            wait_until(paused, 300, f"a paused container of the {command}")
            proc.send_signal(signal.SIGKILL)
            proc.wait(timeout=30)
            killed = time.monotonic()
        finally:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()
        left = [c["Id"] for c in _of(client, **mine)]
        try:
            wait_until(
                lambda: not [c for c in _of(client, **mine) if c["State"] in UP],
                OUTLIVE_S,
                f"no container of the SIGKILLed {command} is up (running or paused)",
            )
            took.append(time.monotonic() - killed)
        finally:
            for cid in left:
                with contextlib.suppress(docker.errors.NotFound):
                    client.api.remove_container(cid, force=True)
    return took


@pytest.mark.docker
@pytest.mark.parametrize("command", ["audit", "run"])
def test_a_sigkilled_audit_or_batch_leaves_no_paused_container(
    client: docker.DockerClient, tmp_path: Path, command: str
) -> None:
    """A frozen container's watchdog cannot run: the owner's guardian, outside every container, ends the
    containers its dead owner left frozen (bench/bench_reaper.py runs this 20 times)."""
    sigkill_while_paused(client, tmp_path, command)


# --- the fork bomb under load -------------------------------------------------------------------------------

LOAD = "import time\nend = time.monotonic() + 900\nwhile time.monotonic() < end:\n    pass\n"


@pytest.mark.docker
def test_the_fork_bombs_container_is_gone_within_its_phase_timeout_under_load(
    workspace: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(sandbox_pool.ENV, "1")  # removal in the background, as in an audit
    task = make_task(tmp_path / "src", "bomb", environment="pids_limit = 512\n")
    assert import_paths(workspace, [task]).ok
    with session(workspace.engine) as s:
        (row,) = queries.task_rows(s)
    load = [subprocess.Popen([sys.executable, "-c", LOAD]) for _ in range(os.cpu_count() or 2)]
    client = get_client(reap=False)
    try:
        res = run_episode(workspace, row.version_id, ForkBombCheat, max_infra_retries=0)
        assert res.outcome == "agent_error:pids_exhausted", (res.outcome, res.detail)
        capture = next(p for p in res.phases if p["name"] == "capture")
        # the bomb was killed inside its phase's budget (a bound the issue sets, not a measured timing)
        assert not capture["error"] and capture["duration_s"] <= capture["timeout_s"], capture
        ws, episode = str(workspace.root), str(res.episode_id)

        def gone() -> bool:  # by label (cold start) or by the pool's record (a claimed spare)
            mine = _of(client, **{L.WORKSPACE: ws})
            return all(sandbox_pool.episode_of(c["Id"], c["Names"][0], c["Labels"]) != episode for c in mine)

        wait_until(
            gone,
            CAPTURE_TIMEOUT_S,
            "the fork bomb's container is gone",
        )
    finally:
        for p in load:
            p.kill()
            p.wait()
        sandbox_pool.drain()
