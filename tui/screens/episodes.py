"""Episodes screen: every episode (of one task, or all), filtered, opened in Replay, or two compared.

Why: the tag queue shows what waits for a tag; a curator debugging a task also needs the passes, the
probes and any older episode — "it passed on attempt 2, why did attempt 3 fail?" — and to put two side
by side. The filter line takes ``task:NAME agent:NAME outcome:KIND batch:ID`` and free words (matched
against every column), so the same filters as ``bandpass episodes`` are one line away.
"""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Input, Static

from ...engine.app import reads
from ...engine.app.episodes import strip_controls
from ...engine.core.outcomes import reward_label
from ...engine.core.workspace import Workspace
from ..errors import Guarded
from ..navigation import go_back
from ..widgets.virtual_table import Column, VirtualTable, numeric_key, shorten_outcome


def _short_reward(text: str) -> str:
    """``0 (verifier gave 1: void)`` -> ``0 (void)``; ``none (infra)`` -> ``none``: narrow columns."""
    return text.split(" (", 1)[0] + (" (void)" if "void" in text else "")


#: Chosen by priority to fit the table (0: always; higher numbers drop out first): what a row is (episode,
#: task), its agent, outcome, reward, diagnosis and tags stay on screen at 80, 100 and 160 terminal columns
#: (their narrowest widths add up to the 76 cells an 80-column terminal leaves the table)
#: (tui/widgets/virtual_table.fit_columns; tests/tui/screens/test_column_priorities.py).
COLUMNS = (
    Column("mark", "", 1),
    Column("episode", "episode", 7, "right", sort_key=numeric_key),
    Column("task", "task", 22, min_width=11),
    Column("agent", "agent", 18, min_width=9),
    Column("outcome", "outcome", 24, min_width=12, shorten=shorten_outcome, grow_first=True),
    Column("reward", "reward", 10, min_width=8, shorten=_short_reward),
    Column("diagnosis", "diagnosis", 24, min_width=11),
    Column("tags", "tags", 18, min_width=9),
    Column("version", "version", 12, priority=4),
    Column("batch", "batch", 22, priority=3, min_width=10),
)
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


