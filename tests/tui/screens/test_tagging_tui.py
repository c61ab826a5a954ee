"""Tag queue screen through the pilot: one-key tagging, confirmation, bulk, skip, undo, replay."""

from __future__ import annotations

import sqlite3
from typing import Any

import pytest
from textual.app import App
from textual.pilot import Pilot
from textual.widgets import Static

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.tagging import Tagger, load_queue
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.tag_dialog import TagDialog
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.widgets.virtual_table import VirtualTable
from tests.support.narrow import present
from tests.support.replay_data import make_episode
from tests.support.waiting import wait_for


class Host(App[None]):
    def __init__(self, ws: Workspace) -> None:
        super().__init__()
        self.ws = ws
        self.queue = TagQueueScreen(ws, tagger=Tagger(ws, author="pilot"))

    def on_mount(self) -> None:
        self.push_screen(self.queue)


async def press(pilot: Pilot[Any], screen: TagQueueScreen, *keys: str) -> None:
    """Presses the keys, then waits for the reload any of them started (the queue loads in a worker)."""
    await pilot.press(*keys)
    await pilot.pause()
    await wait_for(pilot, lambda: screen.settled, what="the queue's load")


def tags_of(ws: Workspace, eid: int) -> list[str]:
    with session(ws.engine) as s:
        return [f"{t.tag_class}.{t.subclass}" for t in q.tags_for_episode(s, eid)]


async def test_one_key_class_picker_and_next(workspace: Workspace) -> None:
    a = make_episode(workspace, task="t1")
    b = make_episode(workspace, task="t1", outcome="agent_error:turn_limit")
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        assert [i.episode_id for i in screen.items] == [a, b] and present(screen.current).episode_id == a
        await press(pilot, screen, "t", "3")  # the dialog, misalignment, then pick the subclass in the list
        dialog = app.screen
        assert isinstance(dialog, TagDialog) and dialog.tag_class == "misalignment"
        await press(pilot, screen, "down", "down")  # false_positive -> false_negative -> reward_hack
        assert dialog.code == "misalignment.reward_hack"
        await press(pilot, screen, "1")  # change of mind: invalidity
        assert dialog.code == "invalidity.underspecified_instruction"
        await press(pilot, screen, "enter")
        await pilot.pause()
        assert tags_of(workspace, a) == ["invalidity.underspecified_instruction"]
        assert present(screen.current).episode_id == b  # moved on to the next pending episode

        await press(pilot, screen, "a")  # the suggestion is preselected ...
        assert isinstance(app.screen, TagDialog) and app.screen.code == "harness.turn_limit"
        assert tags_of(workspace, b) == []  # ... but not written until confirmed
        await press(pilot, screen, "escape")
        assert tags_of(workspace, b) == []
        await press(pilot, screen, "a", "enter")
        await pilot.pause()
        assert tags_of(workspace, b) == ["harness.turn_limit"]
        with session(workspace.engine) as s:
            (tag,) = q.tags_for_episode(s, b)
        assert tag.author == "pilot" and tag.created_at is not None

        await press(pilot, screen, "u")
        assert tags_of(workspace, b) == []
        await press(pilot, screen, "u")
        assert tags_of(workspace, a) == []


async def test_bulk_tag_every_episode_failing_the_same_test(workspace: Workspace) -> None:
    same = [make_episode(workspace, task="t1", test="test_x") for _ in range(3)]
    other = make_episode(workspace, task="t1", test="test_y")
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        await press(pilot, screen, "S")
        assert screen.selected == set(same)
        await press(pilot, screen, "t", "2")
        assert "3 episodes" in str(app.screen.query_one("#tag-title", Static).content)
        await press(pilot, screen, "enter")
        await pilot.pause()
        assert all(tags_of(workspace, e) == ["harness.turn_limit"] for e in same)
        assert tags_of(workspace, other) == [] and screen.selected == set()
        await press(pilot, screen, "u")  # one undo reverses the whole bulk tag
        assert all(tags_of(workspace, e) == [] for e in same)

        # A hand-made selection with space.
        screen.query_one("#queue-table", VirtualTable).cursor_row = 0
        await press(pilot, screen, "space", "down", "down", "down", "space")
        assert screen.selected == {same[0], other}
        await press(pilot, screen, "escape")
        assert screen.selected == set()


async def test_skip_persists_filter_and_replay(workspace: Workspace) -> None:
    a = make_episode(workspace, task="t1")
    b = make_episode(workspace, task="t2")
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        await press(pilot, screen, "s")
        assert {i.episode_id: i.state for i in load_queue(workspace)} == {a: "skipped", b: "pending"}
        assert present(screen.current).episode_id == b
        await press(pilot, screen, "p")  # previous pending wraps to b itself: a is skipped
        assert present(screen.current).episode_id == b
        await press(pilot, screen, "f")  # all
        assert screen.filter == "all" and len(screen.items) == 2
        await press(pilot, screen, "f")  # tagged
        assert screen.items == []
        await press(pilot, screen, "f")  # skipped
        assert [i.episode_id for i in screen.items] == [a]
        await press(pilot, screen, "s")  # skip again on a skipped episode: unskip
        assert load_queue(workspace, states={"pending"})[0].episode_id == a
        await press(pilot, screen, "u")
        assert {i.episode_id for i in load_queue(workspace, states={"skipped"})} == {a}

        await press(pilot, screen, "f")  # pending
        await press(pilot, screen, "enter")
        replay = app.screen
        assert isinstance(replay, ReplayScreen)
        assert replay.source.episode_id == present(screen.current).episode_id
        await press(pilot, screen, "escape")
        assert app.screen is screen


