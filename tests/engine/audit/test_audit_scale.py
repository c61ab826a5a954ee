"""Audits at scale (issue #43), on real Docker: a concurrent local audit and a Ray audit on a real
two-raylet cluster give the verdicts a sequential one gives; a runner SIGKILLed mid-audit and resumed
audits every task exactly once and leaves no container.

Three examples with different verdicts (accepted, trivially solved, an oracle that fails), audited with
one oracle rerun: the same probes, fewer repeats, so the module stays minutes on two cores.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.audit.corpus import plan_audits, run_audits, run_reports
from bandpass.engine.audit.executors import LocalAuditExecutor
from bandpass.engine.audit.pipeline import audit_alongside
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import SANDBOX_PROBES
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.sandbox.labels import LABEL, WORKSPACE
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.queries import audit_queue as aq
from tests.support.paths import EXAMPLES, REPO
from tests.support.ray_cluster import ENV
from tests.support.taskfactory import SOUND_TEST, make_task
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

TASKS = {
    "fix-wordfreq": "accepted",
    "dedupe-allowlist": "rejected",
    "count-unique-ips": "rejected",
}
Verdicts = dict[str, tuple[str, tuple[str, ...]]]


def _workspace(root: Path) -> Workspace:
    ws = Workspace.open(root)
    assert import_paths(ws, [EXAMPLES / name for name in TASKS]).ok
    return ws


def _version_ids(ws: Workspace) -> list[int]:
    with session(ws.engine) as s:
        return [r.version_id for r in queries.task_rows(s)]


def _verdicts(reports: list[dict[str, Any]]) -> Verdicts:
    return {r["task"]: (r["verdict"], tuple(sorted(r["reasons"]))) for r in reports}


def _containers(ws: Workspace) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = get_client().api.containers(
        all=True, filters={"label": [f"{LABEL}=1", f"{WORKSPACE}={ws.root}"]}
    )
    return found


def _cli(ws: Workspace, *args: str) -> list[str]:
    return [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), "audit", *args]


@pytest.fixture(scope="module")
def sequential(tmp_path_factory: pytest.TempPathFactory) -> Verdicts:
    """The yardstick: one audit at a time, as ``bandpass audit`` always ran them."""
    ws = _workspace(tmp_path_factory.mktemp("seq"))
    run = plan_audits(ws, _version_ids(ws), reruns=1)
    summary = run_audits(ws, run, executor=LocalAuditExecutor(1))
    assert summary.finished and summary.done == len(TASKS)
    verdicts = _verdicts(run_reports(ws, run))
    assert {t: v for t, (v, _) in verdicts.items()} == TASKS, verdicts
    return verdicts


def test_concurrent_local_audit_gives_the_sequential_verdicts(sequential: Verdicts, tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    run = plan_audits(ws, _version_ids(ws), reruns=1)
    summary = run_audits(ws, run, executor=LocalAuditExecutor(3))
    assert summary.finished and summary.ran == len(TASKS)
    reports = run_reports(ws, run)
    assert _verdicts(reports) == sequential
    with session(ws.engine) as s:
        jobs = aq.jobs(s, run)
    # the audits did overlap (all three were claimed before the first finished)
    assert all(j.started_at and j.ended_at for j in jobs)
    first_end = min(j.ended_at for j in jobs if j.ended_at)
    assert sum(1 for j in jobs if j.started_at and j.started_at < first_end) >= 2
    # the harness probes still ran once for the setting the three share, the others waited for them
    ran = [r for r in reports if not any(v.get("cached") for v in r["checks"]["sandbox_probes"].values())]
    assert len(ran) == 1
    for r in reports:
        if r is not ran[0]:
            assert not {p.name for p in SANDBOX_PROBES} & set(r["checks"]["episodes"])
    # each audit's phases and cost are recorded with it
    for r in reports:
        assert {"static", "build", "footprint", "probes", "verdict"} <= set(r["checks"]["phases"])
        assert r["checks"]["cost"]["episodes"] >= 10
    accepted = next(r for r in reports if r["task"] == "fix-wordfreq")
    assert accepted["checks"]["cost"]["oracle_equivalents"] > 1
    assert not _containers(ws)


def test_ray_audit_on_two_raylets_gives_the_sequential_verdicts(
    sequential: Verdicts, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    address = request.getfixturevalue("cluster")  # the two-raylet cluster: tests/engine/conftest.py
    ws = _workspace(tmp_path / "ws")
    proc = subprocess.run(
        [*_cli(ws, "--reruns", "1", "--json", "--executor", "ray", "--ray-address", address)],
        cwd=REPO,
        env=ENV,
        capture_output=True,
        text=True,
        timeout=1000,
    )
    assert proc.returncode == 1, proc.stderr[-3000:]  # two tasks are rejected
    reports = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert _verdicts(reports) == sequential
    # audited on both raylets (one CPU each: two audits at once cannot share a node)
    assert len({r["node"] for r in reports}) == 2, [r["node"] for r in reports]
    # the nodes' episodes are the head's now: under head ids, with their recordings
    with session(ws.engine) as s:
        for r in reports:
            ids = [e["episode"] for eps in r["checks"]["episodes"].values() for e in eps]
            assert ids and all(i < 10**9 for i in ids)
            for i in ids:
                ep = queries.get_episode(s, i)
                assert ep is not None and ep.status == "done" and ep.task_version_id == r["version_id"]
                if ep.agent_cast:
                    assert ws.abs(ep.agent_cast).is_file()
    assert not _containers(ws)


def test_sigkill_mid_audit_then_resume_audits_every_task_once(tmp_path: Path) -> None:
    ws = _workspace(tmp_path / "ws")
    log = tmp_path / "audit.log"
    with log.open("wb") as out:
        proc = subprocess.Popen(
            _cli(ws, "--reruns", "1", "-c", "2"), cwd=REPO, stdout=out, stderr=subprocess.STDOUT
        )

    def mid_audit() -> bool:
        """A job is in its probes with an episode's container up (the moment a kill costs the most)."""
        with session(ws.engine) as s:
            running = [j for j in aq.running_jobs(s) if j.phase == "probes"]
        return bool(running) and any(c["State"] == "running" for c in _containers(ws))

    try:
        wait_until(mid_audit, 600, "an audit in its probes with a container up", interval=0.5)
        with session(ws.engine) as s:
            before = {
                j.task_version_id: (j.status, j.audit_id, j.tries)
                for j in aq.jobs(s, aq.latest_unfinished_run_id(s) or "")
            }
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(30)
    finally:
        if proc.poll() is None:
            proc.kill()
    with session(ws.engine) as s:
        run = aq.latest_unfinished_run_id(s)
        assert run is not None
        assert any(j.status == "running" for j in aq.jobs(s, run))
    resumed = subprocess.run(
        _cli(ws, "--resume", "last", "--json"), cwd=REPO, capture_output=True, text=True, timeout=1000
    )
    assert resumed.returncode == 1, resumed.stderr[-3000:]
    with session(ws.engine) as s:
        jobs = aq.jobs(s, run)
        assert len(jobs) == len(TASKS) and all(j.status == "done" and j.audit_id for j in jobs)
        for j in jobs:
            # one audit per task: an interrupted audit records nothing, a finished one is never redone
            assert len(queries.audits_for_version(s, j.task_version_id)) == 1
            status, audit_id, tries = before[j.task_version_id]
            if status == "done":
                assert (j.audit_id, j.tries) == (audit_id, tries)
        # the killed audits' episodes are closed, none left running or queued
        assert not [e for e in queries.episodes(s) if e.status != "done"]
    verdicts = {
        json.loads(x)["task"]: json.loads(x)["verdict"]
        for x in resumed.stdout.splitlines()
        if x.startswith("{")
    }
    assert verdicts == TASKS
    assert not _containers(ws)


