"""What follows an episode's end, as the application wires it (engine/app/episode_hooks.py) onto the
runner's moments (engine/run/hooks.py): the diagnosis stored before anyone hears the episode ended, the
search index fed as a batch runs, a broken listener costing nothing but itself, and the ``bandpass``
command wiring all of it in a process of its own (no test set-up helping)."""

from __future__ import annotations

import os
import sqlite3
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandpass.engine.app import episode_hooks
from bandpass.engine.core.events import EpisodeFinished, Event, EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run import hooks
from bandpass.engine.run.agents.builtin import OracleAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.footprints import footprints_known
from tests.support.taskfactory import make_task

pytestmark = pytest.mark.docker

BASE = "FROM bandpass/base:bookworm\nWORKDIR /app\n"


@pytest.fixture
def version(workspace: Workspace, tmp_path: Path) -> int:
    assert import_paths(workspace, [make_task(tmp_path / "src", "answer", dockerfile=BASE)]).ok
    with session(workspace.engine) as s:
        return queries.task_rows(s)[0].version_id


@pytest.fixture
def broken_hook_first() -> Iterator[list[int]]:
    """A hook that raises, wired before the diagnosis; it records the episodes it was called for."""
    called: list[int] = []

    def broken(ws: Workspace, episode_id: int) -> None:
        called.append(episode_id)
        raise RuntimeError("a listener with a bug")

    hooks.remove(episode_hooks.DIAGNOSIS)
    hooks.on_episode_end("test-broken", broken)
    episode_hooks.install()  # the diagnosis again, now after the broken one
    try:
        yield called
    finally:
        hooks.remove("test-broken")


def _diagnosis_code(ws: Workspace, episode_id: int) -> str | None:
    with sqlite3.connect(ws.db_path) as con:
        row = con.execute("SELECT code FROM diagnosis WHERE episode_id = ?", (episode_id,)).fetchone()
    return row[0] if row else None


def test_the_diagnosis_is_stored_before_the_end_is_heard_and_a_broken_hook_changes_nothing(
    workspace: Workspace, version: int, broken_hook_first: list[int]
) -> None:
    ws = workspace
    bus = EventBus()
    heard: dict[int, str | None] = {}

    def on_finished(ev: Event) -> None:
        assert isinstance(ev, EpisodeFinished) and ev.episode_id is not None
        heard[ev.episode_id] = _diagnosis_code(ws, ev.episode_id)  # what a screen reads as it hears it

    bus.subscribe(EpisodeFinished, on_finished)
    res = run_episode(ws, version, OracleAgent, bus=bus, max_infra_retries=0)

    assert res.outcome == "passed", res.detail  # the broken hook did not touch the outcome
    assert broken_hook_first == [res.episode_id]  # it was called, and raised
    assert heard == {res.episode_id: "policy.passed"}  # the diagnosis after it still ran, before the event


def test_the_bandpass_command_diagnoses_and_indexes_what_it_runs(workspace: Workspace, version: int) -> None:
    """A fresh process, as a curator starts it: nothing but the command itself wires the hooks."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYTEST")}
    footprints_known(workspace)  # the one episode in the store is the batch's
    proc = subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(workspace.root), "run", "--agent", "oracle"]
        + ["--k", "1", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
    )
    assert proc.returncode == 0, proc.stderr
    with sqlite3.connect(workspace.db_path) as con:
        ((eid, outcome),) = con.execute("SELECT id, outcome FROM episode").fetchall()
        indexed = con.execute("SELECT count(*) FROM search_state WHERE episode_id = ?", (eid,)).fetchone()[0]
    assert outcome == "passed", proc.stdout
    assert _diagnosis_code(workspace, eid) == "policy.passed"  # diagnosed as it ended
    assert indexed == 1  # and searchable without `bandpass search` indexing it first