async def test_clear_tag_from_the_queue(workspace: Workspace) -> None:
    a = make_episode(workspace)
    Tagger(workspace).tag(a, "invalidity.oracle_fails")
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        await press(pilot, screen, "f")  # all
        assert present(screen.current).tags == ["invalidity.oracle_fails"]
        await press(pilot, screen, "c")
        assert tags_of(workspace, a) == []
        with session(workspace.engine) as s:
            assert q.task_rows(s)[0].blocking_tags == 0
        await press(pilot, screen, "u")
        assert tags_of(workspace, a) == ["invalidity.oracle_fails"]


async def test_the_queue_loads_in_a_worker_with_a_loading_state(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The store is read off the UI thread: while the read is held back the screen says it is loading and
    still answers keys; the rows arrive when the worker hands them over. A failed read is a notification."""
    import threading

    import bandpass.tui.screens.tag_queue as tq

    a = make_episode(workspace, task="t1")
    release = threading.Event()
    real = tq.read_queue

    def held(*args: Any, **kw: Any) -> tq.QueueLoad:
        release.wait(30)
        return real(*args, **kw)

    monkeypatch.setattr(tq, "read_queue", held)
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        table = screen.query_one("#queue-table", VirtualTable)
        await wait_for(pilot, lambda: screen.reloading, what="the load to start")
        assert screen.status_text() == "loading the queue…" and table.loading and not screen.settled
        assert str(screen.query_one("#queue-info", Static).content) == "loading the queue…"
        await pilot.press("k")  # the UI thread is free: keys are handled during the load
        assert screen.cluster_view
        await pilot.press("k")
        release.set()
        await wait_for(pilot, lambda: screen.settled, what="the queue's load")
        assert [i.episode_id for i in screen.items] == [a] and not table.loading
        assert screen.last_load_s is not None and screen.has_focus_within and table.has_focus

        def boom(*_: object) -> None:  # a database that cannot be read (a bug: an unexpected error)
            raise sqlite3.OperationalError("database is on fire")

        monkeypatch.setattr(tq, "read_queue", boom)
        await pilot.press("r")
        await wait_for(pilot, lambda: screen.settled, what="the failed reload")
        assert any("on fire" in str(n.message) for n in app._notifications)
        assert [i.episode_id for i in screen.items] == [a]  # the last rows stay


async def test_detail_shows_who_ended_the_sandbox_as_show_does(workspace: Workspace) -> None:
    """The attribution's why line (who, and the engine's evidence: exit code, OOMKilled, kill signal) is in
    the queue's detail pane, as ``bandpass show`` prints it."""
    from bandpass.engine.app.reads import episode_evidence
    from bandpass.engine.sandbox.attribution import Evidence, attribute

    def ended(outcome: str, **kw: object) -> int:
        eid = make_episode(workspace, task="t1", outcome=outcome)
        ev = Evidence(memory_limit_mb=256, pids_limit=512, agent_started=True, **kw)  # type: ignore[arg-type]
        verdict = attribute(ev)
        assert verdict.outcome == outcome
        ev.verdict = {"outcome": verdict.outcome, "by": verdict.by, "why": verdict.why}
        with session(workspace.engine) as s:
            q.set_episode_evidence(s, eid, ev.as_dict())
        return eid

    oom = ended(
        "agent_error:oom",
        status="exited",
        exit_code=137,
        oom_killed=True,
        events=[{"action": "oom", "t": 1.0}, {"action": "die", "t": 1.1, "exit_code": 137}],
    )
    outside = ended(
        "infra_error:container_died",
        status="exited",
        exit_code=137,
        events=[{"action": "kill", "t": 2.0, "signal": 9}, {"action": "die", "t": 2.1, "exit_code": 137}],
    )
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        await wait_for(pilot, lambda: screen.settled, what="the queue's load")
        info = screen.query_one("#queue-info", Static)
        assert present(screen.current).episode_id == oom
        text = str(info.content)
        assert (
            "who ended the sandbox: policy: the container was killed for memory under the task's own " in text
        )
        assert "evidence: container exited 137 · OOMKilled · engine: oom, die(exit 137)" in text
        assert episode_evidence(workspace, oom)["summary"] in text  # the same line `bandpass show` prints
        await pilot.press("n")
        await wait_for(pilot, lambda: present(screen.current).episode_id == outside, what="the next pending")
        text = str(info.content)
        assert "who ended the sandbox: outside: the container was killed from outside" in text
        assert "engine: kill(signal 9), die(exit 137)" in text
