"""Replay's Changes view on a real tampering episode: changes against the image, diffs, guard findings."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.widgets import DataTable, Static

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.episode import run_episode
from bandpass.tui.screens.changes import ChangesScreen
from bandpass.tui.screens.replay import ReplayScreen
from tests.support.host import Host
from tests.support.scripted import Keys, in_place_task
from tests.support.waiting import wait_for

pytestmark = pytest.mark.docker


async def test_changes_view_shows_diffs_and_highlights_guard_findings(
    workspace: Workspace, tmp_path: Path
) -> None:
    vid = in_place_task(workspace, tmp_path, "changes-view")
    res = run_episode(
        workspace,
        vid,
        Keys(
            "echo 'export EVIL=1' >> /etc/profile",
            "printf '#!/bin/sh\\necho 42\\n' > /usr/bin/cat",
            "mkdir -p /app/notes && echo 'hello' > /app/notes/readme.txt",
        ),
    )
    assert res.outcome == "agent_error:verifier_tamper"

    replay = ReplayScreen(workspace, episode_id=res.episode_id)
    async with Host(replay).run_test(size=(160, 45)) as pilot:
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ChangesScreen), what="the Changes screen")
        screen = pilot.app.screen
        assert isinstance(screen, ChangesScreen)
        summary = str(screen.query_one("#changes-summary", Static).content)
        assert summary.startswith("guard TRIPPED: 2 findings")
        table = screen.query_one(DataTable)
        rows = {str(table.get_row_at(i)[1]): table.get_row_at(i) for i in range(table.row_count)}
        assert {"/etc/profile", "/usr/bin/cat", "/app/notes/readme.txt"} <= set(rows)
        assert "/app/notes/" not in rows  # directories hidden unless flagged (h shows them)
        cat_path = rows["/usr/bin/cat"][1]
        assert "red" in str(cat_path.style)  # a tripped finding is highlighted
        assert str(rows["/usr/bin/cat"][3]) == "system_file"
        assert str(rows["/etc/profile"][3]) == "shell_startup"

        order = [c["path"] for c in screen.rows]
        table.move_cursor(row=order.index("/etc/profile"))
        diff = screen.query_one("#changes-diff", Static)
        await wait_for(pilot, lambda: "+export EVIL=1" in str(diff.content), what="the diff of /etc/profile")
        text = str(diff.content)
        assert "--- image:/etc/profile" in text and "TAMPER: shell_startup" in text

        table.move_cursor(row=order.index("/app/notes/readme.txt"))
        await wait_for(pilot, lambda: "+hello" in str(diff.content), what="the diff of an added file")
        assert "--- /dev/null" in str(diff.content)

        await pilot.press("f")
        flagged = [str(table.get_row_at(i)[1]) for i in range(table.row_count)]
        assert sorted(flagged) == ["/etc/profile", "/usr/bin/cat"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: pilot.app.screen is replay, what="back to Replay")


async def test_in_a_clean_room_the_changes_view_shows_findings_as_evidence(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Verified in a clean room the forged cat never reached the verifier: the view still lists it and
    the rule that saw it, as evidence (yellow), with what crossed into the clean room."""
    vid = in_place_task(workspace, tmp_path, "changes-clean", verifier="")
    res = run_episode(workspace, vid, Keys("printf '#!/bin/sh\\necho 42\\n' > /usr/bin/cat"))
    assert (res.outcome, res.verify_mode) == ("failed", "clean_room")
    replay = ReplayScreen(workspace, episode_id=res.episode_id)
    async with Host(replay).run_test(size=(160, 45)) as pilot:
        await pilot.press("d")
        await wait_for(pilot, lambda: isinstance(pilot.app.screen, ChangesScreen), what="the Changes screen")
        screen = pilot.app.screen
        assert isinstance(screen, ChangesScreen)
        summary = str(screen.query_one("#changes-summary", Static).content)
        assert summary.startswith("clean room · guard: 1 finding, evidence only"), summary
        table = screen.query_one(DataTable)
        rows = {str(table.get_row_at(i)[1]): table.get_row_at(i) for i in range(table.row_count)}
        assert (
            "yellow" in str(rows["/usr/bin/cat"][1].style) and str(rows["/usr/bin/cat"][3]) == "system_file"
        )
