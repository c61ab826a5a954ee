"""The Textual application: screens over one workspace.

The app holds the workspace and nothing else global; screens read through ``store`` queries (in workers
when a read can be slow) and act through ``engine``, never through Docker directly.
"""

from __future__ import annotations

from textual.app import App
from textual.binding import Binding

from engine.workspace import Workspace
from tui.screens.tasks import TasksScreen


class BandpassApp(App[None]):
    CSS_PATH = "app.tcss"
    TITLE = "Bandpass"
    BINDINGS = [
        Binding("q", "quit", "Quit"),
        Binding("t", "show_tasks", "Tasks"),
    ]

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace
        self.sub_title = str(workspace.root)

    def on_mount(self) -> None:
        self.push_screen(TasksScreen(self.workspace))

    def action_show_tasks(self) -> None:
        if not isinstance(self.screen, TasksScreen):
            self.push_screen(TasksScreen(self.workspace))
