"""The diagnosis in the TUI, through Textual's pilot: the tag queue's cluster view, filters and keys, the
Replay header and evidence, wide casts, and the Episodes screen with its two-episode compare."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import text
from textual.pilot import Pilot
from textual.widgets import DataTable, Input, Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.tagging import Tagger
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.compare import CompareScreen
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.tag_dialog import TagDialog
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.screens.tasks import TasksScreen
from bandpass.tui.widgets.terminal_view import TerminalView
from tests.support.host import Host
from tests.support.narrow import present
from tests.support.replay_data import make_episode, make_loop_episode, write_cast
from tests.support.waiting import wait_for, wait_for_screen


def tags_of(ws: Workspace, eid: int) -> list[str]:
    with session(ws.engine) as s:
        return [f"{t.tag_class}.{t.subclass}" for t in q.tags_for_episode(s, eid)]


async def press(pilot: Pilot[Any], screen: TagQueueScreen, *keys: str) -> None:
    """Presses the keys, then waits for the reload any of them started (the queue loads in a worker)."""
    await pilot.press(*keys)
    await pilot.pause()
    await wait_for(pilot, lambda: screen.settled, what="the queue's load")


async def test_cluster_view_tags_a_whole_signature_in_one_undoable_step(workspace: Workspace) -> None:
    same = [make_episode(workspace, task="t1", test="test_x") for _ in range(3)]
    other = make_episode(workspace, task="t1", test="test_y")
    probe = make_episode(workspace, task="t1", agent="oracle", test="test_x")
    screen = TagQueueScreen(workspace, tagger=Tagger(workspace, author="pilot"))
    app = Host(screen)
    async with app.run_test(size=(170, 45)) as pilot:
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        assert probe not in [i.episode_id for i in screen.items]  # the audit's probe is hidden ...
        assert "audit probes hidden" in screen.status_text()
        await press(pilot, screen, "k")
        assert [len(c.items) for c in screen.clusters] == [3, 1]
        info = str(screen.query_one("#queue-info", Static).content)
        assert (
            f"cluster {present(screen.current_cluster).id} of 3 · 3 pending" in info
            and "checks:tests/test_outputs.py::test_x" in info
        )
        await press(pilot, screen, "t", "2")  # one tag for the cluster's untagged members
        assert isinstance(app.screen, TagDialog) and "3 untagged members of cluster" in str(
            app.screen.query_one("#tag-title", Static).content
        )
        await press(pilot, screen, "enter")
        await wait_for(
            pilot, lambda: all(tags_of(workspace, e) == ["harness.turn_limit"] for e in same), what="tags"
        )
        assert tags_of(workspace, other) == []
        await press(pilot, screen, "u")  # one undo for the whole cluster
        assert all(tags_of(workspace, e) == [] for e in same)

        await press(pilot, screen, "enter")  # a cluster lists its members
        assert not screen.cluster_view and [i.episode_id for i in screen.items] == same
        await press(pilot, screen, "escape")  # back to the clusters
        assert screen.cluster_view
        await press(pilot, screen, "escape", "P")  # ... and to the list; P shows the probes
        assert probe in [i.episode_id for i in screen.items]


async def test_queue_filters_and_signature_selection(workspace: Workspace) -> None:
    a = make_episode(workspace, task="t1", test="test_x", agent="m1")
    b = make_episode(workspace, task="t1", test="test_x", agent="m2")
    c = make_episode(workspace, task="t1", test="test_y", agent="m1")
    d = make_episode(workspace, task="t2", outcome="agent_error:turn_limit", agent="m1")
    screen = TagQueueScreen(workspace)
    async with Host(screen).run_test(size=(170, 45)) as pilot:
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        await press(pilot, screen, "S")  # the same signature: never the episode failing on test_y
        assert screen.selected == {a, b}
        await press(pilot, screen, "escape")
        await press(pilot, screen, "A")  # only the highlighted episode's agent (m1)
        assert [i.episode_id for i in screen.items] == [a, c, d] and "agent m1" in screen.status_text()
        await press(pilot, screen, "down", "down", "O")  # only agent_error:turn_limit
        assert [i.episode_id for i in screen.items] == [d]
        await press(pilot, screen, "x")
        assert len(screen.items) == 4


async def test_queue_keys_do_not_trap_and_detail_is_plain_text(workspace: Workspace) -> None:
    eid = make_episode(workspace, task="t1")
    with session(workspace.engine) as s:
        ep = present(q.get_episode(s, eid))
        ep.verifier_output = "\x1b]0;pwned\x07\x1b]52;c;Y2xpcA==\x07\x1b[31mFAILED\x1b[0m t.py::test_q - og\n"
        s.add(ep)
    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=(170, 45)) as pilot:
        await pilot.press("7")
        await wait_for(
            pilot, lambda: isinstance(app.screen, TagQueueScreen) and app.screen.items, what="the queue"
        )
        queue = app.screen
        info = str(queue.query_one("#queue-info", Static).content)
        assert "\x1b" not in info and "\x07" not in info and "FAILED t.py::test_q - og" in info
        assert "outcome failed" in info and "diagnosis policy.failed_checks" in info
        await pilot.press("escape")  # Escape leaves the queue
        await wait_for(pilot, lambda: isinstance(app.screen, TasksScreen), what="Tasks")
        await pilot.press("7")
        await wait_for(pilot, lambda: app.screen is queue, what="the queue again")
        await pilot.press("5")  # digits switch screens from inside the queue
        await wait_for(pilot, lambda: app.current_mode == "calibration", what="Calibration")


async def test_replay_shows_why_seeks_evidence_and_keeps_speed(workspace: Workspace) -> None:
    eid = make_loop_episode(workspace)
    screen = ReplayScreen(workspace, episode_id=eid)
    async with Host(screen).run_test(size=(170, 45)) as pilot:
        why = str(screen.query_one("#replay-why", Static).content)
        assert "outcome agent_error:turn_limit" in why and "diagnosis harness.action_loop" in why
        await pilot.press("e")  # first evidence item: step 0 of the loop, at its marker
        assert present(screen.player).position == 1.0
        await pilot.press("e")
        assert present(screen.player).position == 21.0  # the last step of the loop
        await pilot.press("plus", "plus")
        assert present(screen.player).speed == 4.0
        await pilot.press("v")
        assert screen.active == "verifier" and present(screen.player).speed == 4.0


async def test_wide_cast_says_it_is_cut_and_pans(workspace: Workspace, tmp_path: Path) -> None:
    line = "".join(f"{n:<10}" for n in range(0, 160, 10))  # column labels 0..150
    cast = write_cast(tmp_path / "wide.cast", [(0.1, "o", line[:159] + "\r\n$ ")], cols=160, rows=8)
    screen = ReplayScreen(None, cast_path=cast)
    async with Host(screen).run_test(size=(120, 30)) as pilot:
        await pilot.press("end")
        view = screen.query_one("#view-agent", TerminalView)
        await wait_for(pilot, lambda: view.hidden_columns()[2] == 160, what="the cast on screen")
        first, last, cols = view.hidden_columns()
        assert first == 1 and last < 160 and f"cols 1-{last} of 160 (< >: pan)" in screen.status_text()
        await pilot.press("greater_than_sign")
        await wait_for(pilot, lambda: view.hidden_columns()[0] == 21, what="the pan")
        assert view.render_line(0).text.startswith("20        30")


async def test_episodes_screen_filters_replays_and_compares(workspace: Workspace) -> None:
    a = make_episode(workspace, task="t1", outcome="failed", test="test_x")
    b = make_loop_episode(workspace, task="t1")
    make_episode(workspace, task="t2")
    screen = EpisodesScreen(workspace, task="t1")
    app = Host(screen)
    async with app.run_test(size=(170, 45)) as pilot:
        assert [r.episode_id for r in screen.shown] == [a, b]
        info = str(screen.query_one("#episodes-info", Static).content)
        assert f"episode {a}" in info and "failing checks (1)" in info
        screen.query_one(Input).value = "task:t1 turn_limit"  # free words match any column
        await pilot.pause()
        assert [r.episode_id for r in screen.shown] == [b]
        screen.query_one(Input).value = "task:t1"
        await pilot.pause()
        assert present(screen.current).episode_id == b  # the cursor stayed on its episode through the filter
        screen.table.focus()
        await pilot.press("home", "space", "down", "c")  # mark one, highlight the other, compare
        cmp = app.screen
        assert isinstance(cmp, CompareScreen) and cmp.ids == (a, b)
        assert cmp.first_divergence == 0 and "first divergence at step 0: keystrokes" in cmp.divergence_text()
        assert "FAILED tests/test_outputs.py::test_x" in str(
            cmp.query_one("#compare-out-left", Static).content
        )
        await pilot.press("escape")
        await pilot.press("enter")
        assert isinstance(app.screen, ReplayScreen) and app.screen.source.episode_id == b


async def test_settings_asks_before_dropping_unsaved_edits(workspace: Workspace) -> None:
    from textual.widgets import TextArea

    from bandpass.tui.screens.confirm import ConfirmDialog
    from bandpass.tui.screens.settings import SettingsScreen

    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.press("4")
        settings = await wait_for_screen(pilot, SettingsScreen, what="Settings")
        assert not settings.dirty
        await pilot.press("q")  # nothing edited: q quits at once, no question
    assert app.return_code == 0

    app = BandpassApp(workspace, bus=EventBus(), show_path=False)
    async with app.run_test(size=(150, 40)) as pilot:
        await pilot.press("4")
        settings = await wait_for_screen(pilot, SettingsScreen, what="Settings")
        editor = settings.query_one("#settings-text", TextArea)
        editor.insert("# my unsaved note\n", (0, 0))
        await pilot.pause()
        assert settings.dirty
        settings.query_one("#settings-models").focus()
        await pilot.press("q")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the question")
        await pilot.press("n")  # keep editing: nothing lost
        await wait_for(pilot, lambda: app.screen is settings, what="Settings again")
        assert "# my unsaved note" in editor.text
        await pilot.press("ctrl+r")  # reload asks too
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmDialog), what="the reload question")
        await pilot.press("y")
        await wait_for(pilot, lambda: "# my unsaved note" not in editor.text, what="the reload")
        assert not settings.dirty


async def test_queue_opens_the_replay_at_the_evidence(workspace: Workspace) -> None:
    eid = make_loop_episode(workspace)
    screen = TagQueueScreen(workspace)
    app = Host(screen)
    async with app.run_test(size=(170, 45)) as pilot:
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        info = str(screen.query_one("#queue-info", Static).content)
        assert "outcome agent_error:turn_limit" in info and "[step 0 @ 1.0s]" in info
        await press(pilot, screen, "enter")
        replay = await wait_for_screen(pilot, ReplayScreen, what="Replay")
        assert replay.source.episode_id == eid
        await wait_for(
            pilot, lambda: replay.player is not None and replay.player.position == 1.0, what="the seek"
        )


def _set_steps(ws: Workspace, eid: int, steps: list[tuple[str, str]]) -> None:
    """Replaces an episode's steps with (keystrokes, observation) pairs."""
    with session(ws.engine) as s:
        s.connection().execute(text("DELETE FROM step WHERE episode_id = :e"), {"e": eid})
        for i, (keys, obs) in enumerate(steps):
            action = {"commands": [{"keystrokes": keys, "duration": 1.0}], "task_complete": False}
            q.add_step(s, eid, i, marker_time=1.0 + 10.0 * i, action=action, observation=obs)


