"""What a process pays at start-up: libghostty-vt's set-up (pre-parsed declarations that match
pyghostty's, loaded only when a screen is needed, so ``--help``, ``episodes`` and ``show`` never pay for
it) and the ORM (a listing reads the store with plain sqlite3). Timings: bench/bench_startup.py."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandpass.engine.core.workspace import Workspace
from tests.support.paths import REPO as ROOT
from tests.support.replay_data import make_episode


def test_the_committed_declarations_are_pyghostty_s_own(tmp_path: Path) -> None:
    """engine/sandbox/_ghostty_cffi.py is generated; regenerating it from the installed pyghostty must
    give the same file (else: run scripts/gen_ghostty_cffi.py)."""
    sys.path.insert(0, str(ROOT / "scripts"))
    try:
        from gen_ghostty_cffi import DEFAULT_OUT, generate
    finally:
        sys.path.pop(0)
    out = tmp_path / "_ghostty_cffi.py"
    generate(out)
    assert out.read_text() == DEFAULT_OUT.read_text(), "stale: run scripts/gen_ghostty_cffi.py"


def _run(code: str, *args: str) -> str:
    res = subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stderr
    return res.stdout.strip().splitlines()[-1]


_STATE = (
    "import sys, bandpass.engine.sandbox.ghostty as g; "
    "print('loaded' if g.is_loaded() or 'pyghostty._ffi' in sys.modules else 'not loaded')"
)


def test_importing_the_emulator_loads_nothing_until_a_screen_is_made() -> None:
    code = (
        "import bandpass.engine.sandbox.emulator, bandpass.engine.review.replay; "
        "import bandpass.tui.widgets.terminal_view; "
        f"{_STATE}; from bandpass.engine.sandbox.emulator import Screen; s = Screen(10, 2); s.feed('hi'); "
        f"assert s.lines()[0] == 'hi'; {_STATE}"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["not", "loaded", "loaded"]


_CLI = (
    "import sys\n"
    "sys.argv = ['bandpass', *sys.argv[1:]]\n"
    "from bandpass.tui.cli import main\n"
    "try:\n"
    "    main()\n"
    "except SystemExit as e:\n"
    "    assert not e.code, e.code\n"
    f"{_STATE}\n"
)


def test_episodes_lists_from_the_store_without_loading_the_orm(workspace: Workspace) -> None:
    """Nor docker-py: every command loads the reaper's module (its reporter), which must stay light."""
    eid = make_episode(workspace, task="listed-task")
    code = _CLI + "print('orm' if 'sqlalchemy' in sys.modules else 'plain', 'docker' in sys.modules)\n"
    res = subprocess.run(
        [sys.executable, "-c", code, "--workspace", str(workspace.root), "episodes"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert any(line.split()[:2] == [str(eid), "listed-task"] for line in out), out
    assert out[-1] == "plain False"


@pytest.mark.parametrize("args", [["--help"], ["episodes"], ["show", "{eid}"]], ids=lambda a: a[0])
def test_commands_that_show_no_screen_do_not_load_the_terminal_library(
    workspace: Workspace, args: list[str]
) -> None:
    eid = make_episode(workspace)
    argv = ["--workspace", str(workspace.root), *(a.format(eid=eid) for a in args)]
    assert _run(_CLI, *argv) == "not loaded"
