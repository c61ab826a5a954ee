"""The CLI's rough edges, as a new user hit them: every bad input is one line naming what is wrong (and
what exists), nothing is half-done, and nothing is written where the user did not ask.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from tests.support.paths import REPO
from tests.support.replay_data import make_episode, write_cast
from tests.support.waiting import wait_for


def bp(root: Path, *args: str, cwd: Path = REPO) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(root), *args],
        cwd=cwd,
        env={**os.environ, "PYTHONPATH": str(REPO), "DOCKER_HOST": "unix:///nonexistent/docker.sock"},
        capture_output=True,
        text=True,
        stdin=subprocess.DEVNULL,
        timeout=120,
    )


def one_line_error(res: subprocess.CompletedProcess[str], *fragments: str) -> None:
    assert res.returncode == 1, res.stdout + res.stderr
    assert res.stderr.count("\n") == 1 and res.stderr.startswith("bandpass: error: "), res.stderr
    assert "Traceback" not in res.stderr
    for f in fragments:
        assert f in res.stderr, res.stderr


@pytest.fixture
def ws(workspace: Workspace) -> Workspace:
    make_episode(workspace, task="alpha", test="test_x")
    make_episode(workspace, task="alpha", outcome="agent_error:turn_limit")
    return workspace


@pytest.mark.slow
def test_unknown_ids_are_errors_everywhere(ws: Workspace) -> None:
    root = ws.root
    one_line_error(bp(root, "queue", "--cluster", "deadbeef"), "--cluster deadbeef: no failure cluster")
    one_line_error(bp(root, "queue", "--task", "nosuch"), "--task nosuch: no such task (tasks: alpha)")
    one_line_error(bp(root, "queue", "--agent", "zed"), "--agent zed: no episodes of this agent", "m1")
    one_line_error(bp(root, "queue", "--outcome", "bogus"), "--outcome bogus: not an outcome")
    one_line_error(bp(root, "episodes", "--task", "nosuch"), "no such task")
    one_line_error(bp(root, "episodes", "--batch", "b-none"), "--batch b-none: no such batch")
    one_line_error(bp(root, "clusters", "--task", "nosuch"), "no such task")
    one_line_error(bp(root, "reviews", "9999"), "no such episode: 9999")
    one_line_error(bp(root, "review-accept", "9999"), "episode 9999 does not exist")
    # the same filters, when they name what exists, answer as before
    assert bp(root, "queue", "--task", "alpha", "--outcome", "agent_error").returncode == 0
    assert bp(root, "episodes", "--agent", "m1").returncode == 0


def test_empty_lists_say_so(workspace: Workspace) -> None:
    res = bp(workspace.root, "batches")
    assert res.returncode == 0 and res.stdout.startswith("no batches yet")
    res = bp(workspace.root, "reviews")
    assert res.returncode == 0 and res.stdout.startswith("no reviews of this workspace yet")


def test_export_errors_name_what_the_user_gave(ws: Workspace, tmp_path: Path) -> None:
    res = bp(ws.root, "export", "--model", "m1", "--out", "/proc/nope")
    one_line_error(res, "--out /proc/nope: cannot write there")
    assert ".partial" not in res.stderr  # the scratch folder is ours, not the user's business
    res = bp(ws.root, "export", "--model", "m1", "--out", str(tmp_path / "x"), "--format", "parquet")
    one_line_error(res, "got 'parquet' (Parquet rows: verl and skyrl)")
    assert "('parquet',)" not in res.stderr


def test_gc_dry_run_removes_nothing_and_says_would(ws: Workspace) -> None:
    res = bp(ws.root, "gc", "--workspace", str(ws.root), "--dry-run")
    assert res.returncode == 0 and "would remove 0 containers" in res.stdout
    assert "removed" not in res.stdout


def test_replay_without_a_terminal_refuses_in_one_line(ws: Workspace) -> None:
    res = bp(ws.root, "replay", "1")  # stdin and stdout are pipes here
    one_line_error(res, "needs a terminal", "--print-at")
    assert "\x1b[" not in res.stdout + res.stderr  # no escape codes written into the pipe
    assert bp(ws.root, "replay", "1", "--print-at", "0").returncode == 0


async def test_a_bare_casts_index_lives_in_the_workspace(ws: Workspace, tmp_path: Path) -> None:
    """Replaying a cast from outside the workspace writes nothing beside it: its keyframe index goes to
    the workspace's cache/keyframes/ (the casts the workspace recorded keep theirs beside them)."""
    from bandpass.tui.app import BandpassApp
    from bandpass.tui.screens.replay import ReplayScreen

    mine = tmp_path / "mine"
    mine.mkdir()
    cast = mine / "session.cast"
    write_cast(cast, [(0.1 * i, "o", f"line {i}\r\n") for i in range(50)])
    app = BandpassApp(ws, bus=EventBus(), show_path=False)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = ReplayScreen(ws, cast_path=cast)
        await app.push_screen(screen)
        await wait_for(pilot, lambda: screen.player is not None and screen.player.index.complete)
        cache = ws.root / "cache" / "keyframes"
        await wait_for(pilot, lambda: cache.is_dir() and any(cache.glob("session.cast.*.kfi")), what="index")
    assert sorted(p.name for p in mine.iterdir()) == ["session.cast"]  # nothing beside the user's file


def test_tasks_columns_stay_aligned_with_a_long_imported_name(ws: Workspace) -> None:
    """World tasks have long names (``org/some-very-long-task-name``): the name column widens for them
    instead of every later field shifting on that row."""
    long = "terminal-bench/a-rather-long-imported-task-name-of-52"
    make_episode(ws, task=long)
    res = bp(ws.root, "tasks")
    assert res.returncode == 0, res.stderr
    header, *rows = [line for line in res.stdout.splitlines() if line and not line.startswith("(")]
    assert sorted(r.split()[0] for r in rows) == ["alpha", long], res.stdout
    col = header.index("version")
    for r in rows:
        version = r[col : col + 12]
        assert r[col - 1] == " " and len(version.strip()) == 12 and " " not in version, (header, r)
