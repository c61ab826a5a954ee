"""The CLI as a curator uses it: import, tasks, exit codes, JSON, one-line errors."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.paths import EXAMPLES, FIXTURES

BANDPASS = [sys.executable, "-m", "bandpass.tui.cli"]


def bp(ws: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BANDPASS, "--workspace", str(ws), *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, **(env or {})},
    )


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """Two good tasks and two broken ones in one folder."""
    root = tmp_path / "incoming"
    for name in ("access-log-report", "fix-wordfreq"):
        shutil.copytree(EXAMPLES / name, root / name)
    bad = root / "broken-toml"
    shutil.copytree(EXAMPLES / "access-log-report", bad)
    (bad / "task.toml").write_text("[agent\ntimeout_sec = 10\n")
    worse = root / "many-problems"
    shutil.copytree(EXAMPLES / "fix-wordfreq", worse)
    (worse / "instruction.md").unlink()
    (worse / "tests" / "test.sh").unlink()
    return root


def test_import_keeps_good_tasks_and_lists_every_problem(tmp_path: Path, mixed: Path) -> None:
    ws = tmp_path / "ws"
    res = bp(ws, "import", str(mixed))
    assert res.returncode == 1
    assert "Traceback" not in res.stderr + res.stdout
    out = res.stdout
    assert "new          access-log-report" in out and "new          fix-wordfreq" in out
    assert "broken-toml" in out and "task.toml" in out
    assert "instruction.md: missing" in out and "tests/test.sh: missing" in out
    assert "2 new, 0 new versions, 0 unchanged, 2 invalid, 0 conflicts; 0 with warnings" in out

    listed = json.loads(bp(ws, "tasks", "--json").stdout)
    assert sorted(r["name"] for r in listed) == ["access-log-report", "fix-wordfreq"]


def test_import_is_idempotent_and_versions_changes(tmp_path: Path) -> None:
    ws, src = tmp_path / "ws", tmp_path / "src" / "access-log-report"
    shutil.copytree(EXAMPLES / "access-log-report", src)
    first = json.loads(bp(ws, "import", "--json", str(src)).stdout)
    again = json.loads(bp(ws, "import", "--json", str(src)).stdout)
    assert first[0]["status"] == "new" and again[0]["status"] == "unchanged"
    assert first[0]["version_hash"] == again[0]["version_hash"]

    (src / "instruction.md").write_text((src / "instruction.md").read_text() + "\nBe careful.\n")
    changed = json.loads(bp(ws, "import", "--json", str(src)).stdout)
    assert changed[0]["status"] == "new_version"
    assert changed[0]["warnings"] == [] and changed[0]["unsupported"] == []
    assert changed[0]["version_hash"] != first[0]["version_hash"]

    (row,) = json.loads(bp(ws, "tasks", "--json").stdout)
    assert row["versions"] == 2 and row["version_hash"] == changed[0]["version_hash"]
    # the first version's files are still there, frozen: results that refer to it stay meaningful
    assert (ws / "tasks" / first[0]["version_hash"][:12] / "access-log-report" / "instruction.md").exists()


def test_tb1_directory_is_converted_on_import(tmp_path: Path) -> None:
    fixture = FIXTURES / "tb1" / "hello-world"
    out = json.loads(bp(tmp_path / "ws", "import", "--json", str(fixture)).stdout)
    assert out[0]["status"] == "new" and out[0]["origin"] == "tb1"


def test_tasks_on_an_empty_workspace(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()  # an empty folder becomes a workspace
    res = bp(tmp_path / "empty", "tasks")
    assert res.returncode == 0 and "no tasks" in res.stdout
    assert (tmp_path / "empty" / "bandpass.db").exists()


@pytest.mark.slow
def test_a_mistyped_workspace_is_an_error_not_a_new_workspace(tmp_path: Path) -> None:
    typo = tmp_path / "wrokspace"
    for args in (["tasks"], ["episodes"], ["queue"], ["batches"]):
        res = bp(typo, *args)
        assert res.returncode == 1 and res.stderr.count("\n") == 1, res.stderr
        assert f"no workspace at {typo}" in res.stderr and "a typo?" in res.stderr
    assert not typo.exists()  # nothing was created
    readme = tmp_path / "README.md"
    readme.write_text("# notes\n")
    res = bp(readme, "tasks")
    assert res.returncode == 1 and "is a file, not a workspace folder" in res.stderr  # was [Errno 17]
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.txt").write_text("x")
    res = bp(tmp_path / "notes", "tasks")
    assert res.returncode == 1 and "is not a Bandpass workspace" in res.stderr
    assert not (tmp_path / "notes" / "bandpass.db").exists()
    # what puts something in makes the workspace it names — and an import that failed leaves none behind
    assert bp(typo, "import", str(tmp_path / "nothing-here")).returncode == 1
    assert not typo.exists()


def test_errors_are_one_line_and_non_zero(tmp_path: Path) -> None:
    ws = tmp_path / "ws"
    ws.mkdir()
    (ws / "bandpass.toml").write_text("[band]\nlo = 'low'\n")
    res = bp(ws, "audit", "--json")
    assert res.returncode != 0
    assert res.stderr.strip().count("\n") == 0
    assert res.stderr.startswith("bandpass: error: bandpass.toml: [band].lo: expected int or float")

    res = bp(tmp_path / "ws2", "import", str(tmp_path / "does-not-exist"))
    assert res.returncode == 1 and "no such path" in res.stdout

    res = bp(tmp_path / "ws2", "no-such-command")
    assert res.returncode == 2 and res.stderr.strip() == "bandpass: error: No such command 'no-such-command'."


def test_help_lists_the_commands(tmp_path: Path) -> None:
    res = bp(tmp_path, "--help")
    assert res.returncode == 0
    for cmd in ("import", "tasks", "audit", "doctor", "gc", "images", "policy", "report", "export"):
        assert cmd in res.stdout
