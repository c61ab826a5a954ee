"""The help page (``?``) and the command palette, on every screen: one provider (nothing listed twice),
every binding reachable by name, and a help page built from the screen's live bindings."""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
from textual.command import CommandList, CommandPalette
from textual.pilot import Pilot
from textual.widgets import Input

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.app import BandpassApp
from bandpass.tui.key_names import full_name
from bandpass.tui.screens.help import HelpScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from tests.support.narrow import present
from tests.support.replay_data import make_episode
from tests.support.waiting import wait_for, wait_for_screen

SIZE = (160, 45)
MODES = {"1": "tasks", "2": "runs", "3": "generate", "4": "settings", "5": "calibration", "7": "tags"}


async def open_help(pilot: Pilot[Any], app: BandpassApp) -> HelpScreen:
    await pilot.press("question_mark")
    return await wait_for_screen(pilot, HelpScreen, what="help page open")


@pytest.mark.parametrize(
    ("key", "must_list"),
    [
        ("1", {"Search", "Reverse sort", "Clear search", "Runs", "Calibration", "Theme"}),
        ("2", {"Start batch", "Grid", "Tag queue"}),
        ("3", {"Start generation", "Refresh history"}),
        ("4", {"Save", "Check endpoints"}),
        ("5", {"Refresh"}),
        ("7", {"Next", "Tag…", "Clusters", "Clear tag", "Clear filters"}),
    ],
)
async def test_help_lists_every_binding_of_each_screen(ws: Workspace, key: str, must_list: set[str]) -> None:
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(key)
        await wait_for(pilot, lambda: app.current_mode == MODES[key], what=f"mode {MODES[key]}")
        screen = app.screen
        if isinstance(app.focused, Input):
            app.set_focus(None)  # "?" typed into a field is text, not help
        help_page = await open_help(pilot, app)
        described = {r.description for r in help_page.rows}
        assert must_list <= described, must_list - described
        assert {"Quit", "Tasks", "Settings"} <= described  # the app's keys, listed under Everywhere
        hidden = {r.description for r in help_page.rows if not r.in_footer}
        assert "Theme" in hidden  # in help and palette, not in the footer
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is screen, what="help closed")


async def test_replay_help_footer_and_palette_list_each_command_once(ws: Workspace) -> None:
    eid = make_episode(ws, steps=3)
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=SIZE) as pilot:
        app.open_replay(eid)
        replay = await wait_for_screen(pilot, ReplayScreen, what="replay open")
        await wait_for(pilot, lambda: replay.player is not None and replay.player.markers)

        # The footer keeps the few keys that matter; the rest are in help and the palette. (11: the app's
        # own Help, Quit and ctrl+f Search all, which every footer lists, plus Replay's eight.)
        footer_keys = [full_name(b) for _n, b, _e, _t in replay.active_bindings.values() if b.show]
        assert len(footer_keys) <= 11, footer_keys
        assert {"Play/Pause", "Next step", "Tag", "Help", "Search all"} <= set(footer_keys)

        help_page = await open_help(pilot, app)
        described = [r.description for r in help_page.rows]
        assert {"Jump to 50%", "Frame back", "Slower", "Undo tag", "Side by side"} <= set(described)
        assert len(described) == len(set(described))
        rows = {r.description: r for r in help_page.rows}
        assert rows["Next step"].key == "]" and rows["Next step"].group == "This screen"
        await pilot.press("q")  # closes help, does not quit
        await wait_for(pilot, lambda: app.screen is replay, what="help closed")

        # One palette provider: every command once, and it runs the screen's action.
        titles = Counter(c.title for c in app.get_system_commands(replay))
        assert titles["Next step"] == 1 and titles["Tag"] == 1, titles
        assert not [t for t, n in titles.items() if n > 1], titles
        assert titles["Tasks"] == 1  # the app's mode switch, though Replay's digits seek
        assert titles["Help"] == 1
        assert titles["Search all"] == 1 and titles["Search cast"] == 1
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette), what="palette open")
        await pilot.press(*"next step")
        palette = app.screen
        options = palette.query_one("CommandList", CommandList)
        await wait_for(pilot, lambda: options.option_count > 0, what="palette hits")
        prompts = [str(options.get_option_at_index(i).prompt) for i in range(options.option_count)]
        assert sum("Next step" in p for p in prompts) == 1, prompts
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.screen is replay and present(replay.player).position == 1.0)


async def test_tag_queue_is_a_mode_and_lists_commands_once(ws: Workspace) -> None:
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("7")
        await wait_for(pilot, lambda: isinstance(app.screen, TagQueueScreen), what="tag queue open")
        titles = Counter(c.title for c in app.get_system_commands(app.screen))
        assert titles["Suggested tag"] == 1 and titles["Select same signature"] == 1
        assert not [t for t, n in titles.items() if n > 1], titles
        footer = {full_name(b) for _n, b, _e, _t in app.screen.active_bindings.values() if b.show}
        assert {"Next", "Suggested tag", "Help", "Quit"} <= footer
        assert not {"Tag class 1", "Clear tag", "Tasks", "Theme"} & footer  # help page and palette only
