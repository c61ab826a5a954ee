"""Tag queue screen: every finished episode that did not pass, to be tagged one key at a time.

Why a queue: after a rollout batch a curator faces hundreds of failures; most share a cause ("this task
always fails on test_x", "every turn_limit of this model"), so the screen is built for speed — next /
previous pending, ``t`` opens the tag dialog (a digit there picks the class), the diagnosis's suggestion
preselected with ``a`` but never written unconfirmed, a selection of episodes with the same failure
signature tagged in one go, skip for "not now" (persisted), and undo for the slip of a key.

The cluster view (``k``) groups the failures by signature: one row per way of failing, with a preview of
its members; ``a`` on a cluster tags all its untagged members as one undoable bulk tag, Enter lists them.

The queue is read in a worker thread (10,000 failures take seconds to read and group): the screen shows a
loading state meanwhile and stays responsive, and every reload (after a tag, a filter change, ``r``) goes
the same way; what must happen after a reload (moving to the next pending episode) runs when it lands.

Keys stay inside the queue only where it needs them: digits and Escape belong to the app (screen
switches, leaving), so the queue never traps the keyboard. Why each episode ended (outcome, detail, tries,
failing checks, diagnosis and evidence) is in the detail pane; the verifier's output there is plain text
(escape sequences stripped: a task's output must never reach the curator's real terminal).
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from dataclasses import dataclass

from rich.text import Text
from textual import work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import Footer, Header, Static
from textual.worker import get_current_worker

from ...engine.app import reads
from ...engine.app.diagnosis import cluster_id
from ...engine.app.diagnosis import describe_signature as describe
from ...engine.app.episodes import strip_controls
from ...engine.app.review import ReviewRunResult
from ...engine.app.tagging import QueueFilter, QueueItem, Tagger, cluster_verdict, load_queue, similar
from ...engine.app.tagging import plan as tag_plan
from ...engine.core.errors import BandpassError
from ...engine.core.plural import counted
from ...engine.core.workspace import Workspace
from ..errors import Guarded, refusals
from ..navigation import go_back
from ..widgets.review_panel import ReviewPanel, run_summary
from ..widgets.virtual_table import Column, VirtualTable, numeric_key, shorten_outcome
from ..worker_answer import dropped_once_gone
from .tag_dialog import TagChoice, open_tag_dialog

#: Virtual tables: 10,000 failures (or 3,000 clusters) paint in milliseconds, where a DataTable takes
#: seconds to fill (bench/bench_diagnosis.py).
#: Chosen by priority to fit the table (0: always; higher numbers drop out first): what a row is (the
#: episode and its task, a cluster and its task), the outcome, the diagnosis and the tags with the ``?``
#: that marks a suggestion stay on screen at 80, 100 and 160 terminal columns (virtual_table.fit_columns;
#: tests/tui/screens/test_column_priorities.py).
COLUMNS = (
    Column("sel", "", 1),
    Column("episode", "episode", 7, "right", sort_key=numeric_key),
    Column("state", "state", 8, priority=3),
    Column("task", "task", 22, min_width=12),
    Column("agent", "agent", 18, priority=4, min_width=10),
    Column("outcome", "outcome", 24, min_width=16, shorten=shorten_outcome, grow_first=True),
    Column("diagnosis", "diagnosis", 24, min_width=16),
    Column("checks", "failing checks", 24, priority=5, min_width=12),
    Column("tags", "tags / suggestion", 24, min_width=14, keep_suffix="?"),
)
CLUSTER_COLUMNS = (
    Column("id", "cluster", 10),
    Column("size", "size", 5, "right", sort_key=numeric_key),
    Column("pending", "pending", 7, "right", sort_key=numeric_key),
    Column("tagged", "tagged", 6, "right", sort_key=numeric_key, priority=2),
    Column("task", "task", 22, min_width=12),
    Column("outcome", "outcome", 24, min_width=16, shorten=shorten_outcome, grow_first=True),
    Column("diagnosis", "diagnosis", 36, min_width=16),
    Column("signature", "signature", 50, priority=3, min_width=20),
    Column("members", "members", 30, priority=4, min_width=12),
)
FILTERS = ("pending", "all", "tagged", "skipped")
VERIFIER_TAIL = 40  # lines of verifier output in the detail pane
PREVIEW = 6  # members listed in a cluster's detail


class QueueCluster:
    """One signature's queue items (the cluster view's row)."""

    def __init__(self, signature: str, items: list[QueueItem]) -> None:
        self.signature = signature
        # the same id as `bandpass clusters` and the reviewer's --cluster (engine/review/signatures.py)
        self.id = cluster_id(signature)
        self.items = items
        self.pending = [i for i in items if i.state == "pending"]
        self.tagged = [i for i in items if i.state == "tagged"]
        # the strongest evidence among the members names the cluster and is replayed first: the same
        # function as `bandpass clusters` (engine/review/tag_choice.cluster_verdict)
        self.verdict = cluster_verdict([i.candidate for i in items])
        self.representative = next(i for i in items if i.episode_id == self.verdict.episode_id)

    @property
    def suggestion(self) -> str | None:
        return self.verdict.suggestion


def group_clusters(items: list[QueueItem]) -> list[QueueCluster]:
    """Queue items by failure signature: clusters with pending members first, then biggest first.

    Grouped over every state (pending, tagged, skipped), so a cluster's size is the one ``bandpass
    clusters`` prints and a cluster whose members are all tagged is still listed (last): the state filter
    narrows the list view, never what a cluster is."""
    by: dict[str, list[QueueItem]] = {}
    for i in items:
        by.setdefault(i.signature or f"episode {i.episode_id}", []).append(i)
    out = [QueueCluster(sig, members) for sig, members in by.items()]
    out.sort(key=lambda c: (not c.pending, -len(c.items), c.items[0].task, c.signature))
    return out


@dataclass
class QueueLoad:
    """What one load produced in its worker, handed to the UI thread in one piece."""

    all: list[QueueItem]  # every item the query filter admits
    items: list[QueueItem]  # those the state filter shows (plus the kept one)
    clusters: list[QueueCluster]  # ``all`` grouped by signature (every state: true cluster sizes)
    seconds: float


def read_queue(ws: Workspace, filt: QueueFilter, state: str, keep: int | None) -> QueueLoad:
    """Reads and groups the queue. Runs in a worker thread: no widget is touched here."""
    t0 = time.perf_counter()
    every = load_queue(ws, filt=filt)
    items = [i for i in every if state == "all" or i.state == state or i.episode_id == keep]
    return QueueLoad(every, items, group_clusters(every), time.perf_counter() - t0)


class TagQueueScreen(Guarded, Screen[None]):
    CSS_PATH = "tag_queue.tcss"
    #: The table, not a text field: digits switch screens (an Input would take them as text).
    AUTO_FOCUS = "#queue-table"
    BINDINGS = [
        Binding("n", "next_pending", "Next"),
        Binding("p", "prev_pending", "Previous", show=False),
        Binding("t", "tag", "Tag…"),
        Binding("a", "accept_suggestion", "Suggested", tooltip="Suggested tag"),
        Binding("y", "accept_review", "Accept review", show=False),
        Binding("R", "request_review", "Review with Claude", show=False),
        Binding("space", "toggle_select", "Select"),
        Binding("S", "select_similar", "Select same signature", show=False),
        Binding("k", "toggle_clusters", "Clusters"),
        Binding("s", "skip", "Skip", show=False),
        Binding("c", "clear_tag", "Clear tag", show=False),
        Binding("u,ctrl+z", "undo", "Undo"),
        Binding("f", "cycle_filter", "State filter", show=False),
        Binding("A", "filter_by('agent')", "Only this agent", show=False),
        Binding("T", "filter_by('task')", "Only this task", show=False),
        Binding("O", "filter_by('outcome')", "Only this outcome", show=False),
        Binding("P", "toggle_probes", "Audit probes", show=False),
        Binding("x", "clear_filters", "Clear filters", show=False),
        Binding("enter", "open", "Open", tooltip="Replay / open"),
        Binding("r", "refresh", "Refresh", show=False),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(self, ws: Workspace, *, tagger: Tagger | None = None) -> None:
        super().__init__()
        self.ws = ws
        self.tagger = tagger or Tagger(ws)
        self.filter = "pending"
        self.query_filter = QueueFilter()
        self.cluster_view = False
        self.items: list[QueueItem] = []  # the rows shown (list view), in order
        self.clusters: list[QueueCluster] = []  # the rows shown (cluster view)
        self.selected: set[int] = set()  # episode ids
        self._all: list[QueueItem] = []  # every queue item the query filter admits
        self._records: dict[int, list[str]] = {}
        self._by_id: dict[int, QueueItem] = {}
        self._counts: dict[str, int] = {"pending": 0, "tagged": 0, "skipped": 0}
        self._cluster_cache: tuple[list[QueueItem], list[tuple[int, tuple[str, ...]]]] | None = None
        self._clusters_of: list[QueueItem] | None = None  # the items ``self.clusters`` was grouped from
        #: A load is running in its worker (the table keeps the last rows meanwhile). Not ``loading``:
        #: that is every widget's own reactive (it would cover the whole screen with an indicator).
        self.reloading = False
        #: Completed loads; the last one's seconds in its worker and on the UI thread (bench/).
        self.loads = 0
        self.load_error = ""  # the last load's failure, shown until a load succeeds
        self.last_load_s: float | None = None
        self.last_apply_s: float | None = None

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="queue-body"):
            yield VirtualTable(COLUMNS, id="queue-table")
            with VerticalScroll(id="queue-detail"):
                yield ReviewPanel(self.ws, id="queue-review")
                yield Static("", id="queue-info", markup=False)
        yield Static("", id="queue-status")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self.action_refresh()
        self.table.focus()

    @property
    def table(self) -> VirtualTable:
        """One table for both views (its columns swap): swapping widgets re-lays out the screen and the
        footer, ten times the cost of filling the table."""
        return self.query_one("#queue-table", VirtualTable)

    # --- data --- #

    @property
    def current(self) -> QueueItem | None:
        if self.cluster_view:
            c = self.current_cluster
            return c.representative if c else None
        key = self.table.cursor_key
        return self._by_id.get(key) if key is not None else None

    @property
    def current_cluster(self) -> QueueCluster | None:
        if not self.cluster_view:
            return None
        key = self.table.cursor_key
        return self.clusters[key] if key is not None and 0 <= key < len(self.clusters) else None

    def targets(self) -> list[int]:
        """The selection when there is one; in the cluster view the cluster's untagged members; else the
        row under the cursor."""
        if self.selected:
            return [i.episode_id for i in self._all if i.episode_id in self.selected]
        if self.cluster_view:
            c = self.current_cluster
            return [i.episode_id for i in c.items if i.state != "tagged"] if c else []
        cur = self.current
        return [cur.episode_id] if cur else []

    @property
    def settled(self) -> bool:
        """Loaded at least once, and no load running: what a test waits for after a key that reloads."""
        return self.loads > 0 and not self.reloading

    def action_refresh(self, keep: int | None = None, then: Callable[[], None] | None = None) -> None:
        """Reloads the queue in a worker; ``then`` runs once the rows are in. ``keep``: an episode just
        acted on stays listed (and under the cursor) even if it no longer matches the filter, until the
        next reload: a row vanishing under the cursor makes "what did I just do" unanswerable."""
        cur = self.current
        cursor_on = keep if keep is not None else (cur.episode_id if cur else None)
        self.reloading = True
        if not self.loads:
            self.table.loading = True  # nothing to show yet: the loading indicator over the table
        self._refresh_status()
        self._load(dataclasses.replace(self.query_filter), self.filter, keep, cursor_on, then)

    @work(thread=True, exclusive=True, group="queue-load")
    def _load(
        self,
        filt: QueueFilter,
        state: str,
        keep: int | None,
        cursor_on: int | None,
        then: Callable[[], None] | None,
    ) -> None:
        worker = get_current_worker()
        expected: tuple[type[Exception], ...] = (BandpassError, *reads.UNREADABLE)
        try:
            data = read_queue(self.ws, filt, state, keep)
        except expected as exc:  # a bad filter, a database that cannot be read
            if not worker.is_cancelled:
                self.app.call_from_thread(self._load_failed, exc)
            return
        if not worker.is_cancelled:  # a newer load replaced this one: its rows would be stale
            self.app.call_from_thread(self._loaded, data, cursor_on, then)

    def _load_failed(self, exc: Exception) -> None:
        self.load_error = f"{type(exc).__name__}: {exc}"
        self.reloading = False
        self.table.loading = False
        self.notify(f"{type(exc).__name__}: {exc}", title="Could not load the queue", severity="error")
        self._refresh_status()

    @dropped_once_gone
    def _loaded(self, data: QueueLoad, cursor_on: int | None, then: Callable[[], None] | None) -> None:
        t0 = time.perf_counter()
        self._all = data.all
        self._counts = {"pending": 0, "tagged": 0, "skipped": 0}
        for i in self._all:
            self._counts[i.state] += 1
        self._records.clear()
        self.selected &= {i.episode_id for i in self._all}
        self.items = data.items
        self.clusters, self._clusters_of = data.clusters, data.all  # grouped in the worker
        self._cluster_rows()  # the cluster view's rows now, with the load: opening it is then instant
        self.reloading = False
        self.load_error = ""
        if self.table.loading:
            self.table.loading = False
            if self.focused is None:  # a loading widget takes no focus: give it back now
                self.table.focus()
        self.loads += 1
        self.last_load_s = data.seconds
        self._fill_table(cursor_on)
        if then is not None:
            then()
        self.last_apply_s = time.perf_counter() - t0

    def _fill_table(self, cursor_on: int | None = None) -> None:
        self._by_id = {i.episode_id: i for i in self.items}
        table = self.table
        columns = list(CLUSTER_COLUMNS if self.cluster_view else COLUMNS)
        swapped = table.columns != columns
        if swapped:  # keys of the other view mean nothing here: start at the top
            table.columns = columns
            table.sort_column = None
        if self.cluster_view:
            table.set_rows(self._cluster_rows())
            if swapped:
                table.cursor_row = 0
        else:
            rows = []
            for i in self.items:
                shown = ", ".join(i.tags) if i.tags else (f"{i.suggestion}?" if i.suggestion else "")
                rows.append(
                    (
                        i.episode_id,
                        (
                            "●" if i.episode_id in self.selected else "",
                            str(i.episode_id),
                            i.state,
                            i.task,
                            i.agent,
                            i.outcome,
                            i.diagnosis,
                            ", ".join(t.rsplit("::", 1)[-1] for t in i.failing_tests),
                            shown,
                        ),
                    )
                )
            table.set_rows(rows)
            if swapped and cursor_on is None:
                table.cursor_row = 0
            if cursor_on is not None and cursor_on in self._by_id:
                keys = [k for k, _ in table._shown]  # the rows in display order
                table.cursor_row = keys.index(cursor_on)
        self._refresh_detail()

    def _cluster_rows(self) -> list[tuple[int, tuple[str, ...]]]:
        """The cluster view's rows, grouped once per queue load (``k`` then only swaps rows in)."""
        if self._cluster_cache is None or self._cluster_cache[0] is not self._all:
            if self._clusters_of is not self._all:
                self.clusters, self._clusters_of = group_clusters(self._all), self._all
            rows: list[tuple[int, tuple[str, ...]]] = []
            for n, c in enumerate(self.clusters):
                rep = c.representative
                ids = [str(i.episode_id) for i in c.items[:PREVIEW]]
                rows.append(
                    (
                        n,
                        (
                            c.id,
                            str(len(c.items)),
                            str(len(c.pending)),
                            str(len(c.tagged)),
                            rep.task,
                            rep.outcome,
                            c.verdict.label,
                            describe(c.signature),
                            ", ".join(ids) + ("…" if len(c.items) > PREVIEW else ""),
                        ),
                    )
                )
            self._cluster_cache = (self._all, rows)
            return rows
        return self._cluster_cache[1]

    def _refresh_status(self) -> None:
        self.query_one("#queue-status", Static).update(self.status_text())

    def status_text(self) -> str:
        if not self.loads:
            return (
                "loading the queue…"
                if self.reloading
                else f"could not load the queue (r: retry): {self.load_error}"
            )
        counts = self._counts
        sel = f" · {len(self.selected)} selected" if self.selected else ""
        undo = " · u: undo" if self.tagger.can_undo else ""
        narrowed = self.query_filter.describe()
        probes = "" if self.query_filter.include_probes else " · audit probes hidden (P)"
        head = (
            f"{len(self.clusters)} cluster{'s' * (len(self.clusters) != 1)} of {len(self._all)}"
            f" failure{'s' * (len(self._all) != 1)} (every state)"
            if self.cluster_view
            else f"{self.filter} ({len(self.items)})"
        )
        return (
            head
            + (f" · {narrowed} (x: clear)" if narrowed else "")
            + f" · {counts['pending']} pending, {counts['tagged']} tagged, {counts['skipped']} skipped"
            + f"{sel}{undo}{probes}"
            + (" · reloading…" if self.reloading else "")
        )

    def _refresh_detail(self) -> None:
        self._refresh_status()
        info = self.query_one("#queue-info", Static)
        if not self.loads:
            info.update("loading the queue…")
            return
        shown = self.current  # in the cluster view: its representative
        self.query_one(ReviewPanel).show(shown.episode_id if shown else None)
        if self.cluster_view:
            c = self.current_cluster
            if c is None:
                info.update("no failures" if not self._all else f"no {self.filter} episodes (f: filter)")
                return
            lines = [
                f"cluster {c.id} of {len(c.items)} · {len(c.pending)} pending · {len(c.tagged)} tagged",
                f"signature: {describe(c.signature)}",
                f"diagnosis: {c.verdict.label} (the strongest evidence: episode {c.verdict.episode_id})",
                f"suggested tag: {c.suggestion} (a or t: tag the untagged members it is suggested for,"
                " one undo)"
                if c.suggestion
                else "no suggested tag (t: choose one for every untagged member)",
                "",
                "members:",
            ]
            for i in c.items[:PREVIEW]:
                lines.append(f"  {i.episode_id:>6} {i.agent} · {i.state} · {i.summary}"[:160])
            if len(c.items) > PREVIEW:
                lines.append(f"  … and {len(c.items) - PREVIEW} more (Enter: list them)")
            rep = c.representative
            lines += [
                "",
                f"representative: episode {rep.episode_id}",
                *self._why(rep.episode_id),
                *self._who_ended(rep),
            ]
            info.update(Text("\n".join(lines)))
            return
        cur = self.current
        if cur is None:
            info.update("the queue is empty" if not self._all else f"no {self.filter} episodes (f: filter)")
            return
        probe = " · audit probe" if cur.probe else ""
        lines = [
            f"episode {cur.episode_id} · {cur.task} · {cur.agent} · attempt {cur.attempt}{probe}",
            f"state {cur.state}",
            *self._why(cur.episode_id),
            *self._who_ended(cur),
            f"suggested tag: {cur.suggestion} (confirm with a)" if cur.suggestion else "no suggested tag",
        ]
        if cur.tags:
            lines.append(
                "tags: " + ", ".join(f"{t} (#{tid})" for t, tid in zip(cur.tags, cur.tag_ids, strict=True))
            )
        same = similar(self._all, cur)
        if len(same) > 1:
            lines.append(f"{len(same)} episodes share this failure signature (S: select them)")
        with_output = self._verifier_tail(cur.episode_id)
        if with_output:
            lines += ["", "verifier output (tail):", with_output]
        info.update(Text("\n".join(lines)))

    @staticmethod
    def _who_ended(item: QueueItem) -> list[str]:
        """Who ended the sandbox and the engine's evidence for it, as ``bandpass show`` prints them."""
        if not item.attribution:
            return []
        lines = [f"who ended the sandbox: {item.attribution}"]
        if item.attribution_facts:
            lines.append(f"  evidence: {item.attribution_facts}")
        return lines

    def _why(self, episode_id: int) -> list[str]:
        lines = self._records.get(episode_id)
        if lines is None:
            from ...engine.app.episodes import EpisodeNotFound, episode_record, why_lines

            try:
                lines = why_lines(episode_record(self.ws, episode_id))
            except EpisodeNotFound:
                lines = []
            self._records[episode_id] = lines
        return lines

    def _verifier_tail(self, episode_id: int) -> str:
        ep = reads.episode(self.ws, episode_id)
        out = ep.verifier_output if ep is not None else ""
        return "\n".join(strip_controls(out).splitlines()[-VERIFIER_TAIL:])

    def on_virtual_table_row_highlighted(self, _: VirtualTable.RowHighlighted) -> None:
        self._refresh_detail()

    def on_virtual_table_row_selected(self, event: VirtualTable.RowSelected) -> None:
        event.stop()  # the table owns Enter; selecting a row means "open it"
        self.action_open()

    # --- navigation --- #

    def _move_to_pending(self, step: int) -> None:
        table = self.table
        if not self.items or self.cluster_view:
            return
        keys = [k for k, _ in table._shown]  # the rows in display order
        start = table.cursor_row
        n = len(keys)
        for k in range(1, n + 1):
            row = (start + step * k) % n
            if self._by_id[keys[row]].state == "pending":
                table.cursor_row = row
                return
        self.notify("no pending episodes left", timeout=3)

    def _after_act(self) -> None:
        """After tagging or skipping, once the reload landed: on to the next pending episode."""
        if self.filter == "pending":
            self._move_to_pending(+1)

    def action_next_pending(self) -> None:
        self._move_to_pending(+1)

    def action_prev_pending(self) -> None:
        self._move_to_pending(-1)

    def action_cycle_filter(self) -> None:
        self.filter = FILTERS[(FILTERS.index(self.filter) + 1) % len(FILTERS)]
        self.action_refresh()

    def action_filter_by(self, what: str) -> None:
        """Narrows the queue to the highlighted episode's agent, task or outcome (again: widens)."""
        cur = self.current
        if cur is None:
            return
        value = getattr(cur, what)
        setattr(self.query_filter, what, None if getattr(self.query_filter, what) == value else value)
        self.action_refresh()

    def action_toggle_probes(self) -> None:
        self.query_filter.include_probes = not self.query_filter.include_probes
        self.notify(
            "showing the audit's oracle/nop/cheat episodes"
            if self.query_filter.include_probes
            else "audit probes hidden",
            timeout=2,
        )
        self.action_refresh()

    def action_clear_filters(self) -> None:
        self.query_filter = QueueFilter(include_probes=self.query_filter.include_probes)
        self.action_refresh()

    def action_toggle_clusters(self) -> None:
        self.cluster_view = not self.cluster_view
        self.selected.clear()
        self._fill_table()

    def action_back(self) -> None:
        """Escape: undoes the narrowest thing first (selection, cluster filter, cluster view), then
        leaves the queue."""
        if self.selected:
            self.selected.clear()
            self._fill_table()
        elif self.query_filter.cluster is not None:
            self.query_filter.cluster = None
            self.cluster_view = True
            self.action_refresh()
        elif self.cluster_view:
            self.action_toggle_clusters()
        else:  # pushed over another screen: back to it; the queue's own mode: back to Tasks
            go_back(self)

    # --- selection --- #

    def action_toggle_select(self) -> None:
        cur = self.current
        if cur is None or self.cluster_view:
            return
        self.selected ^= {cur.episode_id}
        self._fill_table(cur.episode_id)  # only the marks change: no reload

    def action_select_similar(self) -> None:
        cur = self.current
        if cur is None or self.cluster_view:
            return
        group = similar(self._all, cur)
        self.selected |= {i.episode_id for i in group}
        self.notify(f"selected {counted(len(group), 'episode')} with the same failure signature", timeout=3)
        self._fill_table(cur.episode_id)  # only the marks change: no reload

    # --- tagging --- #

    def _open_dialog(self) -> None:
        """``t`` and ``a`` alike: the tag dialog over the targets, the strongest evidence's suggestion
        preselected (engine/review/tag_choice.py), exactly the episodes its effect line names tagged."""
        ids = self.targets()
        if not ids:
            if self.cluster_view and self.current_cluster is not None:
                self.notify("every member of this cluster is tagged", timeout=3)
            return
        items = {i.episode_id: i for i in self._all}
        plan = tag_plan([items[e].candidate for e in ids if e in items])
        cluster = self.current_cluster if not self.selected else None
        cur = self.current
        what = (
            f"{len(ids)} untagged member{'s' * (len(ids) != 1)} of cluster {cluster.id}"
            if cluster is not None
            else None
        )

        def then(_choice: TagChoice) -> None:
            self.selected.clear()
            self.action_refresh(keep=cur.episode_id if cur and not cluster else None, then=self._after_act)

        open_tag_dialog(self, self.tagger, plan, targets=what, then=then)

    def action_accept_suggestion(self) -> None:
        self._open_dialog()

    def action_tag(self) -> None:
        self._open_dialog()

    def action_skip(self) -> None:
        ids = self.targets()
        if not ids:
            return
        items = {i.episode_id: i for i in self._all}
        if all(items[e].state == "skipped" for e in ids if e in items):
            self.tagger.unskip(ids)
        else:
            self.tagger.skip(ids)
        self.selected.clear()
        cur = self.current
        self.action_refresh(
            keep=cur.episode_id if cur and not self.cluster_view else None, then=self._after_act
        )

    def action_clear_tag(self) -> None:
        cur = self.current
        if cur is None or not cur.tag_ids or self.cluster_view:
            return
        with refusals(self):
            self.tagger.clear(cur.tag_ids[-1])
            self.notify(f"cleared {cur.tags[-1]} on episode {cur.episode_id} (u: undo)", timeout=3)
            self.action_refresh()

    def action_accept_review(self) -> None:
        """The highlighted episode's review becomes the curator's tag in one key (undo with u)."""
        with refusals(self, severity="warning"):
            tag = self.query_one(ReviewPanel).accept(self.tagger)
            code = f"{tag.tag_class}.{tag.subclass}"
            if not self.tagger.last_added:
                self.notify(
                    f"episode {tag.episode_id} already carries {code}: the review is accepted", timeout=3
                )
            else:
                self.notify(f"tagged episode {tag.episode_id}: {code} from the review (u: undo)")
            self.action_refresh(keep=tag.episode_id)

    def action_request_review(self) -> None:
        """Claude reviews the selection (or the highlighted episode) in the background."""
        ids = self.targets()

        def done(result: ReviewRunResult | None, error: str) -> None:
            message, severity = run_summary(result, error)
            self.notify(message, severity=severity)
            self.action_refresh()

        self.query_one(ReviewPanel).request(ids, done)

    def action_undo(self) -> None:
        label = self.tagger.undo()
        self.notify(f"undone: {label}" if label else "nothing to undo", timeout=3)
        self.action_refresh()

    def action_open(self) -> None:
        """Enter: a cluster lists its members; an episode opens in Replay."""
        cluster = self.current_cluster
        if cluster is not None:
            self.query_filter.cluster = cluster.signature
            self.cluster_view = False
            self.filter = "all"
            self.action_refresh()
            return
        self.action_replay()

    def action_open_replay(self) -> None:
        """``6`` (the app's Replay key, as the Overview promises): the highlighted episode, or a
        cluster's strongest evidence (the episode its diagnosis follows)."""
        cluster = self.current_cluster
        if cluster is not None:
            self._replay(cluster.representative.episode_id)
            return
        self.action_replay()

    def action_replay(self) -> None:
        cur = self.current
        if cur is None:
            return
        self._replay(cur.episode_id)

    def _replay(self, episode_id: int) -> None:
        from .replay import ReplayScreen

        screen = ReplayScreen(self.ws, episode_id=episode_id, tagger=self.tagger)
        self.app.push_screen(screen, lambda _: self.action_refresh())
        # Open where the diagnosis points: its first evidence item that cites a step.
        self.app.call_after_refresh(screen.seek_first_evidence)
