"""Tag queue screen: every finished episode that did not pass, to be tagged one key at a time.

Why a queue: after a rollout batch a curator faces hundreds of failures; most share a cause ("this task
always fails on test_x", "every turn_limit of this model"), so the screen is built for speed — next /
previous pending, one digit opens the tag dialog on a class, the outcome's suggestion preselected but
never written unconfirmed, a selection of similar episodes tagged in one go, skip for "not now"
(persisted), and undo for the slip of a key. Enter opens the episode in the Replay screen.
"""

from __future__ import annotations

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Static

from engine.core.workspace import Workspace
from engine.review.reviewer import ReviewError
from engine.review.tagging import QueueItem, TagError, Tagger, load_queue, similar
from engine.review.taxonomy import TaxonomyError
from tui.screens.tag_dialog import TagChoice, TagDialog
from tui.widgets.review_panel import ReviewPanel, run_summary

COLUMNS = ("", "episode", "state", "task", "agent", "outcome", "failing tests", "tags / suggestion")
FILTERS = ("pending", "all", "tagged", "skipped")
VERIFIER_TAIL = 40  # lines of verifier output in the detail pane


class TagQueueScreen(Screen[None]):
    CSS_PATH = "tag_queue.tcss"
    BINDINGS = [
        Binding("n", "next_pending", "Next"),
        Binding("p", "prev_pending", "Previous", show=False),
        Binding("a", "accept_suggestion", "Suggested tag"),
        Binding("y", "accept_review", "Accept review"),
        Binding("R", "request_review", "Review with Claude"),
        *(Binding(str(k), f"tag_class({k})", f"Tag class {k}", show=False) for k in range(1, 10)),
        Binding("space", "toggle_select", "Select"),
        Binding("S", "select_similar", "Select similar", show=False),
        Binding("s", "skip", "Skip"),
        Binding("c", "clear_tag", "Clear tag", show=False),
        Binding("u,ctrl+z", "undo", "Undo"),
        Binding("f", "cycle_filter", "Filter", show=False),
        Binding("enter", "replay", "Replay"),
        Binding("r", "refresh", "Refresh", show=False),
        Binding("escape", "clear_selection", "Clear selection", show=False),
    ]

    def __init__(self, ws: Workspace, *, tagger: Tagger | None = None) -> None:
        super().__init__()
        self.ws = ws
        self.tagger = tagger or Tagger(ws)
        self.filter = "pending"
        self.items: list[QueueItem] = []  # the rows shown, in order
        self.selected: set[int] = set()  # episode ids
        self._all: list[QueueItem] = []

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="queue-body"):
            yield DataTable(id="queue-table", cursor_type="row", zebra_stripes=True)
            with VerticalScroll(id="queue-detail"):
                yield ReviewPanel(self.ws, id="queue-review")
                yield Static("", id="queue-info", markup=False)
        yield Static("", id="queue-status")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one(DataTable).add_columns(*COLUMNS)
        self.action_refresh()
        self.query_one(DataTable).focus()

    # --- data --- #

    @property
    def current(self) -> QueueItem | None:
        table = self.query_one(DataTable)
        if not self.items or table.cursor_row is None or not 0 <= table.cursor_row < len(self.items):
            return None
        return self.items[table.cursor_row]

    def targets(self) -> list[int]:
        """The selection when there is one, else the row under the cursor."""
        if self.selected:
            return [i.episode_id for i in self._all if i.episode_id in self.selected]
        cur = self.current
        return [cur.episode_id] if cur else []

    def action_refresh(self, keep: int | None = None) -> None:
        """Reloads the queue. ``keep``: an episode just acted on stays listed (and under the cursor) even
        if it no longer matches the filter, until the next reload: a row vanishing under the cursor
        makes "what did I just do" unanswerable."""
        table = self.query_one(DataTable)
        cur = self.current
        cursor_on = keep if keep is not None else (cur.episode_id if cur else None)
        self._all = load_queue(self.ws)
        self.selected &= {i.episode_id for i in self._all}
        self.items = [
            i for i in self._all if self.filter == "all" or i.state == self.filter or i.episode_id == keep
        ]
        table.clear()
        for i in self.items:
            shown = ", ".join(i.tags) if i.tags else (f"{i.suggestion}?" if i.suggestion else "")
            table.add_row(
                "●" if i.episode_id in self.selected else "",
                str(i.episode_id),
                i.state,
                i.task,
                i.agent,
                i.outcome,
                ", ".join(t.rsplit("::", 1)[-1] for t in i.failing_tests),
                shown,
                key=str(i.episode_id),
            )
        if cursor_on is not None:
            row = next((n for n, i in enumerate(self.items) if i.episode_id == cursor_on), None)
            if row is not None:
                table.move_cursor(row=row)
        self._refresh_detail()

    def _refresh_detail(self) -> None:
        counts = {s: sum(i.state == s for i in self._all) for s in ("pending", "tagged", "skipped")}
        sel = f" · {len(self.selected)} selected" if self.selected else ""
        undo = " · u: undo" if self.tagger.can_undo else ""
        self.query_one("#queue-status", Static).update(
            f"showing {self.filter} ({len(self.items)}) · {counts['pending']} pending, {counts['tagged']} "
            f"tagged, {counts['skipped']} skipped{sel}{undo}"
        )
        cur = self.current
        info = self.query_one("#queue-info", Static)
        self.query_one(ReviewPanel).show(cur.episode_id if cur else None)
        if cur is None:
            info.update("the queue is empty" if not self._all else f"no {self.filter} episodes (f: filter)")
            return
        lines = [
            f"episode {cur.episode_id} · {cur.task} · {cur.agent} · attempt {cur.attempt}",
            f"outcome {cur.outcome}" + (f" · reward {cur.reward:g}" if cur.reward is not None else ""),
            f"state {cur.state}",
            f"suggested tag: {cur.suggestion} (confirm with a)" if cur.suggestion else "no suggested tag",
        ]
        if cur.tags:
            lines.append(
                "tags: " + ", ".join(f"{t} (#{tid})" for t, tid in zip(cur.tags, cur.tag_ids, strict=True))
            )
        if cur.failing_tests:
            lines.append("failing tests:")
            lines += [f"  {t}" for t in cur.failing_tests]
            lines.append(
                f"{len(similar(self._all, cur))} episode(s) of this task fail the same way (S: select)"
            )
        with_output = self._verifier_tail(cur.episode_id)
        if with_output:
            lines += ["", "verifier output (tail):", with_output]
        info.update(Text("\n".join(lines)))

    def _verifier_tail(self, episode_id: int) -> str:
        from store import queries
        from store.db import session

        with session(self.ws.engine) as s:
            ep = queries.get_episode(s, episode_id)
            out = ep.verifier_output if ep is not None else ""
        return "\n".join(out.splitlines()[-VERIFIER_TAIL:])

    def on_data_table_row_highlighted(self, _: DataTable.RowHighlighted) -> None:
        self._refresh_detail()

    def on_data_table_row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()  # the table owns Enter; selecting a row means "replay it"
        self.action_replay()

    # --- navigation --- #

    def _move_to_pending(self, step: int) -> None:
        table = self.query_one(DataTable)
        if not self.items:
            return
        start = table.cursor_row if table.cursor_row is not None else -1
        n = len(self.items)
        for k in range(1, n + 1):
            row = (start + step * k) % n
            if self.items[row].state == "pending":
                table.move_cursor(row=row)
                return
        self.notify("no pending episodes left", timeout=3)

    def action_next_pending(self) -> None:
        self._move_to_pending(+1)

    def action_prev_pending(self) -> None:
        self._move_to_pending(-1)

    def action_cycle_filter(self) -> None:
        self.filter = FILTERS[(FILTERS.index(self.filter) + 1) % len(FILTERS)]
        self.action_refresh()

    # --- selection --- #

    def action_toggle_select(self) -> None:
        cur = self.current
        if cur is None:
            return
        self.selected ^= {cur.episode_id}
        self.action_refresh(keep=cur.episode_id)

    def action_select_similar(self) -> None:
        cur = self.current
        if cur is None:
            return
        group = similar(self._all, cur)
        self.selected |= {i.episode_id for i in group}
        self.notify(f"selected {len(group)} episode(s) of {cur.task} that fail the same way", timeout=3)
        self.action_refresh(keep=cur.episode_id)

    def action_clear_selection(self) -> None:
        if self.selected:
            self.selected.clear()
            self.action_refresh()

    # --- tagging --- #

    def _open_dialog(self, preselect: str | None) -> None:
        ids = self.targets()
        if not ids:
            return
        cur = self.current
        suggestion = cur.suggestion if cur is not None else None
        what = f"episode {ids[0]}" if len(ids) == 1 else f"{len(ids)} selected episodes"

        def done(choice: TagChoice | None) -> None:
            if choice is None:
                return
            try:
                self.tagger.tag(ids, choice.code, note=choice.note)
            except (TagError, TaxonomyError) as e:
                self.notify(str(e), severity="error")
                return
            self.notify(f"tagged {what}: {choice.code} (u: undo)", timeout=3)
            self.selected.clear()
            self.action_refresh(keep=cur.episode_id if cur else None)
            if self.filter == "pending":
                self._move_to_pending(+1)

        self.app.push_screen(
            TagDialog(
                self.tagger.taxonomy,
                targets=what,
                preselect=preselect,
                suggestion=suggestion,
                reason=cur.outcome if cur else "",
            ),
            done,
        )

    def action_accept_suggestion(self) -> None:
        cur = self.current
        self._open_dialog(cur.suggestion if cur else None)

    def action_tag_class(self, number: int) -> None:
        c = self.tagger.taxonomy.class_at(number)
        if c is not None:
            self._open_dialog(f"{c.name}.")

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
        self.action_refresh(keep=cur.episode_id if cur else None)
        if self.filter == "pending":
            self._move_to_pending(+1)

    def action_clear_tag(self) -> None:
        cur = self.current
        if cur is None or not cur.tag_ids:
            return
        try:
            self.tagger.clear(cur.tag_ids[-1])
        except TagError as e:
            self.notify(str(e), severity="error")
            return
        self.notify(f"cleared {cur.tags[-1]} on episode {cur.episode_id} (u: undo)", timeout=3)
        self.action_refresh()

    def action_accept_review(self) -> None:
        """The highlighted episode's review becomes the curator's tag in one key (undo with u)."""
        try:
            tag = self.query_one(ReviewPanel).accept(self.tagger)
        except (ReviewError, TagError, TaxonomyError) as e:
            self.notify(str(e), severity="warning")
            return
        self.notify(
            f"tagged episode {tag.episode_id}: {tag.tag_class}.{tag.subclass} from the review (u: undo)"
        )
        self.action_refresh(keep=tag.episode_id)

    def action_request_review(self) -> None:
        """Claude reviews the selection (or the highlighted episode) in the background."""
        ids = self.targets()
        self.notify(f"asking Claude to review {len(ids)} episode(s)…", timeout=3)

        def done(result, error: str) -> None:  # noqa: ANN001 - ReviewRunResult | None
            message, severity = run_summary(result, error)
            self.notify(message, severity=severity)  # type: ignore[arg-type]
            self.action_refresh()

        self.query_one(ReviewPanel).request(ids, done)

    def action_undo(self) -> None:
        label = self.tagger.undo()
        self.notify(f"undone: {label}" if label else "nothing to undo", timeout=3)
        self.action_refresh()

    def action_replay(self) -> None:
        cur = self.current
        if cur is None:
            return
        from tui.screens.replay import ReplayScreen

        self.app.push_screen(
            ReplayScreen(self.ws, episode_id=cur.episode_id, tagger=self.tagger),
            lambda _: self.action_refresh(),
        )
