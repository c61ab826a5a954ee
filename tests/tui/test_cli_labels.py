"""The CLI cases of issue 42 on the demo workspace: an unknown name is an error listing the valid ones,
``--version``, a failed command has no side effect, a refusal never suggests a flag that refuses too, and
counts agree with ``bandpass clusters``."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from bandpass.engine.core.workspace import Workspace
from tests.support.narrow import present

BANDPASS = [sys.executable, "-m", "bandpass.tui.cli"]


def bp(ws: Path | None, *args: str) -> subprocess.CompletedProcess[str]:
    where = ["--workspace", str(ws)] if ws is not None else []
    return subprocess.run(
        [*BANDPASS, *where, *args], capture_output=True, text=True, timeout=120, env=os.environ
    )


def test_unknown_names_are_errors_listing_the_valid_ones(demo: Workspace) -> None:
    for args, says in (
        (("report", "ledger", "--task", "nosuch"), "--task nosuch: no such task (tasks: access-log-report"),
        (("report", "ledger", "--model", "nosuch"), "--model nosuch: no episodes of this model"),
        (("search", "kv.ini", "--task", "nosuch"), "--task nosuch: no such task (tasks: access-log-report"),
        (("search", "kv.ini", "--model", "nosuch"), "demo-step40"),
    ):
        out = bp(demo.root, *args)
        assert out.returncode == 1 and says in out.stderr, (args, out.stderr, out.stdout)


def test_version() -> None:
    out = bp(None, "--version")
    assert out.returncode == 0 and re.fullmatch(r"bandpass \d+\.\d+\.\d+\S*\n", out.stdout)


def test_a_failed_import_leaves_no_workspace(tmp_path: Path) -> None:
    ws = tmp_path / "new-ws"
    out = bp(ws, "import", str(tmp_path / "no-such-tasks"))
    assert out.returncode == 1 and "no such path" in out.stdout
    assert not ws.exists()
    empty = tmp_path / "empty"
    empty.mkdir()
    assert bp(empty, "import", str(tmp_path / "no-such-tasks")).returncode == 1
    assert empty.is_dir() and list(empty.iterdir()) == []


def test_export_into_a_foreign_folder_never_suggests_overwrite(demo: Workspace, tmp_path: Path) -> None:
    foreign = tmp_path / "mine"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    for extra in ((), ("--overwrite",)):
        out = bp(demo.root, "export", "--model", "demo-step40", "--out", str(foreign), *extra)
        assert out.returncode == 1 and "holds no Bandpass export" in out.stderr
        assert "use --overwrite" not in out.stderr
    assert [p.name for p in foreign.iterdir()] == ["notes.txt"]


def test_an_unknown_cluster_lists_as_many_clusters_as_bandpass_clusters(demo: Workspace) -> None:
    listed = bp(demo.root, "clusters")
    n = int(present(re.search(r"^(\d+) clusters?, ", listed.stdout, re.M)).group(1))
    out = bp(demo.root, "queue", "--cluster", "nosuch")
    assert out.returncode == 1 and f"({n} in all)" in out.stderr


def test_episodes_agent_takes_every_form_its_help_shows(demo: Workspace) -> None:
    """``--agent``'s help (and so docs/reference/cli.md, generated from it) once said ``policy:M``, a form
    it rejects: each example the reference gives now lists that agent's episodes (the demo has every one),
    and the rejected form is not offered."""
    reference = (Path(__file__).parents[2] / "docs/reference/cli.md").read_text(encoding="utf-8")
    section = reference[reference.index("## `bandpass episodes`") :]
    help_text = next(line for line in section.splitlines() if line.startswith("| `-a, --agent"))
    assert "policy:M" not in help_text
    examples = re.findall(r"e\.g\. ([^)]*)\)", help_text)
    names = [n.strip(" .") for chunk in examples for n in chunk.split(",")]
    assert {"demo-step40", "oracle"} <= set(names), help_text
    for name in names:
        out = bp(demo.root, "episodes", "--agent", name)
        assert out.returncode == 0 and re.search(rf" {re.escape(name)} ", out.stdout), (name, out.stderr)
