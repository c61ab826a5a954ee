"""BatchWatch: the batches other processes run in this workspace, followed from the store.

The Runs screen runs its own batch and shows it in its counters; a batch started by ``bandpass run`` (or
another TUI) writes only to the shared SQLite file, so this table is filled by polling the store
(``store.queries.batch_progress``): one row per batch with where it runs, done/total and its outcomes.
Rows are keyed by batch id and updated in place; the table hides itself while it has none.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from textual.widgets import DataTable

from engine.review import outcomes as oc
from store.queries import BatchProgress

COLUMNS = (("batch", "Batch"), ("agent", "Agent"), ("executor", "Executor"), ("done", "Done"),
           ("state", "State"), ("outcomes", "Outcomes"))  # fmt: skip


def outcome_text(counts: dict[str, int]) -> str:
    """``passed 3 · failed 1 · agent err 0 · infra 2`` (infra errors kept apart: never a hard task)."""
    passed = counts.get(oc.PASSED, 0)
    failed = counts.get(oc.FAILED, 0)
    agent = sum(n for o, n in counts.items() if o.startswith("agent_error"))
    infra = sum(n for o, n in counts.items() if oc.is_infra(o))
    return f"passed {passed} · failed {failed} · agent err {agent} · infra {infra}"


def row_cells(p: BatchProgress) -> tuple[str, ...]:
    st = p.status
    state = "done" if not p.unfinished else f"{st.get('running', 0)} running, {st.get('queued', 0)} queued"
    return (
        p.batch.id,
        p.batch.agent,
        p.batch.executor or "not started",
        f"{p.done}/{p.total}",
        state,
        outcome_text(p.outcomes),
    )


class BatchWatch(DataTable[str]):
    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def on_mount(self) -> None:
        self.cursor_type = "row"
        for key, label in COLUMNS:
            self.add_column(label, key=key)
        self.display = False

    def show(self, progress: Sequence[BatchProgress]) -> None:
        """Adds or updates one row per batch (newest first as given); existing rows are never dropped,
        so a batch that finished keeps its final line."""
        for p in progress:
            cells = row_cells(p)
            if p.batch.id in self.rows:
                for (key, _), value in zip(COLUMNS, cells, strict=True):
                    self.update_cell(p.batch.id, key, value)
            else:
                self.add_row(*cells, key=p.batch.id)
        self.display = self.row_count > 0

    def cells(self, batch_id: str) -> dict[str, str]:
        """The row of ``batch_id`` by column key ({} when absent): what tests and the screen read."""
        if batch_id not in self.rows:
            return {}
        return {key: str(v) for (key, _), v in zip(COLUMNS, self.get_row(batch_id), strict=True)}
