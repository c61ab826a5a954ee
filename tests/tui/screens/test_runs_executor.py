"""The Runs screen's executor choice and its view of other processes' batches (issue #23).

* local or Ray, Ray's address from ``bandpass.toml``'s ``[ray]``: a Ray batch started from the screen runs
  on the Ray instance (its episode records the node); Ray missing or an address where nothing listens is
  one red line under the bar, the UI keeps running (the connection is tried in a worker) and nothing is
  queued;
* a batch started by another process (the real ``bandpass run`` CLI, or the real planning and queue
  functions) appears in the screen's batch table with its executor, done/total and outcomes, updated from
  the store as it runs;
* and its episodes running on this host get live panes: the recordings the CLI writes are tailed into
  the app's bus, so a pane shows the episode's output while it runs and its outcome when it ends.

Every wait is for a condition (``tests.support.waiting.wait_for``), never a fixed time.
"""

from __future__ import annotations

import logging
import os
import socket
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Button, RichLog, Select, Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.rollouts import plan_batch
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import pk
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.runs import RunsScreen
from bandpass.tui.widgets.batch_watch import BatchWatch
from bandpass.tui.widgets.episode_pane import EpisodePane
from tests.support.footprints import footprints_known
from tests.support.narrow import present
from tests.support.paths import REPO
from tests.support.taskfactory import SOUND_TEST, make_task
from tests.support.waiting import start_batch, wait_for


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ws_with_task(root: Path, src: Path, config: str = "") -> Workspace:
    ws = Workspace.open(root)
    if config:
        ws.config_path.write_text(config)
        ws = Workspace.open(root)
    assert import_paths(ws, [make_task(src, "tiny")]).ok
    footprints_known(ws)  # the batch's own episodes are the ones followed
    return ws


def _version_ids(ws: Workspace) -> list[int]:
    with session(ws.engine) as s:
        return [r.version_id for r in queries.task_rows(s)]


def _batches(ws: Workspace) -> list[Any]:
    with session(ws.engine) as s:
        return queries.batches(s)


async def _open_runs(pilot: Any) -> RunsScreen:
    await pilot.press("2")
    await wait_for(pilot, lambda: isinstance(pilot.app.screen, RunsScreen), what="the Runs screen")
    runs = pilot.app.screen
    assert isinstance(runs, RunsScreen)
    runs.query_one("#runs-scope", Select).value = "all"
    return runs


def _error_line(runs: RunsScreen) -> str:
    line = runs.query_one("#runs-error", Static)
    return str(line.render()) if line.display else ""


# --- the choice, and its error path ---------------------------------------------------------------------


async def test_ray_address_where_nothing_listens_is_one_red_line_and_nothing_is_queued(
    tmp_path: Path,
) -> None:
    port = _free_port()  # bound then released: nothing listens there
    ws = _ws_with_task(tmp_path / "ws", tmp_path / "src", f'[ray]\naddress = "127.0.0.1:{port}"\n')
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=(160, 45)) as pilot:
        runs = await _open_runs(pilot)
        choice = runs.query_one("#runs-executor", Select)
        assert [str(label) for label, _ in choice._options if _ != Select.BLANK] == [
            "local Docker",
            f"Ray: 127.0.0.1:{port}",
        ]
        choice.value = "ray"
        await start_batch(pilot)
        await wait_for(pilot, lambda: _error_line(runs), 60, what="the error line")
        line = _error_line(runs)
        assert f"cannot connect to the Ray cluster at 127.0.0.1:{port}" in line, line
        assert "nothing was queued" in line
        start = runs.query_one("#runs-start", Button)
        await wait_for(pilot, lambda: not start.disabled, what="Start enabled again")
        # the UI kept running: the screen still answers keys (steps panel toggles)
        side = runs.query_one("#runs-side")
        await pilot.press("l")
        await wait_for(pilot, lambda: not side.display, what="the steps panel hidden")
        # a later local batch clears the line
        choice.value = "local"
        runs.show_error("")
        assert not runs.query_one("#runs-error").display
    assert _batches(ws) == []