def test_tasks_are_audited_as_they_are_produced(tmp_path: Path) -> None:
    """The generation → audit pipeline: the first task's audit is under way before the second exists."""
    ws = Workspace.open(tmp_path / "ws")
    src = tmp_path / "src"

    def produce(name: str, number: int) -> int:
        d = make_task(
            src,
            name,
            instruction=f"Write the number {number} into /app/answer.txt.",
            solve=f"#!/bin/bash\necho {number} > /app/answer.txt\n",
            test=SOUND_TEST.replace("42", str(number)),
        )
        assert import_paths(ws, [d]).ok
        with session(ws.engine) as s:
            return next(r.version_id for r in queries.task_rows(s) if r.name == name)

    with audit_alongside(ws, reruns=1, executor=LocalAuditExecutor(2)) as feed:
        first = produce("answer-one", 42)
        feed.put(first)

        def first_under_way() -> bool:
            with session(ws.engine) as s:
                return any(j.task_version_id == first and j.phase for j in aq.running_jobs(s))

        wait_until(first_under_way, 300, "the first task's audit under way")
        feed.put(produce("answer-two", 7))
    assert feed.error is None and feed.summary is not None
    assert (feed.summary.done, feed.summary.total) == (2, 2)
    assert {r["task"]: r["verdict"] for r in run_reports(ws, feed.run_id)} == {
        "answer-one": "accepted",
        "answer-two": "accepted",
    }
    assert not _containers(ws)
