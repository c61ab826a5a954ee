"""Rollout batches: queued in the store, run concurrently, resumable after a SIGKILL without duplicates.

Real Docker and, for policy batches, real HTTP to the scripted OpenAI-compatible server.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import docker
import pytest
from docker.models.containers import Container

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.rollouts import (
    BatchError,
    latest_unfinished_batch,
    plan_batch,
    run_planned,
)
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import pk
from tests.support.footprints import footprints_known
from tests.support.narrow import present
from tests.support.paths import REPO
from tests.support.servers.openai_server import SOLVE_HELLO, OpenAIServer, _action, running_server
from tests.support.taskfactory import make_task

HELLO_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "hello" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def _import(ws: Workspace, *dirs: Path) -> dict[str, int]:
    assert import_paths(ws, list(dirs)).ok
    with session(ws.engine) as s:
        return {r.name: r.version_id for r in queries.task_rows(s)}


def _containers(client: docker.DockerClient, ws: Workspace) -> list[Container]:
    for _ in range(20):  # list() inspects each container; one removed in between answers 404: list again
        try:
            return client.containers.list(all=True, filters={"label": [f"bandpass.workspace={ws.root}"]})
        except docker.errors.NotFound:
            time.sleep(0.05)
    raise AssertionError("containers kept vanishing while listing")


@pytest.fixture
def tiny(workspace: Workspace, tmp_path: Path) -> tuple[Workspace, dict[str, int]]:
    a = make_task(tmp_path / "src", "answer-a", instruction="Write 42 into /app/answer.txt (a).")
    b = make_task(tmp_path / "src", "answer-b", instruction="Write 42 into /app/answer.txt (b).")
    return workspace, _import(workspace, a, b)


# --- the queue, without Docker ------------------------------------------------------------------------


def test_plan_is_idempotent_and_claims_are_exclusive(tiny: tuple[Workspace, dict[str, int]]) -> None:
    ws, vids = tiny
    bid = plan_batch(ws, "oracle", list(vids.values()), 10, kind="builtin")
    assert plan_batch(ws, "oracle", list(vids.values()), 10, kind="builtin", batch_id=bid) == bid
    with pytest.raises(BatchError, match="already exists"):
        plan_batch(ws, "nop", list(vids.values()), 10, kind="builtin", batch_id=bid)
    with session(ws.engine) as s:
        assert len(queries.episodes(s, batch_id=bid)) == 20
    assert latest_unfinished_batch(ws) == bid

    # first attempts of every task go first (claimed one after the other: the threads below append after
    # their session closed, so their list's order is not the claims' order)
    with session(ws.engine) as s:
        first = [present(queries.claim_next_episode(s, bid)) for _ in range(2)]
    assert [e.attempt for e in first] == [0, 0]
    claimed: list[int] = [pk(e) for e in first]
    lock = threading.Lock()

    def claim_all() -> None:
        while True:
            with session(ws.engine) as s:
                ep = queries.claim_next_episode(s, bid)
            if ep is None:
                return
            with lock:
                claimed.append(ep.id)  # type: ignore[arg-type]

    threads = [threading.Thread(target=claim_all) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(claimed) == 20 and len(set(claimed)) == 20  # every row once, none twice
    with session(ws.engine) as s:
        assert len(queries.requeue_stale(s, bid)) == 20
        assert queries.batch_status_counts(s, bid) == {"queued": 20, "running": 0, "done": 0}


# --- built-in agents ----------------------------------------------------------------------------------


@pytest.mark.docker
def test_oracle_and_nop_batches(tiny: tuple[Workspace, dict[str, int]]) -> None:
    ws, vids = tiny
    for agent, want in (("oracle", "passed"), ("nop", "failed")):
        bid = plan_batch(ws, agent, list(vids.values()), 2, kind="builtin")
        sm = run_planned(ws, bid, concurrency=2)
        assert (sm.total, sm.done, sm.ran, sm.outcomes) == (4, 4, 4, {want: 4})
        with session(ws.engine) as s:
            eps = queries.episodes(s, batch_id=bid)
        assert Counter((e.task_version_id, e.attempt) for e in eps) == {
            (v, a): 1 for v in vids.values() for a in (0, 1)
        }
        assert all(e.agent == agent and e.agent_cast for e in eps)
    assert latest_unfinished_batch(ws) is None
    assert _containers(get_client(), ws) == []


# --- policy over real HTTP ----------------------------------------------------------------------------

WRONG = [_action([("echo goodbye > hello.txt\n", 1.0)], task_complete=True), _action([], task_complete=True)]
POLICIES = {
    "script:solve-hello": "passed",
    "script:wrong": "failed",
    "script:garbage-then-recover": "passed",
    "script:garbage": "agent_error:parse_error",
    "script:sleep": "agent_error:agent_timeout",
    "script:flaky": "passed",  # a 500 then a 429, retried by the client within its budget
    "script:rate-limited": "infra_error:rate_limited",
}


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        s.script("script:wrong", WRONG)
        s.script("script:solve-hello", SOLVE_HELLO)
        yield s


@pytest.mark.docker
def test_scripted_policies_end_in_their_outcomes(
    workspace: Workspace, tmp_path: Path, server: OpenAIServer
) -> None:
    ws = workspace
    src = make_task(
        tmp_path / "src",
        "write-hello",
        instruction="Write the word hello into /app/hello.txt.",
        test=HELLO_TEST,
        agent_timeout=6,
    )
    vid = _import(ws, src)["write-hello"]
    params = {
        "max_steps": 6,
        "request_timeout": 30,
        "max_retries": 3,
        "backoff_base": 0.01,
        "max_parse_errors": 2,
    }
    batches = {
        model: plan_batch(ws, model, [vid], 1, base_url=server.base_url, params=params) for model in POLICIES
    }

    def run(model: str) -> tuple[str, dict[str, int]]:
        sm = run_planned(ws, batches[model], concurrency=1, max_infra_retries=1, retry_backoff_s=0.05)
        return model, sm.outcomes

    first = "script:solve-hello"  # builds the image once before the rest run side by side
    results = dict([run(first)])
    with ThreadPoolExecutor(max_workers=3) as pool:
        results.update(pool.map(run, [m for m in POLICIES if m != first]))
    assert results == {m: {want: 1} for m, want in POLICIES.items()}

    with session(ws.engine) as s:
        (ep,) = queries.episodes(s, batch_id=batches["script:garbage-then-recover"])
        steps = queries.steps(s, ep.id)  # type: ignore[arg-type]
        assert ep.agent == "script:garbage-then-recover"  # rows carry the model name (report --model M)
        assert "parse_error" in json.loads(steps[0].action_json) and len(steps) >= 3
        (limited,) = queries.episodes(s, batch_id=batches["script:rate-limited"])
        assert limited.retries == 1 and limited.reward is None
    assert _containers(get_client(), ws) == []


# --- SIGKILL and resume -------------------------------------------------------------------------------


def _bandpass(ws: Workspace, *args: str) -> list[str]:
    return [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), *args]


@pytest.mark.docker
def test_sigkilled_runner_resumes_without_duplicates(workspace: Workspace, tmp_path: Path) -> None:
    ws = workspace
    slow = "#!/bin/bash\nsleep 3\necho 42 > /app/answer.txt\n"
    dirs = [
        make_task(
            tmp_path / "src", f"slow-{c}", instruction=f"Write 42 into /app/answer.txt ({c}).", solve=slow
        )
        for c in "ab"
    ]
    vids = _import(ws, *dirs)
    footprints_known(ws)  # every episode in the store is the batch's
    client = get_client()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        _bandpass(ws, "run", "--agent", "oracle", "--k", "2", "-j", "2", "--json"),
        cwd=REPO,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 90
        while True:
            assert proc.poll() is None, proc.communicate()
            assert time.monotonic() < deadline, "runner never reached one done + one running"
            with session(ws.engine) as s:
                eps = queries.episodes(s)
            running = [e.id for e in eps if e.status == "running"]
            # a running episode's agent terminal is recording: its container is up (which container is
            # its own only the runner knows: a warm-pool container keeps its spare's name)
            at_work = [i for i in running if (ws.recordings_dir / f"episode-{i}" / "agent.cast").exists()]
            if any(e.status == "done" for e in eps) and at_work and _containers(client, ws):
                break
            time.sleep(0.05)
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=10)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()

    with session(ws.engine) as s:
        before = {
            e.id: (e.outcome, e.ended_at, e.agent_cast) for e in queries.episodes(s) if e.status == "done"
        }
    assert before and _containers(client, ws)  # the killed runner left its episode's container behind

    res = subprocess.run(
        _bandpass(ws, "run", "--resume", "--json"),
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 0, res.stderr
    summary = json.loads(res.stdout)
    assert summary["finished"] and summary["requeued"] >= 1 and summary["containers_removed"] >= 1
    assert summary["ran"] == 4 - len(before)

    with session(ws.engine) as s:
        eps = queries.episodes(s)
    assert Counter((e.task_version_id, e.attempt) for e in eps) == {
        (v, a): 1 for v in vids.values() for a in (0, 1)
    }
    assert all(e.status == "done" and e.outcome == "passed" for e in eps)
    assert {e.id: (e.outcome, e.ended_at, e.agent_cast) for e in eps if e.id in before} == before
    con = sqlite3.connect(ws.db_path)
    try:
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    finally:
        con.close()
    assert _containers(client, ws) == []
    assert latest_unfinished_batch(ws) is None
    again = subprocess.run(
        _bandpass(ws, "run", "--resume"), cwd=REPO, env=env, capture_output=True, text=True
    )
    assert again.returncode == 1 and "no unfinished batch" in again.stderr


@pytest.mark.docker
def test_first_ctrl_c_drains_then_resume_finishes(workspace: Workspace, tmp_path: Path) -> None:
    ws = workspace
    slow = make_task(tmp_path / "src", "slow", solve="#!/bin/bash\nsleep 2\necho 42 > /app/answer.txt\n")
    _import(ws, slow)
    footprints_known(ws)  # the first running episode is the batch's
    proc = subprocess.Popen(
        _bandpass(ws, "run", "--agent", "oracle", "--k", "3", "-j", "1"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    while True:
        assert proc.poll() is None and time.monotonic() < deadline
        with session(ws.engine) as s:
            if any(e.status == "running" for e in queries.episodes(s)):
                break
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)  # an episode is running: the drain handler is installed before it
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "stopping" in err and "bandpass run --resume" in err
    with session(ws.engine) as s:
        status = Counter(e.status for e in queries.episodes(s))
    assert status["running"] == 0 and status["done"] >= 1 and status["queued"] >= 1  # drained, not dropped
    res = subprocess.run(_bandpass(ws, "run", "--resume", "--json"), cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0 and json.loads(res.stdout)["outcomes"] == {"passed": 3}, res.stderr
    assert _containers(get_client(), ws) == []


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--agent", "oracle", "--model", "m"], "exactly one of --model"),
        (["run", "--resume", "--model", "m"], "the batch remembers them"),
        (["run", "--model", "nowhere"], "not in bandpass.toml"),
        (["run", "--model", "oracle", "--base-url", "http://x/v1"], "built-in agent name"),
        (["run", "--agent", "oracle", "--tasks", "no-such-task"], "no task or version matches"),
        (["run", "--resume"], "no unfinished batch"),
        (["run", "b123"], "goes with --resume"),
        (["run", "--resume", "b-missing"], "no batch 'b-missing'"),
        (["run", "--retry", "oom"], "--retry goes with --resume"),
        (["run", "--resume", "--retry", "failed"], "only infra_error codes can be retried"),
    ],
)
def test_run_usage_errors_are_one_line(workspace: Workspace, args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    from bandpass.tui.cli import _register, app

    _register()
    res = CliRunner().invoke(app, ["-w", str(workspace.root), *args])
    assert res.exit_code != 0 and message in res.stderr, res.stderr
    assert len(res.stderr.strip().splitlines()) == 1
