"""The Textual application: the curator's cockpit over one workspace.

Each area (Overview, Tasks, Runs, Generate, Settings, Calibration, Tag queue) is a Textual *mode*:
each keeps its own screen stack, so switching to Tasks while a batch runs leaves the Runs panes alive
and still receiving output. The app holds only what all screens share: the workspace, the event bus the
engine publishes on, and the task scope the Tasks filter last produced (what a new batch runs over).

Every binding of the app, the active screen and its focused widget is offered in the command palette
(ctrl+p, one provider: each command once) and listed on the help page (``?``, built from the same live
bindings), so nothing is reachable only by a key the curator has to remember, and the footer can keep
just the few keys that matter. Engine work never runs on the UI thread: screens start it in workers and
report failures as notifications.

Nothing a curator presses ends the session (tui/errors.py): an unexpected exception in an action, a
handler, a worker or a timer is shown as a notification and logged to ``<workspace>/logs/tui-errors.log``;
the few that Textual cannot survive end the app with ``return_code`` 1, logged the same way.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable
from functools import partial
from typing import TYPE_CHECKING, Any

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen
from textual.widget import AwaitMount

from ..engine.app import episode_hooks, leftovers
from ..engine.core.events import EventBus
from ..engine.core.events import bus as default_bus
from ..engine.core.workspace import Workspace
from .errors import SafeApp
from .key_names import full_name
from .screens.calibration import CalibrationScreen
from .screens.generate import GenerateScreen
from .screens.help import HelpScreen, screen_keys
from .screens.overview import OverviewScreen
from .screens.replay import ReplayScreen
from .screens.runs import RunsScreen
from .screens.settings import SettingsScreen
from .screens.tag_queue import TagQueueScreen
from .screens.tasks import TasksScreen
from .typed_app import BandpassAppServices
from .widgets.cursor_rest import CursorRest
from .widgets.live_episodes import LiveEpisodes
from .widgets.option_list import guard_page_keys


def freeze_startup_objects() -> None:
    """Moves everything alive at start-up (modules, Textual, the app) out of the cyclic collector's reach.

    A full collection walks every tracked object while holding the GIL, so a worker that allocates (the tag
    queue reading 10,000 failures) stalled the UI thread for ~0.2 s walking ~360,000 start-up objects that
    live as long as the app anyway; frozen, they are skipped (stall ~0.04 s, bench/bench_diagnosis.py).
    Objects made later (screens, loaded rows) are collected as before. Garbage is collected first, so only
    live objects are frozen; once per process (tests mount many apps)."""
    global _FROZEN
    if not _FROZEN:
        gc.collect()
        gc.freeze()
        _FROZEN = True


_FROZEN = False


guard_page_keys()  # Textual 8.2's OptionList page keys before layout (tui/widgets/option_list.py)


class BandpassApp(SafeApp, CursorRest, App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "Bandpass"
    #: Under 120 columns a screen is ``-narrow``: the list screens (Episodes, the Tag queue) put their
    #: detail pane under the table instead of beside it, so the table keeps every column that says what a
    #: row is (a side pane left it 60 cells at 100 columns, and the task column dropped out).
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]
    #: The footer shows only Search (all), Help and Quit of these; the rest are in the help page (?)
    #: and the palette.
    BINDINGS = [
        Binding("0", "switch_mode('overview')", "Overview", show=False),
        Binding("1", "switch_mode('tasks')", "Tasks", show=False),
        Binding("2", "switch_mode('runs')", "Runs", show=False),
        Binding("3", "switch_mode('generate')", "Generate", show=False),
        Binding("4", "switch_mode('settings')", "Settings", show=False),
        Binding("5", "switch_mode('calibration')", "Calibration", show=False),
        Binding("6", "show_replay", "Replay episode", show=False),
        Binding("7", "show_tags", "Tag queue", show=False),
        Binding("8", "show_episodes", "Episodes", show=False),
        Binding("ctrl+f", "search", "Search", tooltip="Search all"),
        Binding("ctrl+t", "change_theme", "Theme", show=False),
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        workspace: Workspace,
        *,
        bus: EventBus | None = None,
        show_path: bool = True,
        start: str = "tasks",
    ) -> None:
        super().__init__()
        episode_hooks.install()  # what the Runs and Calibration screens run is diagnosed and indexed
        self.workspace = workspace
        self.bus = bus if bus is not None else default_bus
        #: Episodes running now, fed from the bus from the start (before Runs is ever opened).
        self.live = LiveEpisodes(self.bus)
        self.live.start()
        #: Version ids the Tasks screen's filter shows: the default scope of a new rollout batch (None:
        #: Tasks was not opened yet; an empty list: the filter shows nothing, so a batch runs nothing).
        self.task_scope: list[int] | None = None
        #: Bumped whenever tasks were added (generation, import): Tasks reloads when shown next.
        self.tasks_changed = 0
        self.sub_title = str(workspace.root) if show_path else "workspace"
        #: The mode shown first: Tasks, or Overview for the demo (``bandpass demo``).
        self.start_mode = start
        #: The areas (modes) switched away from, latest last: Escape goes back along it (navigation.py).
        self.mode_trail: list[str] = []
        self.error_root = workspace.root  # where tui/errors.py logs what the session survived
        self.add_mode("overview", partial(OverviewScreen, workspace))
        self.add_mode("tasks", partial(TasksScreen, workspace))
        self.add_mode("runs", partial(RunsScreen, workspace))
        self.add_mode("generate", partial(GenerateScreen, workspace))
        self.add_mode("settings", partial(SettingsScreen, workspace))
        self.add_mode("calibration", partial(CalibrationScreen, workspace))
        self.add_mode("tags", partial(TagQueueScreen, workspace))

    def on_mount(self) -> None:
        freeze_startup_objects()
        leftovers.set_reporter(self._report_reaped)
        self.switch_mode(self.start_mode)

    def switch_mode(self, mode: str) -> AwaitMount:
        """Records the area left, so that Escape returns there (a screen opened on the Overview goes
        back to the Overview, not to Tasks)."""
        current = self._current_mode
        if mode != current and current in self._modes:
            self.mode_trail.append(current)
            del self.mode_trail[:-32]
        return super().switch_mode(mode)

    def on_unmount(self) -> None:
        leftovers.set_reporter(None)
        self.live.stop()

    def _report_reaped(self, message: str) -> None:
        """What this process's first contact with the engine reaped (containers of Bandpass processes
        that are gone: engine/sandbox/leftovers.py), as a notification; called from any thread."""
        try:
            self.call_from_thread(self.notify, message, title="Leftover containers", timeout=10)
        except RuntimeError:  # on the app's own thread
            self.notify(message, title="Leftover containers", timeout=10)

    def action_show_replay(self) -> None:
        """Replays the episode the current screen points at (Runs: the focused pane; Tasks: the
        highlighted task's latest finished episode). Replay is pushed, not a mode: it needs an episode,
        and its own digit keys seek, so Escape is the way back."""
        opener = getattr(self.screen, "action_open_replay", None)
        if opener is None:
            self.notify(
                "Open Tasks, Episodes (8), the Tag queue (7) or Runs and pick an episode to replay.",
                severity="warning",
            )
            return
        opener()

    def action_show_tags(self) -> None:
        self.switch_mode("tags")

    def action_help(self) -> None:
        """Every key of the active screen (its own, its focused widget's, the app's) in one page."""
        screen = self.screen
        if isinstance(screen, HelpScreen):
            return
        name = type(screen).__name__.removesuffix("Screen")
        title = "".join(f" {c}" if c.isupper() else c for c in name).strip().capitalize()
        self.push_screen(HelpScreen(title, screen_keys(screen)))

    def action_show_episodes(self) -> None:
        """The Episodes view, of the task highlighted in Tasks (else of every task); pushed like Replay."""
        from .screens.episodes import EpisodesScreen, task_under_cursor

        self.push_screen(EpisodesScreen(self.workspace, task=task_under_cursor(self.workspace, self.screen)))

    def action_search(self) -> None:
        """Search what every terminal showed, across all episodes (pushed like Episodes; from the search
        screen itself, the query line takes the focus)."""
        from .screens.search import SearchScreen

        if isinstance(self.screen, SearchScreen):
            self.screen.action_focus_query()
            return
        self.push_screen(SearchScreen(self.workspace))

    def open_replay(self, episode_id: int) -> None:
        """Opens an episode in the Replay screen (a missing recording is shown there, as its error)."""
        self.push_screen(ReplayScreen(self.workspace, episode_id=episode_id))

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        """Every binding of the screen, its focused widget and the app as a palette command (the
        footer's and the help page's twin) — the only provider, so nothing is listed twice. App keys a
        screen reuses (Replay's and the tag queue's digits) are still offered here, by name."""
        yield from super().get_system_commands(screen)
        seen: set[str] = {"quit", "change_theme", "Quit", "Theme"}  # actions and titles Textual offers
        active = [(node, b, enabled) for node, b, enabled, _tip in screen.active_bindings.values()]
        active.sort(key=lambda a: 0 if a[0] is screen else 2 if a[0] is self else 1)  # screen's name wins
        own = [b for b in self.BINDINGS if isinstance(b, Binding)]
        for node, binding, enabled in [*active, *((self, b, True) for b in own)]:
            name = full_name(binding)
            if not enabled or not binding.description or {binding.action, name} & seen:
                continue
            seen.update((binding.action, name))
            reachable = any(b is binding for _n, b, _e in active)  # else a screen took its key
            yield SystemCommand(
                name,
                self._command_help(binding, name, reachable),
                partial(self.run_action, binding.action, node),
            )

    def _command_help(self, binding: Binding, name: str, reachable: bool) -> str:
        """A palette entry's second line: its key (and the tooltip where it says more than the name),
        never the name again — "Episodes" over "Episodes (8)" read as every command listed twice."""
        key = binding.key_display or self.get_key_display(binding)
        where = f"key {key}" if reachable else "no key on this screen (its key does something else here)"
        extra = binding.tooltip if binding.tooltip and binding.tooltip.lower() != name.lower() else ""
        return f"{extra} · {where}" if extra else where


if TYPE_CHECKING:
    # The screens reach the app through this protocol (tui/typed_app.py): the app must give all of it.
    _gives_the_screens_what_they_use: type[BandpassAppServices] = BandpassApp
