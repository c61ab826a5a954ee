"""Search screen (ctrl+f from anywhere): what every terminal showed, across all episodes, by hit.

Why: a curator's question is often "where else did this happen?" — the same traceback, the same
``command not found``, the same stuck ``>>>``. The hits are listed by episode (best first) with the
terminal, step, cast time and the line; Enter opens Replay on the frame where the line is visible, the
match highlighted (``n``/``N`` there step through the episode's other hits); ``t`` tags every listed
episode at once; ``a`` adds the highlighted hit's episode to a comparison (the second one opens Compare).

The query line takes the query language of ``bandpass search`` plus filter words ``task:NAME
agent:NAME model:NAME outcome:KIND terminal:agent|verifier``. Index upkeep and queries run in thread
workers: on opening, episodes the index lacks are indexed first (with progress in the status line).
"""

from __future__ import annotations

import threading

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Static

from ...engine.app.search import (
    Filters,
    Hit,
    Matcher,
    QueryError,
    SearchResult,
    build_index,
    episode_hits,
    search,
)
from ...engine.app.tagging import Tagger, plan_for
from ...engine.core.workspace import Workspace
from ..errors import refusals
from .replay_search import SearchHits, clock
from .tag_dialog import open_tag_dialog

COLUMNS = ("episode", "task", "agent", "outcome", "terminal", "step", "time", "line")
#: Under ``WIDE_AT`` terminal columns the hits keep the episode, its task, where and the matching line:
#: with all eight at 100 columns the line — what was searched for — showed 3 characters. The agent, the
#: outcome and the terminal are on the detail line under the table.
NARROW_COLUMNS = ("episode", "task", "step", "time", "line")
WIDE_AT = 140
FILTER_KEYS = ("task", "agent", "model", "outcome", "terminal")
#: Hits listed per episode (Replay's n/N reach the rest).
HITS_PER_EPISODE = 20
MATCH_STYLE = "reverse"


def split_filters(text: str) -> tuple[str, dict[str, str]]:
    """``task:x "a phrase" agent:y`` -> ('"a phrase"', {"task": "x", "agent": "y"})."""
    words: list[str] = []
    fields: dict[str, str] = {}
    in_quote = False
    for tok in text.split(" "):
        key, sep, value = tok.partition(":")
        if not in_quote and sep and key in FILTER_KEYS and value:
            fields[key] = value
        else:
            words.append(tok)
        if tok.count('"') % 2:
            in_quote = not in_quote
    return " ".join(words).strip(), fields


def marked(text: str, matcher: Matcher) -> Text:
    out = Text(text, no_wrap=True, overflow="ellipsis")
    for a, b in matcher.spans(text):
        out.stylize(MATCH_STYLE, a, b)
    return out