async def test_compare_aligns_an_inserted_step_and_highlights_the_first_divergence(
    workspace: Workspace,
) -> None:
    a = make_episode(workspace, task="t1", outcome="passed", steps=3)
    b = make_episode(workspace, task="t1", outcome="failed", steps=3)
    _set_steps(workspace, a, [("cd /app\n", "$"), ("make\n", "built"), ("./run\n", "ok")])
    _set_steps(
        workspace, b, [("cd /app\n", "$"), ("ls\n", "Makefile"), ("make\n", "built"), ("./run\n", "FAIL")]
    )
    screen = CompareScreen(workspace, a, b)
    app = Host(screen)
    async with app.run_test(size=(150, 40)) as pilot:
        table = screen.query_one("#compare-steps", DataTable)
        await wait_for(pilot, lambda: table.row_count == 4, what="the aligned rows")
        cells = [[str(c) for c in table.get_row_at(n)] for n in range(4)]
        # the inserted `ls` is a one-sided row; make and ./run line up again (by index all three differ)
        assert [c[:3] for c in cells] == [
            ["", "0", ""],
            ["+", "— / 1", "only right"],
            ["", "1 / 2", ""],
            ["≠", "2 / 3", "screen shown"],  # the same keystrokes, a different screen: it says so
        ]
        assert cells[1][3] == "—" and cells[1][4].startswith("ls")
        assert table.cursor_row == 1  # opened on the first divergence, highlighted
        assert table.get_row_at(1)[0].style == "bold reverse" and table.get_row_at(3)[0].style == ""
        text_ = str(screen.query_one("#compare-divergence", Static).content)
        assert (
            f"step 1 of episode {b} has no counterpart in episode {a}" in text_
            and "2 divergent rows" in text_
        )
        await pilot.press("d")
        await wait_for(pilot, lambda: table.cursor_row == 3, what="the next divergence")
        assert screen.rows[3].why == "observation"
