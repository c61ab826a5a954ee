"""Episodes screen: every episode (of one task, or all), filtered, opened in Replay, or two compared.

Why: the tag queue shows what waits for a tag; a curator debugging a task also needs the passes, the
probes and any older episode — "it passed on attempt 2, why did attempt 3 fail?" — and to put two side
by side. The filter line takes ``task:NAME agent:NAME outcome:KIND batch:ID`` and free words (matched
against every column), so the same filters as ``bandpass episodes`` are one line away.
"""

from __future__ import annotations

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from engine.core.workspace import Workspace
from engine.review.text import strip_controls
from store import diagnoses as dq
from store.db import session

COLUMNS = ("", "episode", "task", "agent", "outcome", "diagnosis", "reward", "tags", "version", "batch")
FIELDS = ("task", "agent", "outcome", "batch")


def parse_filter(text: str) -> tuple[dict[str, str], list[str]]:
    """``task:x agent:y free words`` -> ({"task": "x", "agent": "y"}, ["free", "words"])."""
    fields: dict[str, str] = {}
    words: list[str] = []
    for tok in text.split():
        key, sep, value = tok.partition(":")
        if sep and key in FIELDS and value:
            fields[key] = value
        else:
            words.append(tok.lower())
    return fields, words


class EpisodesScreen(Screen[None]):
    CSS_PATH = "episodes.tcss"
    BINDINGS = [
        Binding("enter", "replay", "Replay"),
        Binding("space", "mark", "Mark to compare"),
        Binding("c", "compare", "Compare two"),
        Binding("slash", "focus_filter", "Filter", key_display="/"),
        Binding("r", "refresh", "Refresh", show=False),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, ws: Workspace, *, task: str | None = None) -> None:
        super().__init__()
        self.ws = ws
        self.task_name = task
        self.rows: list[dq.EpisodeListRow] = []
        self.shown: list[dq.EpisodeListRow] = []
        self.marked: list[int] = []

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            value=f"task:{self.task_name}" if self.task_name else "",
            placeholder="filter: task:NAME agent:NAME outcome:failed|agent_error|infra_error batch:ID words…",
            id="episodes-filter",
        )
        with Horizontal(id="episodes-body"):
            yield DataTable(id="episodes-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="episodes-detail"):
                yield Static("", id="episodes-info", markup=False)
        yield Static("", id="episodes-status")
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = f"episodes of {self.task_name}" if self.task_name else "all episodes"
        self.query_one(DataTable).add_columns(*COLUMNS)
        self.action_refresh()
        self.query_one(DataTable).focus()

    # --- data --- #

    def action_refresh(self) -> None:
        fields, _ = parse_filter(self.query_one("#episodes-filter", Input).value)
        with session(self.ws.engine) as s:
            self.rows = dq.episode_list(
                s,
                task=fields.get("task"),
                agent=fields.get("agent"),
                outcome=fields.get("outcome"),
                batch_id=fields.get("batch"),
            )
        self._apply()

    def _apply(self) -> None:
        _, words = parse_filter(self.query_one("#episodes-filter", Input).value)
        table = self.query_one(DataTable)
        table.clear()
        self.shown = []
        for r in self.rows:
            reward = f"{r.reward:g}" if r.reward is not None else "—"
            cells = (
                "◆" if r.episode_id in self.marked else "",
                str(r.episode_id),
                r.task,
                r.agent,
                r.outcome or r.status,
                r.diagnosis,
                reward,
                ", ".join(r.tags),
                r.version_hash[:12],
                r.batch_id,
            )
            hay = " ".join(cells).lower()
            if all(w in hay for w in words):
                self.shown.append(r)
                table.add_row(*cells, key=str(r.episode_id))
        self._refresh_detail()

    @property
    def current(self) -> dq.EpisodeListRow | None:
        table = self.query_one(DataTable)
        if not self.shown or not 0 <= table.cursor_row < len(self.shown):
            return None
        return self.shown[table.cursor_row]

    def status_text(self) -> str:
        marked = f" · marked {', '.join(map(str, self.marked))} (c: compare)" if self.marked else ""
        return f"{len(self.shown)} of {len(self.rows)} episodes{marked} · space: mark two · /: filter"

    def _refresh_detail(self) -> None:
        self.query_one("#episodes-status", Static).update(self.status_text())
        cur = self.current
        info = self.query_one("#episodes-info", Static)
        if cur is None:
            info.update("no episodes match")
            return
        from engine.review.evidence import episode_record, why_lines

        rec = episode_record(self.ws, cur.episode_id)
        lines = [
            f"episode {cur.episode_id} · {cur.task} · {cur.agent}",
            *why_lines(rec, checks=8, evidence=6),
        ]
        tail = strip_controls(rec["verifier_output_tail"]).splitlines()[-15:]
        if tail:
            lines += ["", "verifier output (tail):", *tail]
        info.update("\n".join(lines))

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self._refresh_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_replay()

    def on_input_changed(self, _: Input.Changed) -> None:
        self._apply()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_refresh()
        self.query_one(DataTable).focus()

    # --- actions --- #

    def action_focus_filter(self) -> None:
        self.query_one("#episodes-filter", Input).focus()

    def action_replay(self) -> None:
        cur = self.current
        if cur is None:
            return
        from tui.screens.replay import ReplayScreen

        self.app.push_screen(
            ReplayScreen(self.ws, episode_id=cur.episode_id), lambda _: self.action_refresh()
        )

    def action_mark(self) -> None:
        cur = self.current
        if cur is None:
            return
        if cur.episode_id in self.marked:
            self.marked.remove(cur.episode_id)
        else:
            self.marked = [*self.marked[-1:], cur.episode_id]  # the last two marked
        row = self.query_one(DataTable).cursor_row
        self._apply()
        self.query_one(DataTable).move_cursor(row=row)

    def action_compare(self) -> None:
        pair = list(self.marked)
        cur = self.current
        if len(pair) == 1 and cur is not None and cur.episode_id not in pair:
            pair.append(cur.episode_id)
        if len(pair) != 2:
            self.notify("mark two episodes with space (or one, then highlight the other)", severity="warning")
            return
        from tui.screens.compare import CompareScreen

        self.app.push_screen(CompareScreen(self.ws, pair[0], pair[1]))

    def action_back(self) -> None:
        if self.query_one("#episodes-filter", Input).has_focus:
            self.query_one(DataTable).focus()
        elif self.marked:
            self.marked = []
            self._apply()
        elif self.app.screen_stack[0] is not self:
            self.dismiss(None)
        else:
            self.app.switch_mode("tasks")


def task_under_cursor(ws: Workspace, screen: Screen) -> str | None:
    """The task the Tasks screen highlights (Episodes opens on it), else None."""
    from store import queries
    from store.models import Task
    from tui.screens.tasks import TasksScreen
    from tui.widgets.virtual_table import VirtualTable

    if not isinstance(screen, TasksScreen):
        return None
    vid = screen.query_one(VirtualTable).cursor_key
    if vid is None:
        return None
    with session(ws.engine) as s:
        version = queries.get_version(s, vid)
        task = s.get(Task, version.task_id) if version else None
        return task.name if task else None