async def test_ray_not_installed_is_one_red_line(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` raises ImportError, as without the extra
    ws = _ws_with_task(tmp_path / "ws", tmp_path / "src")
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=(160, 45)) as pilot:
        runs = await _open_runs(pilot)
        runs.query_one("#runs-executor", Select).value = "ray"
        await start_batch(pilot)
        await wait_for(pilot, lambda: _error_line(runs), what="the error line")
        assert "the ray executor needs Ray: pip install 'bandpass[cluster]'" in _error_line(runs)
        assert "nothing was queued" in _error_line(runs)
    assert _batches(ws) == []


@pytest.fixture
def local_ray() -> Iterator[Any]:
    """A Ray instance in this process (its workers are separate processes), shut down after the test."""
    import ray

    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    ray.init(num_cpus=1, include_dashboard=False, log_to_driver=False, logging_level=logging.WARNING)
    try:
        yield ray
    finally:
        ray.shutdown()


@pytest.mark.docker
async def test_a_batch_started_on_ray_runs_there(local_ray: Any, tmp_path: Path) -> None:
    ws = _ws_with_task(tmp_path / "ws", tmp_path / "src")
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=(160, 45)) as pilot:
        runs = await _open_runs(pilot)
        runs.query_one("#runs-executor", Select).value = "ray"
        await start_batch(pilot)
        await wait_for(pilot, lambda: runs.batch_id, 60, what="the batch planned")
        start = runs.query_one("#runs-start", Button)
        await wait_for(pilot, lambda: not start.disabled, 300, what="the batch finished")
        counters = str(runs.query_one("#runs-counters", Static).render())
        assert "(ray)" in counters and "1/1 done" in counters and "passed 1" in counters, counters
        assert not _error_line(runs)
    (batch,) = _batches(ws)
    assert batch.executor == "ray"
    with session(ws.engine) as s:
        (ep,) = queries.episodes(s, batch_id=batch.id)
    assert ep.outcome == "passed" and ep.node_id == local_ray.get_runtime_context().get_node_id()


# --- batches other processes run -------------------------------------------------------------------------


async def test_batch_table_follows_a_batch_run_through_the_queue_elsewhere(tmp_path: Path) -> None:
    """Rows written the way ``bandpass run`` writes them (plan_batch, then claim and finish through the
    queue's own functions), by code that is not the screen: the table shows them and their progress."""
    ws = _ws_with_task(tmp_path / "ws", tmp_path / "src")
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=(200, 45)) as pilot:
        runs = await _open_runs(pilot)
        watch = runs.query_one("#runs-watch", BatchWatch)
        assert not watch.display  # nothing to follow yet
        bid = plan_batch(ws, "oracle", _version_ids(ws), 3, kind="builtin")
        await wait_for(pilot, lambda: watch.cells(bid), what="the planned batch in the table")
        row = watch.cells(bid)
        assert watch.display
        assert (row["agent"], row["executor"], row["done"]) == ("oracle", "not started", "0/3")
        assert row["state"] == "0 running, 3 queued"
        with session(ws.engine) as s:
            queries.set_batch_executor(s, bid, "ray")
            first = queries.claim_next_episode(s, bid)
            second = queries.claim_next_episode(s, bid)
        assert first is not None and second is not None
        with session(ws.engine) as s:
            queries.finish_episode(s, pk(first), outcome="passed", reward=1.0)
        await wait_for(pilot, lambda: watch.cells(bid)["done"] == "1/3", what="one episode done")
        row = watch.cells(bid)
        assert row["executor"] == "ray" and row["state"] == "1 running, 1 queued"
        assert row["outcomes"] == "passed 1 · failed 0 · agent err 0 · infra 0"
        with session(ws.engine) as s:
            queries.finish_episode(
                s,
                pk(second),
                outcome="infra_error:orchestrator_failure",
                reward=None,
            )
            third = queries.claim_next_episode(s, bid)
            assert third is not None
            queries.finish_episode(s, pk(third), outcome="failed", reward=0.0)
        await wait_for(pilot, lambda: watch.cells(bid)["state"] == "done", what="the batch done")
        row = watch.cells(bid)
        assert row["done"] == "3/3" and row["outcomes"] == "passed 1 · failed 1 · agent err 0 · infra 1"


@pytest.mark.docker
async def test_batch_table_follows_a_cli_batch_from_another_process(tmp_path: Path) -> None:
    """Each oracle episode of the CLI's batch waits for a file the test creates in its container, so the
    table is seen showing an episode running however fast the machine is (a nop episode of two seconds
    once ended between two looks), and the test lets them go one by one."""
    import docker

    ws = Workspace.open(tmp_path / "ws")
    task = make_task(tmp_path / "src", "gated", solve=CHATTY_SOLVE, test=CHATTY_TEST)
    assert import_paths(ws, [task]).ok
    footprints_known(ws)
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=(200, 45)) as pilot:
        runs = await _open_runs(pilot)
        watch = runs.query_one("#runs-watch", BatchWatch)
        cli = subprocess.Popen(
            [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), "run", "--agent", "oracle",
             "--k", "2", "-j", "1", "--json"],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "BANDPASS_WARM_POOL": "0"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        client = docker.from_env()
        try:
            await wait_for(pilot, lambda: watch.row_count == 1, 120, what="the CLI's batch in the table")
            (bid,) = [b.id for b in _batches(ws)]
            for released in range(2):

                def running_now(n: int = released) -> bool:
                    cells = watch.cells(bid)
                    local = cells["executor"] == "local"
                    return local and "1 running" in cells["state"] and cells["done"] == f"{n}/2"

                # its progress while it runs: an episode running on this machine's engine
                what = f"episode {released + 1} of the CLI's batch running"
                await wait_for(pilot, running_now, 240, what=what)
                with session(ws.engine) as s:
                    (running,) = [e for e in queries.episodes(s, batch_id=bid) if e.status == "running"]

                def boxes(eid: int | None = running.id) -> list[Any]:
                    found: list[Any] = client.containers.list(
                        filters={"label": [f"bandpass.episode={eid}", "bandpass.role=agent"]}
                    )
                    return found

                await wait_for(pilot, boxes, 240, what="the running episode's container")
                (box,) = boxes()
                assert box.exec_run(["touch", "/tmp/go"]).exit_code == 0
            await wait_for(
                pilot, lambda: watch.cells(bid)["state"] == "done", 300, what="the CLI's batch done"
            )
            row = watch.cells(bid)
            assert (
                row["done"] == "2/2" and row["outcomes"] == "passed 2 · failed 0 · agent err 0 · infra 0"
            ), row
            out, err = cli.communicate(timeout=120)
            assert cli.returncode == 0, err
        finally:
            cli.kill()
            cli.wait(30)
            client.close()
        assert runs.batch_id is None  # the screen started nothing itself


#: The oracle's solution prints a line only its output can contain (the typed script has ``$((6*7))``),
#: then waits for a file the test creates in its container: the pane is seen while the episode runs.
CHATTY_SOLVE = (
    "#!/bin/bash\necho FOLLOW-$((6*7))-ME\n"
    "until [ -e /tmp/go ]; do sleep 0.1; done\necho 42 > /app/answer.txt\n"
)
CHATTY_TEST = SOUND_TEST + 'echo "VERIFIER-$((6*7))-SAYS"\n'


def _text(view: Any) -> str:
    return "\n".join(view.emulator.lines())


@pytest.mark.docker
async def test_live_panes_follow_a_cli_batch_from_another_process(tmp_path: Path) -> None:
    import docker

    ws = Workspace.open(tmp_path / "ws")
    task = make_task(tmp_path / "src", "chatty", solve=CHATTY_SOLVE, test=CHATTY_TEST)
    assert import_paths(ws, [task]).ok
    footprints_known(ws)  # the first pane is the batch's episode, not the footprint's oracle
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=(200, 45)) as pilot:
        runs = await _open_runs(pilot)
        cli = subprocess.Popen(
            [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), "run", "--agent", "oracle",
             "--k", "1", "-j", "1", "--json"],
            cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO), "BANDPASS_WARM_POOL": "0"},
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        )  # fmt: skip
        client = docker.from_env()
        try:
            await wait_for(pilot, lambda: runs.query(EpisodePane), 240, what="a pane for the CLI's episode")
            (pane,) = runs.query(EpisodePane)
            eid = pane.live.episode_id
            assert eid in runs.follower.following and "chatty" in str(pane.title_bar.render())
            await wait_for(
                pilot, lambda: "FOLLOW-42-ME" in _text(pane.agent_view), 240, what="the solution's output"
            )
            # shown live: the solution is still waiting for /tmp/go, so the episode cannot have ended
            assert pane.live.status == "running" and pane.has_class("-running")
            with session(ws.engine) as s:
                assert present(queries.get_episode(s, eid)).status == "running"
            (box,) = client.containers.list(
                filters={
                    "label": [
                        f"bandpass.episode={eid}",
                        f"bandpass.workspace={ws.root}",
                        "bandpass.role=agent",  # not the clean room started beside it
                    ]
                }
            )
            assert box.exec_run(["touch", "/tmp/go"]).exit_code == 0
            await wait_for(pilot, lambda: pane.has_class("-passed"), 240, what="the pane's outcome")
            assert pane.live.outcome == "passed" and "passed" in str(pane.title_bar.render())
            await wait_for(
                pilot,
                lambda: pane.verifier_view.display and "VERIFIER-42-SAYS" in _text(pane.verifier_view),
                what="the verifier's output",
            )
            assert runs.follower.following == []
            # its step (from the store) in the steps panel, as for the screen's own episodes
            pane.agent_view.focus()
            steps = runs.query_one("#runs-steps", RichLog)
            await wait_for(
                pilot, lambda: any("FOLLOW-$((6*7))-ME" in line.text for line in steps.lines), what="its step"
            )
            out, err = cli.communicate(timeout=120)
            assert cli.returncode == 0, err
            # a batch seen done is read one last time, then no longer polled
            await wait_for(pilot, lambda: not runs.follower.batches, what="the finished batch dropped")
        finally:
            cli.kill()
            cli.wait(30)
            client.close()
        assert runs.batch_id is None  # the screen started nothing itself
        assert len(runs.query(EpisodePane)) == 1  # one pane: the episode was never shown twice
    assert runs.follower.stopped  # the app closed: nothing follows any more
