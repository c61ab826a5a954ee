"""Importing the world's tasks: a task is its source and name (a same-named task from elsewhere is a
conflict, never a silent new version), and every warning reaches the user — ``import`` (text and
``--json``), ``tasks``, the TUI's task detail."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from typer.testing import CliRunner

import bandpass.tui.commands.tasks  # noqa: F401 - registers import and tasks on tui.cli.app
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.tui.cli import app
from bandpass.tui.screens.tasks import load_detail
from tests.support.paths import EXAMPLES, FIXTURES
from tests.support.taskfactory import make_task

TB1_FIXTURE = FIXTURES / "tb1" / "hello-world"


def _named(root: Path, folder: str, name: str, instruction: str) -> Path:
    d = make_task(root, folder, instruction=instruction)
    text = (d / "task.toml").read_text()
    (d / "task.toml").write_text(f'[task]\nname = "{name}"\n\n' + text.replace('version = "1.0"\n', ""))
    return d


def test_a_different_task_with_a_known_name_is_a_conflict(workspace: Workspace, tmp_path: Path) -> None:
    first = _named(tmp_path / "a", "report", "acme/report", "Write 42 into /app/answer.txt.")
    other = _named(tmp_path / "b", "report", "acme/report", "Count the lines of /etc/hosts into /app/n.")
    assert import_paths(workspace, [first]).items[0].status == "new"
    (item,) = import_paths(workspace, [other]).items
    assert item.status == "conflict"
    assert item.problems == [
        "task.toml: [task].name: 'acme/report' is already the name of a task imported from "
        f"{first.resolve()}; this folder holds different files (import it with --namespace NS to keep both, "
        "as NS/report, or with --new-version if it is that task's next version)"
    ]
    with session(workspace.engine) as s:
        rows = queries.task_rows(s)
    assert [(r.name, r.versions, r.source) for r in rows] == [("acme/report", 1, str(first.resolve()))]

    (spaced,) = import_paths(workspace, [other], namespace="theirs").items
    assert (spaced.status, spaced.name) == ("new", "theirs/report")
    # the same folder edited in place is the task's next version; a moved one needs --new-version
    (first / "instruction.md").write_text("Write 43 into /app/answer.txt.\n")
    assert import_paths(workspace, [first]).items[0].status == "new_version"
    moved = tmp_path / "moved" / "report"
    shutil.copytree(first, moved)
    (moved / "instruction.md").write_text("Write 44 into /app/answer.txt.\n")
    assert import_paths(workspace, [moved]).items[0].status == "conflict"
    assert import_paths(workspace, [moved], new_version=True).items[0].status == "new_version"
    with session(workspace.engine) as s:
        names = {r.name: r.versions for r in queries.task_rows(s)}
    assert names == {"acme/report": 3, "theirs/report": 1}


def test_warnings_reach_import_tasks_and_the_task_detail(tmp_path: Path) -> None:
    ws_root = tmp_path / "ws"
    src = tmp_path / "src"
    shutil.copytree(EXAMPLES / "access-log-report", src / "access-log-report")
    toml = src / "access-log-report" / "task.toml"
    toml.write_text(toml.read_text().replace("[agent]\n", "[agent]\ntimeout_secs = 5\n", 1))
    shutil.copytree(TB1_FIXTURE, src / "hello-world")
    compose = "services:\n  client:\n    build: {dockerfile: Dockerfile}\n  db: {image: 'postgres:16'}\n"
    (src / "hello-world" / "docker-compose.yaml").write_text(compose)
    runner = CliRunner()

    r = runner.invoke(app, ["-w", str(ws_root), "import", str(src)])
    assert r.exit_code == 0, r.output
    typo = (
        "task.toml: [agent].timeout_secs: not a Harbor key; kept, and ignored (Harbor ignores it too) "
        "(did you mean timeout_sec?)"
    )
    assert f"    warning: {typo}" in r.output
    assert "    unsupported: docker-compose.yaml: service db is not started" in r.output
    assert "2 new, 0 new versions, 0 unchanged, 0 invalid, 0 conflicts; 2 with warnings" in r.output

    r = runner.invoke(app, ["-w", str(ws_root), "import", "--json", str(src)])
    rows = {row["name"]: row for row in json.loads(r.output)}
    assert (
        rows["access-log-report"]["status"] == "unchanged" and typo in rows["access-log-report"]["warnings"]
    )

    r = runner.invoke(app, ["-w", str(ws_root), "tasks", "--json"])
    listed = {row["name"]: row for row in json.loads(r.output)}
    assert typo in listed["access-log-report"]["warnings"]
    assert listed["hello-world"]["unsupported"][0].startswith("docker-compose.yaml: service db is not")
    r = runner.invoke(app, ["-w", str(ws_root), "tasks", "-v"])
    assert f"access-log-report: warning: {typo}" in r.output

    ws = Workspace.open(ws_root)
    detail = load_detail(ws, listed["hello-world"]["version_id"])
    assert "Unsupported" in detail and "service db is not started" in detail
    detail = load_detail(ws, listed["access-log-report"]["version_id"])
    assert "Warnings" in detail and "timeout_secs" in detail


def test_harbor_default_network_is_explained(workspace: Workspace, tmp_path: Path) -> None:
    d = make_task(tmp_path, "silent")
    text = (d / "task.toml").read_text().replace('network_mode = "no-network"\n', "")
    (d / "task.toml").write_text(text)
    (item,) = import_paths(workspace, [d]).items
    assert item.status == "new"
    assert any("Harbor would give it a public network, Bandpass runs it offline" in w for w in item.warnings)
