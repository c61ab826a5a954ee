"""``bandpass regrade``: a fixed verifier re-judges stored end states (real Docker, real CLI process)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import NopAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import Episode
from tests.support.narrow import present
from tests.support.scripted import Keys
from tests.support.taskfactory import IN_PLACE, make_task

pytestmark = pytest.mark.docker

BUGGY = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "43" ] && [ ! -e /app/seed.txt ]
then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""
FIXED = BUGGY.replace('"43"', '"42"')
DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\nRUN echo seed > /app/seed.txt\n"


def _cli(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(root), *args],
        capture_output=True,
        text=True,
        timeout=600,
    )


def _latest(ws: Workspace, name: str) -> int:
    report = import_paths(ws, [ws.root.parent / "src" / name])
    assert report.ok, [i.problems for i in report.items]
    with session(ws.engine) as s:
        return next(r.version_id for r in queries.task_rows(s) if r.name == name)


def test_regrade_rejudges_stored_end_states_once(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws")
    (ws.root / "bandpass.toml").write_text("[endstate]\ncap_mb = 0.05\n")
    ws = Workspace.open(ws.root)
    src = make_task(tmp_path / "src", "fixme", dockerfile=DOCKERFILE, test=BUGGY)
    v1 = _latest(ws, "fixme")

    solver = Keys("rm /app/seed.txt", "echo 42 > /app/answer.txt", name="policy-a")
    forger = Keys("printf '#!/bin/sh\\necho 43\\n' > /usr/bin/cat", "rm /app/seed.txt", name="policy-b")
    hoarder = Keys("head -c 200000 /dev/urandom > /app/blob", "rm /app/seed.txt", name="policy-c")
    solved = run_episode(ws, v1, solver)
    forged = run_episode(ws, v1, forger)
    nop = run_episode(ws, v1, NopAgent())
    big = run_episode(ws, v1, hoarder)
    assert solved.outcome == "failed"  # the buggy verifier wants 43
    # verified in a clean room: the forged cat never reached the verifier (its rule is evidence)
    assert (forged.outcome, forged.reward, forged.verify_mode) == ("failed", 0.0, "clean_room")
    assert {f.rule for f in forged.guard_findings} == {"system_file"}

    (src / "tests" / "test.sh").write_text(FIXED)  # the verifier is fixed: only tests/ changes
    v2 = _latest(ws, "fixme")
    assert v2 != v1

    first = _cli(ws.root, "regrade", "fixme", "--json")
    assert first.returncode == 0, first.stderr
    items = {i["source_episode"]: i for i in json.loads(first.stdout)}
    assert set(items) == {solved.episode_id, forged.episode_id, nop.episode_id, big.episode_id}
    assert {k: items[solved.episode_id][k] for k in ("old_reward", "new_reward", "outcome")} == {
        "old_reward": 0.0,
        "new_reward": 1.0,  # the deletion and the answer were both put back
        "outcome": "passed",
    }
    assert items[nop.episode_id]["outcome"] == "failed"
    # the same clean room again: the forged cat is not an artifact, the fixed verifier sees no answer
    assert items[forged.episode_id]["outcome"] == "failed"
    assert items[big.episode_id]["episode"] is None
    assert "over the cap" in items[big.episode_id]["skipped"]  # /app/blob: an artifact over the cap

    with session(ws.engine) as s:
        regraded = present(s.get(Episode, items[solved.episode_id]["episode"]))
        assert regraded.task_version_id == v2
        assert (regraded.origin, regraded.source_episode_id, regraded.agent) == (
            "regrade",
            solved.episode_id,
            "policy-a",
        )
        assert regraded.status == "done" and regraded.reward == 1.0

    second = _cli(ws.root, "regrade", "fixme", "--json")
    assert second.returncode == 0, second.stderr
    again = json.loads(second.stdout)
    assert [i["episode"] for i in again] == [None]  # only the skipped one is named again; nothing twice
    with session(ws.engine) as s:
        assert len(queries.episodes(s, version_id=v2)) == 3

    # anything but tests/ changed: refused in one line, exit 1, nothing regraded
    (src / "instruction.md").write_text("Write the number 42 into /app/answer.txt, please.\n")
    v3 = _latest(ws, "fixme")
    refused = _cli(ws.root, "regrade", "fixme")
    assert refused.returncode == 1
    lines = refused.stderr.strip().splitlines()
    assert len(lines) == 1 and "instruction.md" in lines[0] and "outside tests/" in lines[0], lines
    with session(ws.engine) as s:
        assert queries.episodes(s, version_id=v3) == []

    unknown = _cli(ws.root, "regrade", "fixme", "--from", "ffffffff")
    assert unknown.returncode == 1 and "no earlier version ffffffff" in unknown.stderr

    # the same evidence from the command line: what the forger changed, and what the guard said
    shown = _cli(ws.root, "changes", str(forged.episode_id))
    assert shown.returncode == 0, shown.stderr
    assert "M /usr/bin/cat" in shown.stdout and "flagged system_file" in shown.stdout
    assert "D /app/seed.txt" in shown.stdout and shown.stdout.rstrip().splitlines()[-1].startswith(
        "guard evidence only (1 finding)"
    )
    assert "clean room: 1 artifact change carried, 1 deletion" in shown.stdout
    as_json = json.loads(_cli(ws.root, "changes", str(solved.episode_id), "--json").stdout)
    assert as_json["guard"] == {"tripped": False, "gate": False, "findings": []}
    assert as_json["verify_mode"] == "clean_room" and as_json["carry"]["roots"][0] == "/app"
    assert {"/app/answer.txt", "/app/seed.txt"} <= {c["path"] for c in as_json["changes"]}
    diff = _cli(ws.root, "changes", str(solved.episode_id), "--diff", "/app/answer.txt")
    assert "+42" in diff.stdout.splitlines()
    missing = _cli(ws.root, "changes", "99999")
    assert (
        missing.returncode == 1 and missing.stderr.strip() == "bandpass: error: episode 99999 does not exist"
    )


def test_regrade_in_place_puts_the_whole_end_state_back_and_the_guard_gates_again(tmp_path: Path) -> None:
    """A task verified in place (its own opt-in) regrades the same way its episodes ran: the stored end
    state in a fresh container, captured and guarded again."""
    ws = Workspace.open(tmp_path / "ws")
    src = make_task(tmp_path / "src", "fixme", dockerfile=DOCKERFILE, test=BUGGY, verifier=IN_PLACE)
    v1 = _latest(ws, "fixme")
    forged = run_episode(ws, v1, Keys("printf '#!/bin/sh\\necho 43\\n' > /usr/bin/cat", "rm /app/seed.txt"))
    assert (forged.outcome, forged.reward, forged.verify_mode) == (
        "agent_error:verifier_tamper",
        1.0,
        "in_place",
    )
    (src / "tests" / "test.sh").write_text(FIXED)
    _latest(ws, "fixme")
    done = _cli(ws.root, "regrade", "fixme", "--json")
    assert done.returncode == 0, done.stderr
    (item,) = json.loads(done.stdout)
    assert item["outcome"] == "agent_error:verifier_tamper"  # the guard runs again on the same end state