class SearchScreen(Screen[None]):
    CSS_PATH = "search.tcss"
    BINDINGS = [
        Binding("enter", "replay", "Replay at hit"),
        Binding("slash", "focus_query", "Query", key_display="/"),
        Binding("t", "tag_all", "Tag all listed"),
        Binding("a", "add_compare", "Add to compare"),
        Binding("u", "undo", "Undo tag", show=False),
        Binding("r", "refresh", "Re-index & search", show=False),
        Binding("escape", "back", "Back"),
    ]

    def __init__(self, ws: Workspace, *, query: str = "", tagger: Tagger | None = None) -> None:
        super().__init__()
        self.ws = ws
        self.initial = query
        self.result: SearchResult | None = None
        self.rows: list[Hit] = []  # one per table row
        self.compare: list[int] = []
        self.indexing = False
        self._tagger = tagger
        self._stop = threading.Event()

    def compose(self) -> ComposeResult:
        yield Header()
        yield Input(
            value=self.initial,
            placeholder='search every terminal: words, "a phrase", prefix*, a OR b, a NOT b;'
            " filters task: agent: model: outcome: terminal:",
            id="search-query",
        )
        yield Static("", id="search-status", markup=False)
        yield DataTable(id="search-hits", cursor_type="row", zebra_stripes=True)
        with VerticalScroll(id="search-detail"):
            yield Static("", id="search-context")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.sub_title = "search what the terminals showed"
        self.query_one(DataTable).add_columns(*self._layout())
        self.query_one("#search-query", Input).focus()
        self.action_refresh()

    def _layout(self) -> tuple[str, ...]:
        return COLUMNS if self.size.width >= WIDE_AT else NARROW_COLUMNS

    def on_resize(self) -> None:
        """Crossing ``WIDE_AT`` lists the hits again in the other layout (the cursor stays on its row)."""
        table = next(self.query("#search-hits").results(DataTable), None)
        if table is None or self.result is None:
            return
        if tuple(str(c.label) for c in table.columns.values()) != self._layout():
            row = table.cursor_row
            self._show(self.result)
            table.move_cursor(row=row)

    def on_unmount(self) -> None:
        self._stop.set()

    # --- index upkeep and queries (thread workers) --- #

    def status(self, text: str) -> None:
        self.query_one("#search-status", Static).update(text)

    def action_refresh(self) -> None:
        """Indexes the episodes the index lacks, then runs the query."""
        if self.indexing:
            return
        self.indexing = True
        self.status("checking the search index…")

        def progress(done: int, total: int) -> None:
            if total:
                self.app.call_from_thread(self.status, f"indexing episodes: {done}/{total}…")

        def work() -> None:
            try:
                report = build_index(self.ws, progress=progress, stop=self._stop)
            finally:
                self.app.call_from_thread(self._indexed)
            if report.notes:
                self.app.call_from_thread(self.notify, "\n".join(report.notes[:5]), severity="warning")

        self.run_worker(work, thread=True, group="search-index", exit_on_error=False)

    def _indexed(self) -> None:
        self.indexing = False
        self.run_query()

    def run_query(self) -> None:
        text, fields = split_filters(self.query_one("#search-query", Input).value)
        if not text.strip():
            self.status("type a query and press Enter (ctrl+f opens this screen from anywhere)")
            return
        try:
            matcher = Matcher.of(text)
            filters = Filters(**fields)
        except QueryError as exc:
            self.status(f"query: {exc}")
            return
        self.status(f"searching for {text}…")

        def work() -> None:
            result = search(self.ws, matcher, filters=filters, limit=50)
            self.app.call_from_thread(self._show, result)

        self.run_worker(work, thread=True, group="search-query", exclusive=True, exit_on_error=False)

    def _show(self, result: SearchResult) -> None:
        self.result = result
        table = self.query_one(DataTable)
        layout = self._layout()
        if tuple(str(c.label) for c in table.columns.values()) != layout:
            table.clear(columns=True)
            table.add_columns(*layout)
        table.clear()
        self.rows = []
        for ep in result.episodes:
            for n, hit in enumerate(ep.hits[:HITS_PER_EPISODE]):
                first = n == 0
                cells: dict[str, str | Text] = {
                    "episode": str(ep.episode_id) if first else "",
                    "task": ep.task if first else "",
                    "agent": ep.agent if first else "",
                    "outcome": (ep.outcome or "unfinished") if first else "",
                    "terminal": hit.terminal,
                    "step": str(hit.step) if hit.step is not None else "—",
                    "time": clock(hit.time),
                    "line": marked(hit.text, result.matcher),
                }
                table.add_row(*(cells[c] for c in layout))
                self.rows.append(hit)
        self.status(self.status_text())
        if self.rows:
            table.focus()
        self._refresh_detail()

    def status_text(self) -> str:
        r = self.result
        if r is None:
            return ""
        if not r.episodes:
            where = f" ({r.filters.describe()})" if r.filters.describe() else ""
            return f"no episode matches {r.query}{where}"
        ranked = "ranked" if r.ranked_by == "bm25" else "newest first: too many to rank"
        compare = f" · compare: episode {self.compare[0]} (a: add one more)" if self.compare else ""
        return (
            f"{'more than ' if r.matched_more else ''}{r.matched_docs} terminal{'s' * (r.matched_docs != 1)}"
            f" match{'es' * (r.matched_docs == 1 and not r.matched_more)}"
            f" · {len(r.episodes)} episode{'s' * (len(r.episodes) != 1)} listed,"
            f" {len(self.rows)} hit{'s' * (len(self.rows) != 1)}"
            f" ({ranked}) · {r.seconds * 1000:.0f} ms{compare}"
        )

    @property
    def current(self) -> Hit | None:
        table = self.query_one(DataTable)
        if not self.rows or not 0 <= table.cursor_row < len(self.rows):
            return None
        return self.rows[table.cursor_row]

    def _refresh_detail(self) -> None:
        hit = self.current
        ctx = self.query_one("#search-context", Static)
        if hit is None or self.result is None:
            ctx.update("")
            return
        ep = next(e for e in self.result.episodes if e.episode_id == hit.episode_id)
        out = Text()
        step = f"step {hit.step}" if hit.step is not None else "no step"
        when = clock(hit.time)
        out.append(
            f"episode {ep.episode_id} · {ep.task} · {ep.agent} · {ep.outcome} · {hit.terminal} · {step}"
            f" · {when} · {len(ep.hits)} hit{'s' * (len(ep.hits) != 1)} in this episode\n",
            style="bold",
        )
        for b in hit.before:
            out.append(f"  {b}\n", style="dim")
        out.append("> ")
        out.append_text(marked(hit.text, self.result.matcher))
        out.append("\n")
        for a in hit.after:
            out.append(f"  {a}\n", style="dim")
        ctx.update(out)

    # --- events and actions --- #

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        if self.indexing:
            self.status("still indexing; the query runs when it is done")
            return
        self.run_query()

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self._refresh_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_replay()

    def action_focus_query(self) -> None:
        self.query_one("#search-query", Input).focus()

    def action_open_replay(self) -> None:
        """``6`` (the app's Replay key): the highlighted hit, as Enter."""
        self.action_replay()

    def action_replay(self) -> None:
        """Replay of the highlighted hit's episode, on the frame where the hit is visible."""
        hit = self.current
        if hit is None or self.result is None:
            return
        hits = episode_hits(self.ws, hit.episode_id, self.result.matcher)
        at = next(
            (n for n, h in enumerate(hits) if h.terminal == hit.terminal and h.line == hit.line),
            0,
        )
        from .replay import ReplayScreen

        self.app.push_screen(
            ReplayScreen(self.ws, episode_id=hit.episode_id, search=SearchHits(self.result.query, hits, at))
        )

    @property
    def tagger(self) -> Tagger:
        if self._tagger is None:
            self._tagger = Tagger(self.ws)
        return self._tagger

    def action_tag_all(self) -> None:
        """One tag on the listed episodes it may go on (one undo takes it back): the dialog states the
        strongest evidence's suggestion, how many it tags and which it leaves out — a passed episode for a
        failure class, a member whose own evidence suggests another tag (engine/review/tag_choice.py)."""
        if self.result is None or not self.result.episodes:
            self.notify("search first: the listed episodes are what t tags", severity="warning")
            return
        ids = [e.episode_id for e in self.result.episodes]
        more = self.result.matched_more or self.result.matched_docs > len(ids)
        what = f"{len(ids)} listed episode{'s' * (len(ids) != 1)} matching {self.result.query}"
        if more:
            what += " (the best listed; narrow the query to reach the rest)"
        with refusals(self):
            open_tag_dialog(self, self.tagger, plan_for(self.ws, ids), targets=what)

    def action_undo(self) -> None:
        """Takes back the last tag written here (all the episodes ``t`` tagged, at once)."""
        label = self.tagger.undo()
        self.notify(f"undone: {label}" if label else "nothing to undo", timeout=3)

    def action_add_compare(self) -> None:
        hit = self.current
        if hit is None:
            return
        if hit.episode_id in self.compare:
            self.notify(f"episode {hit.episode_id} is already picked: add another one", timeout=3)
            return
        self.compare.append(hit.episode_id)
        if len(self.compare) < 2:
            self.status(self.status_text())
            self.notify(f"episode {hit.episode_id} added to compare: a on another hit opens Compare")
            return
        left, right = self.compare[:2]
        self.compare = []
        self.status(self.status_text())
        from .compare import CompareScreen

        self.app.push_screen(CompareScreen(self.ws, left, right))

    def action_back(self) -> None:
        query = self.query_one("#search-query", Input)
        if query.has_focus and self.rows:
            self.query_one(DataTable).focus()
        elif self.compare:
            self.compare = []
            self.status(self.status_text())
        else:
            self.dismiss(None)
