"""Reward dimensions (issue #41): every key of a task's reward.json is kept, and the scalar comes from one
rule that never loses a score the author wrote (engine/tasks/rewards.py). Real Docker for the episodes;
the Harbor-job import and the reading rule need none."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bandpass.engine.audit.task_audit import audit_version
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import OracleAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.tasks.harbor_jobs import rewards_of
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.taskfactory import make_task

#: The cookbook's shape: several dimensions and no "reward" key (7 public tasks write this).
MULTI = (
    "#!/bin/bash\nmkdir -p /logs/verifier\n"
    'ok=0; [ "$(cat /app/answer.txt 2>/dev/null)" = 42 ] && ok=1\n'
    'echo "{\\"success\\": $ok, \\"clips_correct\\": $ok, \\"speed\\": 0.5}" > /logs/verifier/reward.json\n'
)


def _import(ws: Workspace, *dirs: Path) -> dict[str, int]:
    assert import_paths(ws, list(dirs)).ok
    with session(ws.engine) as s:
        return {r.name: r.version_id for r in queries.task_rows(s)}


@pytest.mark.docker
def test_a_multi_key_reward_keeps_every_key_and_scores_by_the_rule(
    workspace: Workspace, tmp_path: Path
) -> None:
    make_task(tmp_path, "multi-txt", test=MULTI + "echo $ok > /logs/verifier/reward.txt\n")
    make_task(tmp_path, "multi-only", test=MULTI)
    make_task(tmp_path, "multi-declared", test=MULTI, top="", environment="")
    declared = tmp_path / "multi-declared" / "task.toml"
    declared.write_text(
        declared.read_text().replace("[agent]", '[metadata.bandpass]\nprimary_reward = "success"\n\n[agent]')
    )
    ids = _import(workspace, tmp_path)
    # reward.txt beside several keys: the author's score; every key kept (stored, shown, exported)
    res = run_episode(workspace, ids["multi-txt"], OracleAgent())
    assert (res.outcome, res.reward) == ("passed", 1.0)
    assert res.rewards == {"success": 1.0, "clips_correct": 1.0, "speed": 0.5}
    show = subprocess.run(
        [
            sys.executable,
            "-m",
            "bandpass.tui.cli",
            "--workspace",
            str(workspace.root),
            "show",
            str(res.episode_id),
        ],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert "rewards: success=1 clips_correct=1 speed=0.5 · scored by reward.txt" in show.stdout, show.stdout
    # no rule applies: unscored (never reward_missing), components kept, the fix named
    res = run_episode(workspace, ids["multi-only"], OracleAgent())
    assert res.outcome == "infra_error:reward_unscored" and res.rewards["success"] == 1.0
    assert "primary_reward" in res.detail
    # the task declares its primary: scored by it
    res = run_episode(workspace, ids["multi-declared"], OracleAgent())
    assert (res.outcome, res.reward) == ("passed", 1.0)
    # the curator declares it for a task that does not
    (workspace.root / "bandpass.toml").write_text('[rewards.primary]\n"multi-only" = "clips_correct"\n')
    ws2 = Workspace.open(workspace.root)
    res = run_episode(ws2, ids["multi-only"], OracleAgent())
    assert (res.outcome, res.reward) == ("passed", 1.0)


@pytest.mark.docker
@pytest.mark.timeout(900)
def test_the_audit_says_once_which_primary_to_declare(workspace: Workspace, tmp_path: Path) -> None:
    vid = _import(workspace, make_task(tmp_path, "multi-audit", test=MULTI))["multi-audit"]
    report = audit_version(workspace, vid, reruns=1)
    assert report.verdict == "rejected" and "invalidity.reward_unscored" in report.reasons
    said = [f for f in report.checks["findings"] if f["code"] == "invalidity.reward_unscored"]
    assert len(said) == 1 and "primary_reward" in said[0]["detail"]
    assert not any(f["code"] == "infra.reward_missing" for f in report.checks["findings"])


def test_harbor_job_rewards_keep_every_key(tmp_path: Path) -> None:
    verifier = tmp_path / "verifier"
    verifier.mkdir()
    result = {"rewards": {"correctness": 1, "performance": 0}}
    # Harbor keeps the dict; its own primary reward is none; reward.txt beside it is the author's score
    assert rewards_of(result, verifier) == (None, {"correctness": 1.0, "performance": 0.0})
    (verifier / "reward.txt").write_text("1\n")
    assert rewards_of(result, verifier) == (1.0, {"correctness": 1.0, "performance": 0.0})
    assert rewards_of(result, verifier, primary="performance")[0] == 1.0  # reward.txt comes first
    assert rewards_of({"rewards": {"reward": 0.5, "x": 1}}, verifier)[0] == 0.5
    # no verifier_result: the files
    (verifier / "reward.json").write_text(json.dumps({"reward": 1, "style": 0.25}))
    assert rewards_of(None, verifier) == (1.0, {"reward": 1.0, "style": 0.25})
