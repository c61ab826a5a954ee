"""BatchWatch: the workspace's batches, followed from the store.

A batch started by ``bandpass run`` (or another TUI) writes only to the shared SQLite file, so this table
is filled by polling the store (``store.queries.batch_progress``): one row per batch with where it runs,
done/total and its outcomes — the Runs screen's own batches too (marked "here"), listed the moment they
are planned. Rows are keyed by batch id, newest first, updated in place; the table hides itself while it
has none.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from pathlib import Path

from textual.widgets import DataTable

from ...engine.app.reads import BatchProgress
from ...engine.core import outcomes as oc
from ..errors import Guarded

#: Outcomes before state and executor: last, at 100 columns they cut the count of infra errors off
#: ("agent err 4 · in"); the executor ("local") is what may scroll off now.
COLUMNS = (("batch", "Batch"), ("agent", "Agent"), ("done", "Done"), ("outcomes", "Outcomes"),
           ("state", "State"), ("executor", "Executor"))  # fmt: skip


def outcome_text(counts: dict[str, int]) -> str:
    """``passed 3 · failed 1 · agent err 0 · infra 2`` (infra errors kept apart: never a hard task)."""
    passed = counts.get(oc.PASSED, 0)
    failed = counts.get(oc.FAILED, 0)
    agent = sum(n for o, n in counts.items() if oc.is_agent_error(o))
    infra = sum(n for o, n in counts.items() if oc.is_infra(o))
    return f"passed {passed} · failed {failed} · agent err {agent} · infra {infra}"


def row_cells(p: BatchProgress, own: bool = False) -> tuple[str, ...]:
    st = p.status
    state = "done" if not p.unfinished else f"{st.get('running', 0)} running, {st.get('queued', 0)} queued"
    executor = p.batch.executor or "not started"
    return (
        p.batch.id,
        p.batch.agent,
        f"{p.done}/{p.total}",
        outcome_text(p.outcomes),
        state,
        f"{executor} (here)" if own else executor,
    )


class BatchWatch(Guarded, DataTable[str]):
    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def on_mount(self) -> None:
        self.cursor_type = "row"
        for key, label in COLUMNS:
            self.add_column(label, key=key)
        self.display = False
        self._order: list[str] = []  # batch ids, newest first
        self._cells: dict[str, tuple[str, ...]] = {}

    def show(self, progress: Sequence[BatchProgress], own: Collection[str] = ()) -> None:
        """One row per batch, newest first; a batch seen once keeps its row (its final line when it has
        finished). ``own``: batches the Runs screen started itself (marked "(here)")."""
        new = [p.batch.id for p in progress if p.batch.id not in self._cells]
        before = dict(self._cells)
        for p in progress:
            self._cells[p.batch.id] = row_cells(p, p.batch.id in own)
        if new:  # a new batch goes on top: rebuild in order (a handful of rows)
            self._order = new + [b for b in self._order if b not in new]
            cursor = self.cursor_row
            self.clear()
            for bid in self._order:
                self.add_row(*self._cells[bid], key=bid)
            self.move_cursor(row=min(cursor, self.row_count - 1))
        else:
            for p in progress:
                cells = self._cells[p.batch.id]
                if cells == before.get(p.batch.id):
                    continue  # an unchanged row repaints nothing
                for (key, _), value in zip(COLUMNS, cells, strict=True):
                    self.update_cell(p.batch.id, key, value)
        self.display = self.row_count > 0

    def cells(self, batch_id: str) -> dict[str, str]:
        """The row of ``batch_id`` by column key ({} when absent): what tests and the screen read."""
        if batch_id not in self.rows:
            return {}
        return {key: str(v) for (key, _), v in zip(COLUMNS, self.get_row(batch_id), strict=True)}
