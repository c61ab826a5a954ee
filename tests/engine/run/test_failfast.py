"""Runs that fail fast: the endpoint is checked before any container starts, a policy endpoint that dies
mid-batch stops the batch, an all-infra batch exits non-zero, and `--resume --retry CODE` re-runs only
those episodes as new tries of the same attempts (never double counted).

Real HTTP to the scripted OpenAI-compatible server, real Docker for the episodes. Timing is a bench
figure (bench/bench_failfast.py), never asserted here.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.rollouts import BatchError, parse_retry_codes, plan_batch, run_planned
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.calib_data import add_task
from tests.support.paths import REPO
from tests.support.servers.openai_server import _action, running_server
from tests.support.taskfactory import make_task

HELLO_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/hello.txt 2>/dev/null)" = "hello" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
#: One reply, repeated for every request: write the file and declare the task complete (twice = confirmed).
SOLVE_AND_CONFIRM = [_action([("echo hello > /app/hello.txt\n", 1.0)], plan="write it", task_complete=True)]
FAST_CLIENT = {"max_steps": 6, "request_timeout": 10, "max_retries": 1, "backoff_base": 0.01}


def _bandpass(ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def _dead_url() -> str:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there any more
    return f"http://127.0.0.1:{port}/v1"


def _batches(ws: Workspace) -> list[str]:
    with session(ws.engine) as s:
        return [b.id for b in queries.batches(s)]


@pytest.mark.slow
def test_dead_or_wrong_endpoint_is_one_line_and_nothing_is_queued(workspace: Workspace) -> None:
    add_task(workspace, "t1")
    dead = _dead_url()
    proc = _bandpass(workspace, "run", "--model", "x", "--base-url", dead, "--k", "1")
    assert proc.returncode == 1
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith(
        "bandpass: error: policy endpoint not ready, nothing was run: cannot connect to "
    )
    assert "connection refused" in lines[0]
    assert _batches(workspace) == []

    with running_server() as server:
        proc = _bandpass(workspace, "run", "--model", "not-served", "--base-url", server.base_url, "--k", "1")
        assert proc.returncode == 1 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
        assert "not-served" in proc.stderr and "nothing was run" in proc.stderr
        assert server.chat_requests() == []  # the model list already said no
    assert _batches(workspace) == []


def test_retry_codes_refuse_valid_samples() -> None:
    assert parse_retry_codes("policy_unavailable, infra_error:oom") == ["policy_unavailable", "oom"]
    assert parse_retry_codes("infra_error") == ["*"]
    for bad in ("failed", "agent_error:turn_limit", "turn_limit"):
        with pytest.raises(BatchError, match="only infra_error codes can be retried"):
            parse_retry_codes(bad)
    with pytest.raises(BatchError, match="expected CODE"):
        parse_retry_codes(" , ")


@pytest.mark.docker
def test_endpoint_dying_stops_the_batch_and_retry_reruns_only_those(
    workspace: Workspace, tmp_path: Path
) -> None:
    ws = workspace
    src = make_task(
        tmp_path / "src", "write-hello", instruction="Write hello into /app/hello.txt.", test=HELLO_TEST
    )
    assert import_paths(ws, [src]).ok
    with session(ws.engine) as s:
        (vid,) = [r.version_id for r in queries.task_rows(s)]
    with running_server() as server:
        model = "dying"
        server.script(model, [{"status": 503, "message": "engine dead"}])
        batch = plan_batch(ws, model, [vid], 6, base_url=server.base_url, params=FAST_CLIENT)
        sm = run_planned(ws, batch, concurrency=1, max_infra_retries=0)
        # Three in a row, then no more claims: the other three stay queued for later.
        assert sm.outcomes == {"infra_error:policy_unavailable": 3}
        assert (sm.done, sm.queued, sm.finished) == (3, 3, False)
        assert "3 episodes in a row ended infra_error:policy_unavailable" in sm.halted

        # The endpoint comes back: --resume (CLI, with the endpoint check) finishes the queued three ...
        server.script(model, SOLVE_AND_CONFIRM)
        proc = _bandpass(ws, "run", "--resume", batch, "--json")
        assert proc.returncode == 0, proc.stderr
        out = json.loads(proc.stdout)
        assert out["outcomes"] == {"infra_error:policy_unavailable": 3, "passed": 3}
        assert out["ran"] == 3

        # ... and --retry re-runs exactly the three infra errors, as new tries of the same attempts.
        with session(ws.engine) as s:
            before = {e.id: (e.attempt, e.outcome) for e in queries.episodes(s, batch_id=batch)}
        failed_ids = {i for i, (_, o) in before.items() if o == "infra_error:policy_unavailable"}
        proc = _bandpass(ws, "run", "--resume", "--retry", "policy_unavailable", "--json")
        assert proc.returncode == 0, proc.stderr
        assert "3 episodes requeued for a new try" in proc.stderr
        assert json.loads(proc.stdout)["ran"] == 3
        with session(ws.engine) as s:
            after = queries.episodes(s, batch_id=batch)
        assert {e.id: e.attempt for e in after} == {i: a for i, (a, _) in before.items()}  # same 6 rows
        assert Counter(e.outcome for e in after) == {"passed": 6}
        for e in after:
            prior = json.loads(e.prior_tries_json)
            if e.id in failed_ids:
                assert [p["outcome"] for p in prior] == ["infra_error:policy_unavailable"]
                assert "engine dead" in prior[0]["error"] or "503" in prior[0]["error"]
            else:
                assert prior == []
        # Calibration counts six samples, not nine.
        rep = _bandpass(ws, "report", "--model", model, "--json")
        (row,) = json.loads(rep.stdout)["per_task"]
        assert (row["n"], row["c"], row["infra_errors"]) == (6, 6, 0)
        # Nothing left to retry: a no-op, not an error.
        proc = _bandpass(ws, "run", "--resume", batch, "--retry", "policy_unavailable", "--json")
        assert proc.returncode == 0 and "0 episodes requeued" in proc.stderr


@pytest.mark.docker
def test_a_batch_of_only_infra_errors_exits_non_zero(workspace: Workspace, tmp_path: Path) -> None:
    ws = workspace
    src = make_task(tmp_path / "src", "write-hello", test=HELLO_TEST)
    assert import_paths(ws, [src]).ok
    with running_server() as server:
        model = "flaky-then-dead"
        # The endpoint check passes (one token), then every request fails.
        server.script(model, ["ok", {"status": 503}])
        (ws.root / "bandpass.toml").write_text(
            f'[models.{model}]\nbase_url = "{server.base_url}"\nmax_tokens = 64\n'
        )
        proc = _bandpass(
            ws, "run", "--model", model, "--k", "2", "-j", "1", "--infra-retries", "0",
            "--max-steps", "3", "--request-timeout", "5", "--stop-after-unavailable", "0",
        )  # fmt: skip
        assert proc.returncode == 1, proc.stdout + proc.stderr
        assert "bandpass: error: all 2 episodes of batch" in proc.stderr
        assert "ended in infrastructure errors: no valid sample" in proc.stderr


async def test_runs_screen_checks_the_endpoint_before_planning(workspace: Workspace) -> None:
    """The TUI's Runs screen uses the same check: a dead endpoint is one notification, nothing queued."""
    from textual.widgets import Select

    from bandpass.engine.core.events import EventBus
    from bandpass.tui.app import BandpassApp
    from bandpass.tui.screens.runs import RunsScreen
    from tests.support.waiting import start_batch, wait_for

    ws = workspace
    (ws.root / "bandpass.toml").write_text(f'[models.deadm]\nbase_url = "{_dead_url()}"\n')
    ws = Workspace.open(ws.root)
    add_task(ws, "t1")
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("2")
        await wait_for(pilot, lambda: isinstance(app.screen, RunsScreen), what="the Runs screen")
        app.screen.query_one("#runs-agent", Select).value = "model:deadm"
        await start_batch(pilot)
        await wait_for(
            pilot,
            lambda: any("policy endpoint not ready" in str(n.message) for n in app._notifications),
            timeout=60,
            what="the endpoint check's notification",
        )
        assert any("connection refused" in str(n.message) for n in app._notifications)
    assert _batches(ws) == []
