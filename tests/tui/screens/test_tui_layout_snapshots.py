"""Every screen at the two sizes a curator uses, 100x30 and 160x48, and the states between data: a batch
confirmation, an empty workspace, an error, a load in progress (pytest-textual-snapshot).

Why both sizes: at 160 columns Episodes used to push reward and tags off-screen and the tag queue cut the
diagnosis to four characters; at 100 columns Episodes showed only id, task and agent. Tables now choose
columns by priority (tui/widgets/virtual_table.fit_columns): these pictures are the proof, screen by
screen. The data are seeded (no timestamps on screen, the workspace path hidden, a private bus).
Update with ``pytest tests/tui/screens/test_tui_layout_snapshots.py --snapshot-update`` after a deliberate
change.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Static

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.diagnoser import diagnose_episodes
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.batch_confirm import BatchConfirm
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.changes import ChangesScreen
from bandpass.tui.screens.compare import CompareScreen
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.generate import GenerateScreen
from bandpass.tui.screens.help import HelpScreen
from bandpass.tui.screens.overview import OverviewScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.runs import RunsScreen
from bandpass.tui.screens.settings import SettingsScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.screens.tasks import TasksScreen
from tests.support.calib_data import add_episodes, add_task, outcomes
from tests.support.narrow import present
from tests.support.replay_data import make_episode
from tests.support.waiting import wait_for, wait_for_screen

# Slow (every screen at two sizes, as SVG): the full suite runs it, `scripts/test --fast` does not.
pytestmark = pytest.mark.slow

SIZES = [(100, 30), (160, 48)]
MODEL = "qwen-9b"

Step = Callable[[Any, BandpassApp, dict[str, int]], Awaitable[None]]


def _workspace(root: Path) -> tuple[Workspace, dict[str, int]]:
    """Five tasks with audits and a policy's episodes (a forged pass among them), plus episodes with
    recordings and steps to replay, tag and compare; everything diagnosed."""
    ws = Workspace.open(root)
    (root / "bandpass.toml").write_text(f'[models.{MODEL}]\nbase_url = "http://127.0.0.1:8000/v1"\n')
    ws = Workspace.open(root)
    ids: dict[str, int] = {}
    for name, result, verdict in (
        ("access-log-report", outcomes(2, 2), "accepted"),
        ("configure-kv-service", outcomes(0, 4, agent_error__turn_limit=1), "accepted"),
        ("fix-catalog-makefile", outcomes(4), "accepted"),
        ("count-unique-ips", outcomes(0, 2), "rejected"),
        ("summarize-measurements", outcomes(1, 1, infra_error__container_died=2), "accepted"),
    ):
        vid, _ = add_task(ws, name)
        add_episodes(ws, vid, MODEL, result)
        with session(ws.engine) as s:
            q.record_audit(s, vid, verdict=verdict, reasons=[], details={})
    with session(ws.engine) as s:  # first in the table, so under the cursor: no source path on screen
        task, _ = q.get_or_create_task(s, "abbreviate-paths")
        q.add_task_version(
            s, task, version_hash="ab" * 32, path="tasks/abbreviate-paths", instruction="do it"
        )
    ids["a"] = make_episode(ws, task="access-log-report", outcome="passed", agent=MODEL)
    ids["b"] = make_episode(ws, task="access-log-report", test="test_report_rows", agent=MODEL)
    ids["c"] = make_episode(ws, task="access-log-report", test="test_report_rows", agent=MODEL)
    ids["loop"] = make_episode(ws, task="configure-kv-service", outcome="agent_error:turn_limit", agent=MODEL)
    tamper = make_episode(ws, task="access-log-report", outcome="failed", agent=MODEL)
    with session(ws.engine) as s:  # the verifier still paid out: a forged 1, kept as evidence
        q.finish_episode(s, tamper, outcome="agent_error:verifier_tamper", reward=1.0)
    ids["tamper"] = tamper
    diagnose_episodes(ws)
    return ws, ids


@pytest.fixture(scope="module")
def seeded(tmp_path_factory: pytest.TempPathFactory) -> tuple[Workspace, dict[str, int]]:
    return _workspace(tmp_path_factory.mktemp("layout") / "ws")


async def _mode(pilot: Any, app: BandpassApp, key: str, screen: type) -> Any:
    await pilot.press(key)
    await wait_for(pilot, lambda: isinstance(app.screen, screen), what=screen.__name__)
    return app.screen


async def _tasks_loaded(pilot: Any, app: BandpassApp) -> None:
    tasks = next(s for s in app.screen_stack if isinstance(s, TasksScreen))
    await wait_for(pilot, lambda: tasks.last_load_s is not None, what="tasks loaded")
    tasks.last_load_s = None  # the load time varies run to run: keep it out of the picture
    tasks._apply_filter()


async def overview(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    ov = await _mode(pilot, app, "0", OverviewScreen)
    await wait_for(pilot, lambda: ov.overview is not None, what="overview built")


async def tasks(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    await _tasks_loaded(pilot, app)


async def runs(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    await _mode(pilot, app, "2", RunsScreen)


async def runs_confirmation(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    await _tasks_loaded(pilot, app)
    await _mode(pilot, app, "2", RunsScreen)
    await pilot.press("n")
    await wait_for(pilot, lambda: isinstance(app.screen, BatchConfirm), what="the confirmation")


async def generate(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    screen = await _mode(pilot, app, "3", GenerateScreen)
    info = screen.query_one("#gen-yield", Static)
    await wait_for(pilot, lambda: "no attempts yet" in str(info.render()), what="history")


async def settings(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    screen = await _mode(pilot, app, "4", SettingsScreen)
    models = screen.query_one("#settings-models")
    await wait_for(pilot, lambda: models.row_count == 1, what="the model")


async def calibration(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    screen = await _mode(pilot, app, "5", CalibrationScreen)
    table = screen.query_one("#calib-table")
    await wait_for(
        pilot,
        lambda: screen.report is not None and table.row_count == len(screen.report.estimates) >= 5,
        what="the report's tasks",
    )


async def replay(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    await _tasks_loaded(pilot, app)
    app.open_replay(ids["b"])
    screen = await wait_for_screen(pilot, ReplayScreen, what="replay")
    done = lambda: screen.players and all(p.index.complete for p in screen.players.values())  # noqa: E731 - a one-line wait condition
    await wait_for(pilot, done, what="indexed")
    await pilot.press("right_square_bracket", "right_square_bracket")
    await wait_for(pilot, lambda: present(screen.player).position == 11.0, what="step 1")


async def changes(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    await replay(pilot, app, ids)
    await pilot.press("d")
    await wait_for(pilot, lambda: isinstance(app.screen, ChangesScreen), what="changes")


async def tag_queue(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    screen = await _mode(pilot, app, "7", TagQueueScreen)
    await wait_for(pilot, lambda: screen.settled, what="the queue")


async def clusters(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    await tag_queue(pilot, app, ids)
    await pilot.press("k")
    info = app.screen.query_one("#queue-info", Static)
    await wait_for(pilot, lambda: str(info.content).startswith("cluster "), what="clusters")


async def episodes(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    await _tasks_loaded(pilot, app)
    await pilot.press("0")  # from the Overview: every task's episodes
    screen = await _mode(pilot, app, "8", EpisodesScreen)
    await wait_for(pilot, lambda: len(screen.shown) > 20, what="episodes")
    for _ in range(len(screen.shown)):  # down to the forged pass
        if screen.current is not None and screen.current.episode_id == ids["tamper"]:
            break
        await pilot.press("down")
    info = screen.query_one("#episodes-info", Static)
    await wait_for(pilot, lambda: "verifier_tamper" in str(info.content), what="its details")


async def compare(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    await _tasks_loaded(pilot, app)
    screen = CompareScreen(app.workspace, ids["a"], ids["b"])
    await app.push_screen(screen)
    await wait_for(pilot, lambda: screen.indexes, what="both recordings")


async def help_page(pilot: Any, app: BandpassApp, ids: dict[str, int]) -> None:
    await _tasks_loaded(pilot, app)
    await pilot.press("question_mark")
    await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen), what="help")


VIEWS: dict[str, Step] = {
    "overview": overview,
    "tasks": tasks,
    "runs": runs,
    "runs_confirmation": runs_confirmation,
    "generate": generate,
    "settings": settings,
    "calibration": calibration,
    "replay": replay,
    "changes": changes,
    "tag_queue": tag_queue,
    "clusters": clusters,
    "episodes": episodes,
    "compare": compare,
    "help": help_page,
}


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", list(VIEWS))
def test_every_screen_at_both_sizes(
    seeded: tuple[Workspace, dict[str, int]],
    view: str,
    size: tuple[int, int],
    snap_compare: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    ws, ids = seeded
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.setattr(GenerateScreen, "_prompt_versions", lambda self: ["v1", "v2"])  # not the live set
    app = BandpassApp(ws, bus=EventBus(), show_path=False)

    async def run_before(pilot: Any) -> None:
        await VIEWS[view](pilot, app, ids)
        await pilot.pause()
        assert app.unexpected == []

    assert snap_compare(app, terminal_size=size, run_before=run_before)


# --- states between data ------------------------------------------------------------------------------


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("view", ["tasks", "episodes", "tag_queue", "overview"])
def test_an_empty_workspace(tmp_path: Path, view: str, size: tuple[int, int], snap_compare: Any) -> None:
    """A new workspace: each screen says what is missing and the key that fills it, no blank panes."""
    ws = Workspace.open(tmp_path / "empty")
    app = BandpassApp(ws, bus=EventBus(), show_path=False)

    async def run_before(pilot: Any) -> None:
        await _tasks_loaded(pilot, app)
        if view == "episodes":
            screen = await _mode(pilot, app, "8", EpisodesScreen)
            info = screen.query_one("#episodes-info", Static)
            await wait_for(pilot, lambda: "no episodes yet" in str(info.content), what="empty episodes")
        elif view == "tag_queue":
            screen = await _mode(pilot, app, "7", TagQueueScreen)
            await wait_for(pilot, lambda: screen.settled, what="the queue")
        elif view == "overview":
            await overview(pilot, app, {})
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_the_overview_while_it_loads(
    seeded: tuple[Workspace, dict[str, int]],
    size: tuple[int, int],
    snap_compare: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The Overview's read, in progress: what the screen says while its worker reads the workspace (the
    read is held until the picture is taken, and let go when the app closes)."""
    import bandpass.tui.screens.overview as ov
    from bandpass.engine.app.overview import build_overview

    ws, _ids = seeded
    app = BandpassApp(ws, bus=EventBus(), show_path=False, start="overview")
    real = build_overview  # what the screen's module calls (it imports the name from the engine)

    def held(*args: Any, **kwargs: Any) -> Any:
        while app.is_running:  # until the app closes
            time.sleep(0.05)
        return real(*args, **kwargs)

    monkeypatch.setattr(ov, "build_overview", held)

    async def run_before(pilot: Any) -> None:
        head = app.screen.query_one("#overview-headline", Static)
        await wait_for(pilot, lambda: "Reading the workspace" in str(head.render()), what="loading")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
