"""An adaptive batch for real: Docker episodes, a policy over real HTTP, the CLI, Ctrl-C and --resume.

The scripted policy (``tests/support/servers/openai_server.py``, ``route``) behaves per task: it solves one
task every time, never solves another, and solves the third every other episode. On a narrow band at a low
confidence (so that four episodes decide) the batch must stop sampling the two tasks it has decided and
keep sampling the undecided one; stopped after its second round, ``bandpass run --resume`` continues the
rounds to the same end. The same batch runs on a local Ray instance through ``--executor ray``: rounds
are rows in the same queue, whatever runs them.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.calibration.adaptive import ALL_DECIDED, FUTILE
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.rollouts import latest_unfinished_batch
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.footprints import footprints_known
from tests.support.paths import REPO
from tests.support.servers.openai_server import OpenAIServer, _action, running_server
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_until

HELLO_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "hello" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
SOLVE = _action([("echo hello > hello.txt\n", 0.5)], analysis="empty", plan="write it", task_complete=True)
WRONG = _action([("echo goodbye > hello.txt\n", 0.5)], analysis="empty", plan="guess", task_complete=True)
MODEL = "routed"


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        s.route(MODEL, [("[always]", [SOLVE]), ("[never]", [WRONG]), ("[half]", [SOLVE, WRONG])])
        yield s


def _cli(ws: Workspace, *args: str) -> list[str]:
    return [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), *args]


@pytest.mark.docker
def test_adaptive_batch_samples_only_the_undecided_task_and_resume_continues_the_rounds(
    workspace: Workspace, tmp_path: Path, server: OpenAIServer
) -> None:
    ws = workspace
    dirs = [
        make_task(
            tmp_path / "src",
            f"hello-{name}",
            instruction=f"Write the word hello into /app/hello.txt. [{name}]",
            test=HELLO_TEST,
            agent_timeout=30,
        )
        for name in ("always", "never", "half")
    ]
    assert import_paths(ws, dirs).ok
    footprints_known(ws)  # every episode in the store is the batch's
    (ws.root / "bandpass.toml").write_text(
        f'[models.{MODEL}]\nbase_url = "{server.base_url}"\nmax_tokens = 256\n\n[band]\nk = 1\n'
    )
    with session(ws.engine) as s:
        vids = {r.name.removeprefix("hello-"): r.version_id for r in queries.task_rows(s)}
    args = ("--band", "0.4:0.6", "--confidence", "0.5", "--max-k", "14", "-j", "2")
    proc = subprocess.Popen(
        _cli(ws, "run", "--model", MODEL, "--adaptive", *args, "--json"),
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )

    def second_round_queued() -> bool:
        with session(ws.engine) as s:
            return proc.poll() is not None or len(queries.episodes(s)) > 3  # a first round is 1 each

    try:  # Ctrl-C once the second round is queued: its episodes finish, no third round is planned
        wait_until(second_round_queued, timeout=300, what="the second round queued")
        assert proc.poll() is None, proc.communicate()
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=240)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, err
    assert "bandpass run --resume" in err
    first = json.loads(out)
    bid = first["batch_id"]
    assert first["adaptive"]["stopped"] == "" and first["adaptive"]["rounds"] >= 2
    assert latest_unfinished_batch(ws) == bid
    with session(ws.engine) as s:
        eps = queries.episodes(s, batch_id=bid)
    status = Counter(e.status for e in eps)
    assert status["running"] == 0 and status["done"] >= 3  # the first Ctrl-C let those in flight finish
    assert min(Counter(e.task_version_id for e in eps).values()) >= 1 and len(eps) < 18

    res = subprocess.run(_cli(ws, "run", "--resume", "--json"), cwd=REPO, capture_output=True, text=True)
    assert res.returncode == 0, res.stderr
    final = json.loads(res.stdout)
    assert final["batch_id"] == bid and final["finished"]
    # A round is planned whenever the queue drains (tasks with episodes in flight wait for the next), so
    # how many rounds it took depends on timing; what each task got does not.
    assert final["adaptive"]["stopped"] == FUTILE and final["adaptive"]["rounds"] >= 3
    with session(ws.engine) as s:
        eps = queries.episodes(s, batch_id=bid)
    per_task = Counter(e.task_version_id for e in eps)
    # the decided tasks got nothing after their fourth episode; the undecided one three more rounds
    assert per_task == {vids["always"]: 4, vids["never"]: 4, vids["half"]: 10}
    assert Counter((e.task_version_id, e.attempt) for e in eps).most_common(1)[0][1] == 1  # no attempt twice
    outcomes = {
        name: Counter(e.outcome for e in eps if e.task_version_id == vid) for name, vid in vids.items()
    }
    assert outcomes == {
        "always": {"passed": 4},
        "never": {"failed": 4},
        "half": {"passed": 5, "failed": 5},
    }
    assert latest_unfinished_batch(ws) is None

    report = subprocess.run(
        _cli(ws, "report", "--model", MODEL, *args[:4], "--json"), cwd=REPO, capture_output=True, text=True
    )
    assert report.returncode == 0, report.stderr
    bands = {row["task"]: row["decision"] for row in json.loads(report.stdout)["per_task"]}
    assert bands == {"hello-always": "above", "hello-never": "below", "hello-half": "undecided"}
    with session(ws.engine) as s:
        sources = {e.source for e in queries.episodes(s)}
    assert sources == {""}  # ran here
    leftover = get_client().containers.list(all=True, filters={"label": [f"bandpass.workspace={ws.root}"]})
    assert leftover == []


@pytest.mark.docker
def test_adaptive_batch_runs_its_rounds_on_ray(
    ray_cluster: Any, workspace: Workspace, tmp_path: Path
) -> None:
    ws = workspace
    dirs = [
        make_task(tmp_path / "src", f"ray-{c}", instruction=f"Write 42 into /app/answer.txt ({c}).")
        for c in "ab"
    ]
    assert import_paths(ws, dirs).ok
    footprints_known(ws)  # the sampler counts only the batch's oracle episodes
    (ws.root / "bandpass.toml").write_text("[band]\nk = 1\n")
    address = ray_cluster.get_runtime_context().gcs_address
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "RAY_USAGE_STATS_ENABLED": "0"}
    res = subprocess.run(
        _cli(ws, "run", "--agent", "oracle", "--adaptive", "--band", "0.4:0.6", "--confidence", "0.5")
        + ["--executor", "ray", "--ray-address", address, "--json"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert res.returncode == 0, res.stderr[-2000:]
    sm = json.loads(res.stdout.strip().splitlines()[-1])
    # the oracle solves both every time: four rounds of one decide both "above", then the sampler stops
    assert (sm["executor"], sm["done"], sm["outcomes"]) == ("ray", 8, {"passed": 8})
    assert sm["adaptive"]["stopped"] == ALL_DECIDED and sm["adaptive"]["decided"] == 2
    with session(ws.engine) as s:
        eps = queries.episodes(s, batch_id=sm["batch_id"])
    assert sorted(Counter(e.task_version_id for e in eps).values()) == [4, 4]
    assert all(e.node_id for e in eps)  # each ran on a Ray node
