"""The review panel in the tag queue and Replay, through the pilot: Claude's review beside the stored
diagnosis, accepted as the curator's tag with one key, undone with u; an invalid review cannot be."""

from __future__ import annotations

import json
from typing import Any

import pytest
from sqlalchemy import text
from textual.pilot import Pilot
from textual.screen import Screen
from textual.widgets import Static

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.tagging import Tagger
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk
from bandpass.store.queries import reviews as rq
from bandpass.tui.screens.confirm import ConfirmDialog
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.widgets.review_panel import ReviewPanel
from tests.support.host import Host
from tests.support.replay_data import make_episode
from tests.support.servers.anthropic_server import Reply, running_server, tool
from tests.support.servers.anthropic_server import text as say
from tests.support.waiting import wait_for


def add_review(ws: Workspace, eid: int, code: str, status: str = "ok") -> int:
    cls, _, sub = code.partition(".")
    with session(ws.engine) as s:
        return pk(
            rq.add_review(
                s,
                episode_id=eid,
                model="claude-haiku-4-5",
                prompt_version="v1",
                status=status,
                verdict="false_fail" if status == "ok" else "",
                tag_class=cls,
                subclass=sub,
                explanation="The output was right; the test compares with a stale constant."
                if status == "ok"
                else "",
                error="" if status == "ok" else "the model refused to review this episode",
                citations_json=json.dumps([{"source": "verifier", "quote": "AssertionError: expected 42"}]),
                dropped_json=json.dumps([{"what": "citation", "reason": "step 9 does not exist"}]),
                cost_usd=0.0123,
            )
        )


def tags_of(ws: Workspace, eid: int) -> list[str]:
    with session(ws.engine) as s:
        return [f"{t.tag_class}.{t.subclass}" for t in q.tags_for_episode(s, eid)]


def panel_text(screen: Screen[None]) -> str:
    return str(screen.query_one(ReviewPanel).content)


async def press(pilot: Pilot[Any], screen: TagQueueScreen, *keys: str) -> None:
    """Presses the keys, then waits for the reload any of them started (the queue loads in a worker)."""
    await pilot.press(*keys)
    await pilot.pause()
    await wait_for(pilot, lambda: screen.settled, what="the queue's load")


async def test_tag_queue_shows_the_review_and_accepts_it_with_one_key(workspace: Workspace) -> None:
    a = make_episode(workspace, task="t1")
    b = make_episode(workspace, task="t2")
    rid = add_review(workspace, a, "misalignment.false_negative")
    add_review(workspace, b, "", status="refused")
    screen = TagQueueScreen(workspace, tagger=Tagger(workspace, author="pilot"))
    app = Host(screen)
    async with app.run_test(size=(170, 50)) as pilot:
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        assert "y" in app.active_bindings and app.active_bindings["y"].binding.description == "Accept review"
        shown = panel_text(screen)
        assert f"#{rid}" in shown and "false_fail" in shown and "misalignment.false_negative" in shown
        assert "(y: accept)" in shown and "AssertionError: expected 42" in shown
        assert "1 unsupported part dropped: step 9 does not exist" in shown
        assert "Deterministic diagnosis: policy.failed_checks (confidence 0.7)" in shown  # issue 15
        assert tags_of(workspace, a) == []  # shown, not written
        await press(pilot, screen, "y")
        await pilot.pause()
        assert tags_of(workspace, a) == ["misalignment.false_negative"]
        with session(workspace.engine) as s:
            (tag,) = q.tags_for_episode(s, a)
            assert tag.author == "pilot" and tag.blocking
        assert f"accepted as tag #{tag.id}" in panel_text(screen)
        await press(pilot, screen, "y")  # twice is not two tags
        await pilot.pause()
        assert tags_of(workspace, a) == ["misalignment.false_negative"]
        await press(pilot, screen, "u")
        await pilot.pause()
        assert tags_of(workspace, a) == []
        assert "(y: accept)" in panel_text(screen)
        await press(pilot, screen, "down")
        await pilot.pause()
        assert screen.current is not None and screen.current.episode_id == b
        assert "refused" in panel_text(screen)
        await press(pilot, screen, "y")
        await pilot.pause()
        assert tags_of(workspace, b) == []


async def test_replay_shows_the_review_beside_the_stored_diagnosis(workspace: Workspace) -> None:
    eid = make_episode(workspace)
    add_review(workspace, eid, "harness.turn_limit")
    with session(workspace.engine) as s:  # a stored diagnosis (issue 15's table)
        s.connection().execute(
            text(
                "INSERT INTO diagnosis (episode_id, code, tag, confidence, summary, evidence_json,"
                " checks_json, signature, rules_version, created_at)"
                " VALUES (:e, 'harness.action_loop', 'harness.action_loop', 0.8, 'loop', '[]', '[]', 's',"
                " 999, '2026-01-01')"
            ),
            {"e": eid},
        )
    screen = ReplayScreen(workspace, episode_id=eid, tagger=Tagger(workspace, author="pilot"))
    app = Host(screen)
    async with app.run_test(size=(170, 50)) as pilot:
        await pilot.pause()
        shown = panel_text(screen)
        assert "harness.turn_limit" in shown
        assert "Deterministic diagnosis: harness.action_loop (confidence 0.8)" in shown
        await pilot.press("y")
        await pilot.pause()
        assert tags_of(workspace, eid) == ["harness.turn_limit"]
        await pilot.press("u")
        await pilot.pause()
        assert tags_of(workspace, eid) == []


async def test_an_episode_without_review_says_how_to_get_one(workspace: Workspace) -> None:
    eid = make_episode(workspace)
    screen = ReplayScreen(workspace, episode_id=eid)
    app = Host(screen)
    async with app.run_test(size=(170, 50)) as pilot:
        await pilot.pause()
        assert f"none yet (R: ask Claude, or bandpass review {eid})" in panel_text(screen)
        await pilot.press("y")
        await pilot.pause()
        assert tags_of(workspace, eid) == []


async def test_R_asks_claude_in_the_background_and_the_panel_shows_the_result(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    eid = make_episode(workspace)
    answer = tool(
        "submit_review",
        verdict="false_fail",
        code="invalidity.wrong_ground_truth",
        citations=[{"source": "verifier", "quote": "AssertionError: expected 42"}],
        explanation="The test expects 42 where the instruction asks for something else.",
    )
    with running_server() as srv:
        srv.script("claude-sonnet-4-5", [Reply([say("Reviewing."), answer])])  # the default model
        monkeypatch.setenv("ANTHROPIC_API_KEY", srv.api_key)
        monkeypatch.setenv("ANTHROPIC_BASE_URL", srv.base_url)
        screen = TagQueueScreen(workspace, tagger=Tagger(workspace, author="pilot"))
        app = Host(screen)
        async with app.run_test(size=(170, 50)) as pilot:
            await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
            assert "none yet" in panel_text(screen)
            await press(pilot, screen, "R")  # asks first: a review spends tokens
            assert isinstance(app.screen, ConfirmDialog) and "spends tokens" in str(
                app.screen.query_one("#confirm-question", Static).content
            )
            assert len(srv.message_requests()) == 0
            await press(pilot, screen, "y")
            landed = lambda: "invalidity.wrong_ground_truth" in panel_text(screen)  # noqa: E731 - a one-line wait condition
            await wait_for(pilot, landed, what="the worker's review in the panel")
            assert tags_of(workspace, eid) == []  # still only a suggestion
            await press(pilot, screen, "y")
            await pilot.pause()
            assert tags_of(workspace, eid) == ["invalidity.wrong_ground_truth"]
