"""The Textual application: the curator's cockpit over one workspace.

Each area (Tasks, Runs, Generate, Settings, Calibration, and the tag queue when present) is a Textual *mode*:
each keeps its own screen stack, so switching to Tasks while a batch runs leaves the Runs panes alive
and still receiving output. The app holds only what all screens share: the workspace, the event bus the
engine publishes on, and the task scope the Tasks filter last produced (what a new batch runs over).

Every binding of the app and of the active screen is also offered in the command palette (ctrl+p), so
nothing is reachable only by a key the curator has to remember. Engine work never runs on the UI thread:
screens start it in workers and report failures as notifications.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable
from functools import partial

from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from engine.core.events import EventBus
from engine.core.events import bus as default_bus
from engine.core.workspace import Workspace
from tui.screens.calibration import CalibrationScreen
from tui.screens.generate import GenerateScreen
from tui.screens.runs import RunsScreen
from tui.screens.settings import SettingsScreen
from tui.screens.tasks import TasksScreen
from tui.widgets.live_episodes import LiveEpisodes


def _optional_screen(module: str, name: str, ws: Workspace) -> Callable[[], Screen] | None:
    """A screen another engineer owns, registered only when its module imports (no hard dependency)."""
    try:
        cls = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError):
        return None
    return partial(cls, ws)


class BandpassApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "Bandpass"
    BINDINGS = [
        Binding("1", "switch_mode('tasks')", "Tasks"),
        Binding("2", "switch_mode('runs')", "Runs"),
        Binding("3", "switch_mode('generate')", "Generate"),
        Binding("4", "switch_mode('settings')", "Settings"),
        Binding("5", "switch_mode('calibration')", "Calibration"),
        Binding("6", "show_replay", "Replay episode"),
        Binding("7", "show_tags", "Tag queue"),
        Binding("8", "show_episodes", "Episodes"),
        Binding("ctrl+t", "change_theme", "Theme"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        workspace: Workspace,
        *,
        bus: EventBus | None = None,
        show_path: bool = True,
    ) -> None:
        super().__init__()
        self.workspace = workspace
        self.bus = bus if bus is not None else default_bus
        #: Episodes running now, fed from the bus from the start (before Runs is ever opened).
        self.live = LiveEpisodes(self.bus)
        self.live.start()
        #: Version ids the Tasks screen's filter shows: the default scope of a new rollout batch.
        self.task_scope: list[int] = []
        #: Bumped whenever tasks were added (generation, import): Tasks reloads when shown next.
        self.tasks_changed = 0
        self.sub_title = str(workspace.root) if show_path else "workspace"
        self.add_mode("tasks", partial(TasksScreen, workspace))
        self.add_mode("runs", partial(RunsScreen, workspace))
        self.add_mode("generate", partial(GenerateScreen, workspace))
        self.add_mode("settings", partial(SettingsScreen, workspace))
        self.add_mode("calibration", partial(CalibrationScreen, workspace))
        tags = _optional_screen("tui.screens.tag_queue", "TagQueueScreen", workspace)
        if tags is not None:
            self.add_mode("tags", tags)

    def on_mount(self) -> None:
        self.switch_mode("tasks")

    def on_unmount(self) -> None:
        self.live.stop()

    def action_show_replay(self) -> None:
        """Replays the episode the current screen points at (Runs: the focused pane; Tasks: the
        highlighted task's latest finished episode). Replay is pushed, not a mode: it needs an episode,
        and its own digit keys seek, so Escape is the way back."""
        opener = getattr(self.screen, "action_open_replay", None)
        if opener is None:
            self.notify("Open Runs or Tasks and pick an episode to replay.", severity="warning")
            return
        opener()

    def action_show_tags(self) -> None:
        if "tags" in self._modes:
            self.switch_mode("tags")
        else:
            self.notify("The tag queue is not installed in this build.", severity="warning")

    def action_show_episodes(self) -> None:
        """The Episodes view, of the task highlighted in Tasks (else of every task); pushed like Replay."""
        from tui.screens.episodes import EpisodesScreen, task_under_cursor

        self.push_screen(EpisodesScreen(self.workspace, task=task_under_cursor(self.workspace, self.screen)))

    def open_replay(self, episode_id: int) -> None:
        """Opens an episode in the Replay screen (hook: the replay module decides how it takes one)."""
        try:
            mod = importlib.import_module("tui.screens.replay")
            cls = mod.ReplayScreen
            self.push_screen(cls(self.workspace, episode_id=episode_id))
        except Exception as exc:  # noqa: BLE001 - missing or different API: say so, don't crash
            self.notify(f"Replay unavailable: {exc}", severity="warning")

    def get_system_commands(self, screen: Screen) -> Iterable[SystemCommand]:
        """Every visible binding, app and screen, as a palette command (the footer's twin)."""
        yield from super().get_system_commands(screen)
        seen: set[str] = {"quit", "change_theme"}
        for node, binding, enabled, _tooltip in screen.active_bindings.values():
            if not enabled or not binding.description or binding.action in seen:
                continue
            seen.add(binding.action)
            key = binding.key_display or self.get_key_display(binding)
            yield SystemCommand(
                binding.description,
                f"{binding.description} ({key})",
                partial(self.run_action, binding.action, node),
            )
