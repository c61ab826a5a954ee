"""A Ray audit losing a raylet mid-audit (issue #43), on a real two-raylet cluster and real Docker.

Two tasks (one sound, one trivially solved) are audited at once, one per raylet; while the audit on the
worker raylet is in its probes with an episode's container up, that raylet's whole process group is
SIGKILLed (as tests/engine/run/executors/test_ray_cluster.py does to a rollout). What a curator sees: the
run still finishes, each task audited exactly once with the verdict a sequential audit gives (the
yardstick of tests/engine/audit/test_audit_scale.py), the lost try named on the audit that was redone, no
episode left unfinished and no container of the workspace left.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from sqlmodel import select

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.sandbox.labels import LABEL, WORKSPACE
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import AuditRun
from bandpass.store.queries import audit_queue as aq
from tests.support.paths import EXAMPLES, REPO
from tests.support.ray_cluster import ENV, RayCliCluster
from tests.support.waiting import wait_until

pytestmark = [pytest.mark.docker, pytest.mark.timeout(1200)]

#: the verdicts a sequential audit gives these examples (test_audit_scale.py's ``sequential`` checks them)
TASKS = {"fix-wordfreq": "accepted", "dedupe-allowlist": "rejected"}


def _containers(ws: Workspace) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = get_client().api.containers(
        all=True, filters={"label": [f"{LABEL}=1", f"{WORKSPACE}={ws.root}"]}
    )
    return found


def test_worker_raylet_killed_mid_audit(nodes: RayCliCluster, tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws")
    assert import_paths(ws, [EXAMPLES / name for name in TASKS]).ok
    worker = nodes.worker_node[:8]
    cmd = [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), "audit", "--reruns", "1", "--json",
           "--executor", "ray", "--ray-address", nodes.address]  # fmt: skip
    out, err = tmp_path / "audit.out", tmp_path / "audit.err"
    with out.open("wb") as o, err.open("wb") as e:
        driver = subprocess.Popen(cmd, cwd=REPO, env=ENV, stdout=o, stderr=e)

    def on_worker_in_probes() -> bool:
        """The worker raylet's audit is in its probes with an episode's container up."""
        with session(ws.engine) as s:
            probing = [j for j in aq.running_jobs(s) if j.phase == "probes" and worker in (j.node or "")]
        return bool(probing) and any(c["State"] == "running" for c in _containers(ws))

    try:
        wait_until(on_worker_in_probes, 600, "the worker raylet's audit in its probes", interval=0.5)
        with session(ws.engine) as s:
            (hit,) = [j.task_version_id for j in aq.running_jobs(s) if worker in (j.node or "")]
        nodes.kill_worker()
        assert driver.wait(900) == 1, err.read_text()[-3000:]  # one task is rejected
    finally:
        driver.kill()
    reports = [json.loads(x) for x in out.read_text().splitlines() if x.startswith("{")]
    assert {r["task"]: r["verdict"] for r in reports} == TASKS, err.read_text()[-3000:]
    (redone,) = [r for r in reports if r["version_id"] == hit]
    # the lost try is named with the dead node, and the audit that counts ran on the surviving one
    (note,) = redone["checks"]["lost_tries"]
    assert note.startswith(f"try 1 lost with node {nodes.worker_node}"), note
    assert worker not in redone["node"]
    with session(ws.engine) as s:
        (run,) = s.exec(select(AuditRun)).all()
        jobs = aq.jobs(s, run.id)
        assert len(jobs) == len(TASKS) and all(j.status == "done" and j.audit_id for j in jobs)
        for j in jobs:
            assert len(queries.audits_for_version(s, j.task_version_id)) == 1
        # no episode left running or queued: the lost try's never reached the head, the others finished
        assert not [e for e in queries.episodes(s) if e.status != "done"]
    # the dead raylet's containers go with its worker (the reaper), the others with their audits
    wait_until(lambda: not _containers(ws), 120, "no container of the workspace left")
