"""Tag queue screen through the pilot: one-key tagging, confirmation, bulk, skip, undo, replay."""

from __future__ import annotations

from textual.app import App

from engine.core.workspace import Workspace
from engine.review.tagging import Tagger, load_queue
from store import queries as q
from store.db import session
from tests._replay_data import make_episode
from tui.screens.replay import ReplayScreen
from tui.screens.tag_dialog import TagDialog
from tui.screens.tag_queue import TagQueueScreen
from tui.widgets.virtual_table import VirtualTable


class Host(App[None]):
    def __init__(self, ws: Workspace) -> None:
        super().__init__()
        self.ws = ws
        self.queue = TagQueueScreen(ws, tagger=Tagger(ws, author="pilot"))

    def on_mount(self) -> None:
        self.push_screen(self.queue)


def tags_of(ws: Workspace, eid: int) -> list[str]:
    with session(ws.engine) as s:
        return [f"{t.tag_class}.{t.subclass}" for t in q.tags_for_episode(s, eid)]


async def test_one_key_class_picker_and_next(workspace: Workspace) -> None:
    a = make_episode(workspace, task="t1")
    b = make_episode(workspace, task="t1", outcome="agent_error:turn_limit")
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        assert [i.episode_id for i in screen.items] == [a, b] and screen.current.episode_id == a
        await pilot.press("t", "3")  # the dialog, misalignment, then pick the subclass in the list
        dialog = app.screen
        assert isinstance(dialog, TagDialog) and dialog.tag_class == "misalignment"
        await pilot.press("down", "down")  # false_positive -> false_negative -> reward_hack
        assert dialog.code == "misalignment.reward_hack"
        await pilot.press("1")  # change of mind: invalidity
        assert dialog.code == "invalidity.underspecified_instruction"
        await pilot.press("enter")
        await pilot.pause()
        assert tags_of(workspace, a) == ["invalidity.underspecified_instruction"]
        assert screen.current.episode_id == b  # moved on to the next pending episode

        await pilot.press("a")  # the suggestion is preselected ...
        assert isinstance(app.screen, TagDialog) and app.screen.code == "harness.turn_limit"
        assert tags_of(workspace, b) == []  # ... but not written until confirmed
        await pilot.press("escape")
        assert tags_of(workspace, b) == []
        await pilot.press("a", "enter")
        await pilot.pause()
        assert tags_of(workspace, b) == ["harness.turn_limit"]
        with session(workspace.engine) as s:
            (tag,) = q.tags_for_episode(s, b)
        assert tag.author == "pilot" and tag.created_at is not None

        await pilot.press("u")
        assert tags_of(workspace, b) == []
        await pilot.press("u")
        assert tags_of(workspace, a) == []


async def test_bulk_tag_every_episode_failing_the_same_test(workspace: Workspace) -> None:
    same = [make_episode(workspace, task="t1", test="test_x") for _ in range(3)]
    other = make_episode(workspace, task="t1", test="test_y")
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        await pilot.press("S")
        assert screen.selected == set(same)
        await pilot.press("t", "2")
        assert "3 episodes" in str(app.screen.query_one("#tag-title").content)
        await pilot.press("enter")
        await pilot.pause()
        assert all(tags_of(workspace, e) == ["harness.turn_limit"] for e in same)
        assert tags_of(workspace, other) == [] and screen.selected == set()
        await pilot.press("u")  # one undo reverses the whole bulk tag
        assert all(tags_of(workspace, e) == [] for e in same)

        # A hand-made selection with space.
        screen.query_one("#queue-table", VirtualTable).cursor_row = 0
        await pilot.press("space", "down", "down", "down", "space")
        assert screen.selected == {same[0], other}
        await pilot.press("escape")
        assert screen.selected == set()


async def test_skip_persists_filter_and_replay(workspace: Workspace) -> None:
    a = make_episode(workspace, task="t1")
    b = make_episode(workspace, task="t2")
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        await pilot.press("s")
        assert {i.episode_id: i.state for i in load_queue(workspace)} == {a: "skipped", b: "pending"}
        assert screen.current.episode_id == b
        await pilot.press("p")  # previous pending wraps to b itself: a is skipped
        assert screen.current.episode_id == b
        await pilot.press("f")  # all
        assert screen.filter == "all" and len(screen.items) == 2
        await pilot.press("f")  # tagged
        assert screen.items == []
        await pilot.press("f")  # skipped
        assert [i.episode_id for i in screen.items] == [a]
        await pilot.press("s")  # skip again on a skipped episode: unskip
        assert load_queue(workspace, states={"pending"})[0].episode_id == a
        await pilot.press("u")
        assert {i.episode_id for i in load_queue(workspace, states={"skipped"})} == {a}

        await pilot.press("f")  # pending
        await pilot.press("enter")
        assert (
            isinstance(app.screen, ReplayScreen) and app.screen.source.episode_id == screen.current.episode_id
        )
        await pilot.press("escape")
        assert app.screen is screen


async def test_clear_tag_from_the_queue(workspace: Workspace) -> None:
    a = make_episode(workspace)
    Tagger(workspace).tag(a, "invalidity.oracle_fails")
    app = Host(workspace)
    async with app.run_test(size=(160, 45)) as pilot:
        screen = app.queue
        await pilot.press("f")  # all
        assert screen.current.tags == ["invalidity.oracle_fails"]
        await pilot.press("c")
        assert tags_of(workspace, a) == []
        with session(workspace.engine) as s:
            assert q.task_rows(s)[0].blocking_tags == 0
        await pilot.press("u")
        assert tags_of(workspace, a) == ["invalidity.oracle_fails"]


async def test_detail_shows_who_ended_the_sandbox_as_show_does(workspace: Workspace) -> None:
    """The attribution's why line (who, and the engine's evidence: exit code, OOMKilled, kill signal) is in
    the queue's detail pane, as ``bandpass show`` prints it."""
    from engine.sandbox.attribution import Evidence, attribute, episode_evidence

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
        info = screen.query_one("#queue-info")
        assert screen.current.episode_id == oom
        text = str(info.content)
        assert (
            "who ended the sandbox: policy: the container was killed for memory under the task's own " in text
        )
        assert "evidence: container exited 137 · OOMKilled · engine: oom, die(exit 137)" in text
        assert episode_evidence(workspace, oom)["summary"] in text  # the same line `bandpass show` prints
        await pilot.press("n")
        assert screen.current.episode_id == outside
        text = str(info.content)
        assert "who ended the sandbox: outside: the container was killed from outside" in text
        assert "engine: kill(signal 9), die(exit 137)" in text
