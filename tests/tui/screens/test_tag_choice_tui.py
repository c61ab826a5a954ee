"""Every tag entry point preselects the suggestion it states, on the demo's real episodes: Tag queue rows
(``t`` and ``a``), its cluster view, Search's "tag all listed" and Replay's ``t``. The dialog's hint names
the suggestion, the highlighted row is that code, and Enter tags exactly what the effect line says."""

from __future__ import annotations

from typing import Any

from textual.app import App
from textual.pilot import Pilot
from textual.widgets import DataTable, OptionList, Static

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.search_index import build_index
from bandpass.engine.review.tagging import Tagger
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.search import SearchScreen
from bandpass.tui.screens.tag_dialog import TagDialog
from bandpass.tui.screens.tag_queue import TagQueueScreen
from tests.support.host import Host
from tests.support.narrow import present
from tests.support.waiting import wait_for

SIZE = (160, 48)


def _tags(ws: Workspace, eid: int) -> list[str]:
    with session(ws.engine) as s:
        return [f"{t.tag_class}.{t.subclass}" for t in q.tags_for_episode(s, eid)]


def _assert_preselected_is_stated(dialog: TagDialog) -> str:
    """The hint names the suggestion and the highlighted row is it; returns it."""
    suggestion = dialog.plan.suggestion
    assert suggestion is not None
    hint = str(dialog.query_one("#tag-hint", Static).content)
    assert f"suggested: {suggestion}" in hint and "preselected" in hint
    options = dialog.query_one("#tag-subclass", OptionList)
    assert options.highlighted is not None
    assert f"{dialog.tag_class}.{options.get_option_at_index(options.highlighted).id}" == suggestion
    assert dialog.code == suggestion
    return suggestion


async def _dialog(pilot: Pilot[Any], app: App[Any], key: str) -> TagDialog:
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, TagDialog), what="the tag dialog")
    assert isinstance(app.screen, TagDialog)
    return app.screen


async def test_queue_rows_t_and_a_preselect_the_stated_suggestion(demo: Workspace) -> None:
    screen = TagQueueScreen(demo, tagger=Tagger(demo, author="pilot"))
    app = Host(screen)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        seen = set()
        for _ in range(6):  # several rows: plain failures and the forgery among them
            cur = screen.current
            assert cur is not None
            for key in ("t", "a"):
                dialog = await _dialog(pilot, app, key)
                assert _assert_preselected_is_stated(dialog) == cur.suggestion
                await pilot.press("escape")
                await wait_for(pilot, lambda: app.screen is screen, what="dialog closed")
            seen.add(cur.suggestion)
            await pilot.press("down")
            await pilot.pause()
        assert _tags(demo, present(cur).episode_id) == []  # nothing written unconfirmed


async def test_the_cluster_view_tags_the_forgery_apart_from_the_genuine_failures(demo: Workspace) -> None:
    screen = TagQueueScreen(demo, tagger=Tagger(demo, author="pilot"))
    app = Host(screen)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: screen.settled, what="the queue's first load")
        await pilot.press("k")
        await pilot.pause()
        kv = next(n for n, c in enumerate(screen.clusters) if c.items[0].task == "configure-kv-service")
        screen.table.cursor_row = kv
        await pilot.pause()
        cluster = screen.current_cluster
        assert cluster is not None and cluster.verdict.label.startswith("misalignment.reward_hack (1 of ")
        forged = cluster.verdict.episode_id
        untagged = [i.episode_id for i in cluster.items if i.state != "tagged"]

        dialog = await _dialog(pilot, app, "a")
        assert _assert_preselected_is_stated(dialog) == "misalignment.reward_hack"
        effect = str(dialog.query_one("#tag-effect", Static).content)
        assert effect.startswith("Enter tags 1 episode with misalignment.reward_hack — left out ")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen and screen.settled, what="tagged and reloaded")
        assert _tags(demo, forged) == ["misalignment.reward_hack"]
        assert all(_tags(demo, e) == [] for e in untagged if e != forged)

        # the rest of the cluster now suggests the valid failure, for the genuine failures only
        screen.table.cursor_row = next(n for n, c in enumerate(screen.clusters) if c.id == cluster.id)
        await pilot.pause()
        dialog = await _dialog(pilot, app, "t")
        assert _assert_preselected_is_stated(dialog) == "policy.failed_checks"
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is screen and screen.settled, what="tagged and reloaded")
        rest = [e for e in untagged if e != forged]
        assert sum(_tags(demo, e) == ["policy.failed_checks"] for e in rest) >= len(rest) - 1
        assert _tags(demo, forged) == ["misalignment.reward_hack"]
        await pilot.press("u")
        await pilot.pause()
        await wait_for(pilot, lambda: screen.settled, what="undone")
        await pilot.press("u")
        await pilot.pause()
        await wait_for(pilot, lambda: screen.settled, what="undone")
        assert all(_tags(demo, e) == [] for e in untagged)


async def test_search_tag_all_listed_preselects_the_suggestion_and_leaves_passes_out(demo: Workspace) -> None:
    build_index(demo)
    tagger = Tagger(demo, author="pilot")
    screen = SearchScreen(demo, query="kv.ini", tagger=tagger)
    async with Host(screen).run_test(size=SIZE) as pilot:
        await wait_for(pilot, lambda: screen.result is not None, what="results")
        assert screen.result is not None
        listed = [e.episode_id for e in screen.result.episodes]
        with session(demo.engine) as s:
            passed = {e for e in listed if present(q.get_episode(s, e)).outcome == "passed"}
        screen.query_one(DataTable).focus()
        dialog = await _dialog(pilot, screen.app, "t")
        suggestion = _assert_preselected_is_stated(dialog)
        effect = dialog.plan.effect(suggestion)
        assert not passed & set(effect.targets)  # a pass never takes a failure class
        await pilot.press("escape")


async def test_replay_t_preselects_the_suggestion_and_refuses_the_valid_failure_on_a_void(
    demo: Workspace,
) -> None:
    with session(demo.engine) as s:
        void = next(pk(e) for e in q.episodes(s) if e.outcome == "agent_error:verifier_tamper")
    screen = ReplayScreen(demo, episode_id=void, tagger=Tagger(demo, author="pilot"))
    app = Host(screen)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        dialog = await _dialog(pilot, app, "t")
        assert _assert_preselected_is_stated(dialog) == "misalignment.reward_hack"
        await pilot.press("6")  # the valid failure: refused for a voided reward, Enter writes nothing
        await pilot.pause()
        assert dialog.code == "policy.failed_checks"
        assert "nothing to tag" in str(dialog.query_one("#tag-effect", Static).content)
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is dialog and _tags(demo, void) == []
        await pilot.press("escape")
