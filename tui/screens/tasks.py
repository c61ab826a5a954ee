"""Tasks screen: every task's latest version with its audit verdict and evidence counts."""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from engine.workspace import Workspace
from store import queries
from store.db import session

COLUMNS = ("task", "version", "category", "difficulty", "audit", "episodes", "passed", "tags")


class TasksScreen(Screen[None]):
    CSS_PATH = "tasks.tcss"
    BINDINGS = [
        Binding("r", "refresh", "Refresh"),
        Binding("slash", "focus_filter", "Filter"),
        Binding("escape", "clear_filter", "Clear filter", show=False),
    ]

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace
        self._rows: list[queries.TaskRow] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Vertical(id="tasks-body"):
            yield Input(placeholder="filter by name, category, difficulty, audit…", id="task-filter")
            yield DataTable(id="task-table", cursor_type="row", zebra_stripes=True)
            yield Static("", id="task-summary")
        yield Footer()

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns(*COLUMNS)
        self.action_refresh()
        table.focus()

    def action_refresh(self) -> None:
        with session(self.workspace.engine) as s:
            self._rows = queries.task_rows(s)
        self._fill(self.query_one("#task-filter", Input).value)

    def _fill(self, needle: str) -> None:
        table = self.query_one(DataTable)
        table.clear()
        needle = needle.strip().lower()
        shown = 0
        for r in self._rows:
            hay = f"{r.name} {r.category} {r.difficulty} {r.audit}".lower()
            if needle and needle not in hay:
                continue
            table.add_row(
                r.name,
                r.version_hash[:12],
                r.category,
                r.difficulty,
                r.audit or "—",
                str(r.episodes),
                str(r.passed),
                str(r.tags),
                key=str(r.version_id),
            )
            shown += 1
        self.query_one("#task-summary", Static).update(
            f"{shown} of {len(self._rows)} tasks · workspace {self.workspace.root}"
        )

    def on_input_changed(self, event: Input.Changed) -> None:
        self._fill(event.value)

    def action_focus_filter(self) -> None:
        self.query_one("#task-filter", Input).focus()

    def action_clear_filter(self) -> None:
        self.query_one("#task-filter", Input).value = ""
        self.query_one(DataTable).focus()