class EpisodesScreen(Guarded, Screen[None]):
    CSS_PATH = "episodes.tcss"
    #: The table, not a text field: digits switch screens (an Input would take them as text).
    AUTO_FOCUS = "#episodes-table"
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
        self.rows: list[reads.EpisodeListRow] = []
        self.shown: list[reads.EpisodeListRow] = []
        self.marked: list[int] = []
        self._by_id: dict[int, reads.EpisodeListRow] = {}

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            value=f"task:{self.task_name}" if self.task_name else "",
            placeholder="filter: task:NAME agent:NAME outcome:failed|agent_error|infra_error batch:ID words…",
            id="episodes-filter",
        )
        with Horizontal(id="episodes-body"):
            yield VirtualTable(COLUMNS, id="episodes-table")
            with VerticalScroll(id="episodes-detail"):
                yield Static("", id="episodes-info", markup=False)
        yield Static("", id="episodes-status")
        yield Footer(compact=True)

    @property
    def table(self) -> VirtualTable:
        return self.query_one("#episodes-table", VirtualTable)

    def on_mount(self) -> None:
        self.sub_title = f"episodes of {self.task_name}" if self.task_name else "all episodes"
        self.action_refresh()
        self.table.focus()

    # --- data --- #

    def action_refresh(self) -> None:
        """Reads the episodes again (after a Replay: tags may have changed); the cursor stays on the
        episode it was on."""
        fields, _ = parse_filter(self.query_one("#episodes-filter", Input).value)
        self.rows = reads.episode_list(
            self.ws,
            task=fields.get("task"),
            agent=fields.get("agent"),
            outcome=fields.get("outcome"),
            batch_id=fields.get("batch"),
        )
        self._apply()

    @staticmethod
    def cells(r: reads.EpisodeListRow, marked: bool) -> tuple[str, ...]:
        return (
            "◆" if marked else "",
            str(r.episode_id),
            r.task,
            r.agent,
            r.outcome or r.status,
            reward_label(r.outcome, r.reward),  # what it counts for: an agent error's 0, says why
            r.diagnosis,
            ", ".join(r.tags),
            r.version_hash[:12],
            r.batch_id,
        )

    def _apply(self) -> None:
        _, words = parse_filter(self.query_one("#episodes-filter", Input).value)
        rows = []
        self.shown = []
        for r in self.rows:
            cells = self.cells(r, r.episode_id in self.marked)
            hay = " ".join(cells).lower()
            if all(w in hay for w in words):
                self.shown.append(r)
                rows.append((r.episode_id, cells))
        self._by_id = {r.episode_id: r for r in self.shown}
        self.table.set_rows(rows)  # keeps the cursor on the same episode when it is still listed
        self._refresh_detail()

    def table_rows(self) -> list[tuple[str, ...]]:
        """The rows as shown (every cell, hidden columns too): what tests read."""
        return self.table.shown_rows()

    @property
    def current(self) -> reads.EpisodeListRow | None:
        key = self.table.cursor_key
        return self._by_id.get(key) if key is not None else None

    def status_text(self) -> str:
        marked = f" · marked {', '.join(map(str, self.marked))} (c: compare)" if self.marked else ""
        n = len(self.rows)
        return f"{len(self.shown)} of {n} episode{'s' * (n != 1)}{marked} · space: mark two · /: filter"

    def _refresh_detail(self) -> None:
        self.query_one("#episodes-status", Static).update(self.status_text())
        cur = self.current
        info = self.query_one("#episodes-info", Static)
        if cur is None:
            info.update("no episodes match" if self.rows else "no episodes yet: run a batch (2, Runs)")
            return
        from ...engine.app.episodes import EpisodeNotFound, episode_record, why_lines

        try:
            rec = episode_record(self.ws, cur.episode_id)
        except EpisodeNotFound:  # removed since the list was read
            info.update(f"episode {cur.episode_id} no longer exists (r: refresh)")
            return
        lines = [
            f"episode {cur.episode_id} · {cur.task} · {cur.agent}",
            *why_lines(rec, checks=8, evidence=6),
        ]
        tail = strip_controls(rec["verifier_output_tail"]).splitlines()[-15:]
        if tail:
            lines += ["", "verifier output (tail):", *tail]
        info.update("\n".join(lines))

    def on_virtual_table_row_highlighted(self, _: VirtualTable.RowHighlighted) -> None:
        self._refresh_detail()

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        event.stop()
        self.action_replay()

    def on_input_changed(self, _: Input.Changed) -> None:
        self._apply()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.action_refresh()
        self.table.focus()

    # --- actions --- #

    def action_focus_filter(self) -> None:
        self.query_one("#episodes-filter", Input).focus()

    def action_open_replay(self) -> None:
        """``6`` (the app's Replay key, as the Overview promises): the highlighted episode."""
        self.action_replay()

    def action_replay(self) -> None:
        cur = self.current
        if cur is None:
            return
        from .replay import ReplayScreen

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
        self._apply()

    def action_compare(self) -> None:
        pair = list(self.marked)
        cur = self.current
        if len(pair) == 1 and cur is not None and cur.episode_id not in pair:
            pair.append(cur.episode_id)
        if len(pair) != 2:
            self.notify("mark two episodes with space (or one, then highlight the other)", severity="warning")
            return
        from .compare import CompareScreen

        self.app.push_screen(CompareScreen(self.ws, pair[0], pair[1]))

    def action_back(self) -> None:
        if self.query_one("#episodes-filter", Input).has_focus:
            self.table.focus()
        elif self.marked:
            self.marked = []
            self._apply()
        else:
            go_back(self)


def task_under_cursor(ws: Workspace, screen: Screen[Any]) -> str | None:
    """The task the Tasks screen highlights (Episodes opens on it), else None."""
    from ..widgets.virtual_table import VirtualTable
    from .tasks import TasksScreen

    if not isinstance(screen, TasksScreen):
        return None
    vid = screen.query_one(VirtualTable).cursor_key
    if vid is None:
        return None
    return reads.task_name_of_version(ws, vid)
