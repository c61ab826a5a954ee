"""Replay screen, driven by keys through Textual's pilot: seek, markers, step sync, casts, tagging."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from textual.pilot import Pilot
from textual.widgets import Static

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.replay import replay_from_start
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.tag_dialog import TagDialog
from bandpass.tui.widgets.step_panel import StepPanel
from bandpass.tui.widgets.terminal_view import TerminalView
from bandpass.tui.widgets.timeline import Timeline
from tests.support.host import Host
from tests.support.narrow import present
from tests.support.replay_data import make_episode, write_cast
from tests.support.waiting import wait_for


async def wait_indexed(pilot: Pilot[Any], screen: ReplayScreen) -> None:
    done = lambda: all(p.index.complete for p in screen.players.values())  # noqa: E731 - a one-line wait condition
    await wait_for(pilot, done, what="keyframe index built")


async def test_seek_keys_markers_and_step_sync(workspace: Workspace) -> None:
    eid = make_episode(workspace, steps=3)
    screen = ReplayScreen(workspace, episode_id=eid)
    async with Host(screen).run_test(size=(160, 45)) as pilot:
        await wait_indexed(pilot, screen)
        player = screen.player
        assert player is not None and screen.active == "agent"
        assert [m.label for m in player.markers] == ["step 0", "step 1", "step 2"]
        panel = screen.query_one(StepPanel)
        assert panel.title_text == "before the first step"

        await pilot.press("right_square_bracket")
        assert player.position == 1.0
        assert panel.title_text.startswith("step 0 · 100 prompt + 20 completion tokens · 1.50 s")
        await pilot.press("right_square_bracket", "right_square_bracket")
        assert player.position == 21.0 and panel.title_text.startswith("step 2")
        assert "analysis of step 2" in str(screen.query_one("#step-analysis", Static).content)
        assert "echo step2" in str(screen.query_one("#step-keys", Static).content)
        assert "observation given at step 2" in str(screen.query_one("#step-observation", Static).content)
        await pilot.press("left_square_bracket")
        assert player.position == 11.0 and panel.title_text.startswith("step 1")

        await pilot.press("home")
        assert player.position == 0.0 and panel.title_text == "before the first step"
        await pilot.press("5")
        assert player.position == player.duration / 2
        assert player.screen.lines() == replay_from_start(player.index.cast, player.position).lines()
        await pilot.press("right")
        assert player.position == player.duration / 2 + 5
        await pilot.press("left", "left")
        assert player.position == player.duration / 2 - 5
        await pilot.press("end")
        assert player.position == player.duration and "output of step 2" in player.screen.text()

        # The view paints the player's current screen, including after a keyframe restore.
        await pilot.press("home")
        view = screen.query_one("#view-agent", TerminalView)
        await wait_for(pilot, lambda: view.emulator is player.screen, what="view shows the restored screen")

        # The timeline is clickable: a click far right seeks near the end.
        timeline = screen.query_one(Timeline)
        await pilot.click(Timeline, offset=(timeline.size.width - 1, 0))
        assert player.position == player.duration

        assert "Verifier output" in str(screen.query_one(".side-heading", Static).content)
        assert "FAILED tests/test_outputs.py::test_answer" in str(
            screen.query_one("#verifier-output", Static).content
        )


async def test_play_pause_speed_frame_step_and_marker_pause(workspace: Workspace) -> None:
    eid = make_episode(workspace, steps=3)
    screen = ReplayScreen(workspace, episode_id=eid)
    async with Host(screen).run_test(size=(160, 45)) as pilot:
        player = screen.player
        assert player is not None
        await pilot.press("plus", "plus", "plus", "plus")
        assert player.speed == 16.0
        await pilot.press("minus")
        assert player.speed == 8.0
        await pilot.press("m")
        assert player.pause_at_markers and "pause at steps" in screen.status_text()
        await pilot.press("space")  # at 8x, the first marker (1 s) comes within a few frames
        await wait_for(pilot, lambda: not player.playing, what="playback paused at a marker")
        assert player.position == 1.0  # stopped at the step 0 marker
        await pilot.press("full_stop")
        assert player.screen.text().endswith("$ echo step0")
        await pilot.press("full_stop")
        assert "output of step 0" in player.screen.text()
        await pilot.press("comma")
        assert "output of step 0" not in player.screen.text()
        await pilot.press("i")
        assert player.idle_limit == 2.0 and "idle ≤2s" in screen.status_text()


async def test_agent_and_verifier_switchable_and_side_by_side(workspace: Workspace) -> None:
    eid = make_episode(workspace, steps=2)
    screen = ReplayScreen(workspace, episode_id=eid)
    async with Host(screen).run_test(size=(160, 45)) as pilot:
        agent_pane, verifier_pane = screen.query_one("#pane-agent"), screen.query_one("#pane-verifier")
        assert agent_pane.display and not verifier_pane.display
        await pilot.press("v")
        assert screen.active == "verifier" and verifier_pane.display and not agent_pane.display
        await pilot.press("end")
        assert screen.player.screen.text() == "running tests\n1 failed"
        await pilot.press("b")
        assert agent_pane.display and verifier_pane.display and verifier_pane.has_class("active")
        await pilot.press("v")
        assert screen.active == "agent" and agent_pane.has_class("active")


async def test_tag_from_replay_confirms_the_suggestion_and_undoes(workspace: Workspace) -> None:
    eid = make_episode(workspace, outcome="agent_error:turn_limit")
    screen = ReplayScreen(workspace, episode_id=eid)
    async with Host(screen).run_test(size=(160, 45)) as pilot:
        await pilot.press("t")
        dialog = pilot.app.screen
        assert isinstance(dialog, TagDialog) and dialog.code == "harness.turn_limit"
        with session(workspace.engine) as s:
            assert q.tags_for_episode(s, eid) == []  # preselected is not written
        await pilot.press("escape")
        await pilot.press("t")
        await pilot.press("tab")
        await pilot.press(*"hit", "space", *"limit")
        await pilot.press("enter")
        await pilot.pause()
        with session(workspace.engine) as s:
            (tag,) = q.tags_for_episode(s, eid)
        assert (tag.tag_class, tag.subclass, tag.note) == ("harness", "turn_limit", "hit limit")
        await pilot.press("u")
        with session(workspace.engine) as s:
            assert q.tags_for_episode(s, eid) == []


async def test_bare_v3_and_truncated_casts_open(tmp_path: Path) -> None:
    v3 = write_cast(
        tmp_path / "v3.cast", [(0.5, "o", "hello v3"), (1.0, "m", "ls\n"), (2.0, "o", "!")], version=3
    )
    screen = ReplayScreen(None, cast_path=v3)
    async with Host(screen).run_test(size=(120, 40)) as pilot:
        await pilot.press("end")
        assert present(screen.player).screen.text() == "hello v3!"
        await pilot.press("home", "right_square_bracket")
        assert screen.query_one(StepPanel).title_text == "marker: ls\n"
        await pilot.press("t")  # a bare cast has no episode: a warning, no dialog
        assert not isinstance(pilot.app.screen, TagDialog)

    cut = write_cast(tmp_path / "cut.cast", [(0.5, "o", "kept"), (1.0, "o", "lost")], cut_last=True)
    screen = ReplayScreen(None, cast_path=cut)
    async with Host(screen).run_test(size=(120, 40)) as pilot:
        await pilot.press("end")
        assert present(screen.player).index.cast.truncated and present(screen.player).screen.text() == "kept"


async def test_unreadable_cast_shows_a_message(tmp_path: Path) -> None:
    bad = tmp_path / "bad.cast"
    bad.write_text("not json\n")
    screen = ReplayScreen(None, cast_path=bad)
    async with Host(screen).run_test(size=(120, 40)) as pilot:
        await pilot.press("space", "right", "5", "right_square_bracket")
        status = str(screen.query_one("#replay-status", Static).content)
        assert status.startswith("nothing to replay: bad.cast line 1")