def test_an_error_instead_of_data(tmp_path: Path, size: tuple[int, int], snap_compare: Any) -> None:
    """A bandpass.toml broken after the app opened: the Overview says what is wrong, in the file's
    terms, instead of data (and the app goes on)."""
    ws = Workspace.open(tmp_path / "ws")
    (ws.root / "bandpass.toml").write_text("[band]\nlo = 'low'\n")
    broken = Workspace(ws.root)  # reads bandpass.toml when first asked
    app = BandpassApp(broken, bus=EventBus(), show_path=False, start="overview")

    async def run_before(pilot: Any) -> None:
        head = app.screen.query_one("#overview-headline", Static)
        await wait_for(pilot, lambda: "Cannot read the workspace" in str(head.render()), what="the error")
        await pilot.pause()

    assert snap_compare(app, terminal_size=size, run_before=run_before)


# --- the footer at the narrow size ---------------------------------------------------------------------


@pytest.mark.parametrize("view", [v for v in VIEWS if v not in ("runs_confirmation", "help")])  # modals
async def test_every_footer_key_is_visible_at_100_columns(
    seeded: tuple[Workspace, dict[str, int]], view: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At 100 columns each key a screen's footer lists is whole on screen, left of the palette key: a
    footer that runs off the edge hides Help and Quit first (Replay and the tag queue used to)."""
    from textual.widgets import Footer
    from textual.widgets._footer import FooterKey

    ws, ids = seeded
    monkeypatch.setattr(GenerateScreen, "_prompt_versions", lambda self: ["v1", "v2"])
    app = BandpassApp(ws, bus=EventBus(), show_path=False)
    async with app.run_test(size=(100, 30)) as pilot:
        await VIEWS[view](pilot, app, ids)
        await pilot.pause()
        keys = list(app.screen.query_one(Footer).query(FooterKey))
        palette = [k for k in keys if k.action == "app.command_palette"]
        edge = palette[0].region.x if palette else 100
        cut = [f"{k.key_display} {k.description}" for k in keys if k not in palette and k.region.right > edge]
        assert len(keys) - len(palette) >= 3 and cut == [], cut
