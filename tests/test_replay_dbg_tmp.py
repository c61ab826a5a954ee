from tests.test_replay_tui import *
from textual.widgets import Input
async def test_dbg(workspace):
    eid = make_episode(workspace, outcome="agent_error:turn_limit")
    screen = ReplayScreen(workspace, episode_id=eid)
    async with Host(screen).run_test(size=(160, 45)) as pilot:
        await pilot.press("t")
        await pilot.press("tab")
        print("focused", pilot.app.screen.focused)
        await pilot.press("h", "i", "space", "x")
        print("value", repr(pilot.app.screen.query_one(Input).value))
        await pilot.press("1")
        print("value", repr(pilot.app.screen.query_one(Input).value), pilot.app.screen.tag_class)
