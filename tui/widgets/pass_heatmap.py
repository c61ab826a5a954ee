"""The tasks × models pass@k heatmap (``bandpass report compare`` in the TUI).

A ``DataTable`` in cell-cursor mode, so arrows, Enter and the mouse all work and the curator can move
along a row to watch one task cross the band from checkpoint to checkpoint. Each cell's colour says where
it is *decided* to sit relative to that model's band (green in, blue above = saturated, red below = too
hard, grey undecided: the evidence cannot tell yet) and its shade says how far pass@k is along; the glyph
repeats the band for colour-blind eyes.
"""

from __future__ import annotations

from typing import Any

from rich.text import Text
from textual.message import Message
from textual.widgets import DataTable

from ...engine.app.calibration import Comparison
from ..errors import Guarded

MARK = {"in": "●", "above": "▲", "below": "▼", "undecided": "?"}


def cell_style(band: str, p: float | None) -> str:
    """Background by band, brighter with pass@k (rgb so it renders the same on every theme)."""
    if band == "undecided" or p is None:
        return "grey70 on grey23"
    level = int(60 + 140 * p)
    if band == "in":
        return f"bold black on rgb(40,{level},70)"
    if band == "above":
        return f"bold white on rgb(30,70,{level})"
    return f"bold white on rgb({max(level, 120)},40,40)"


class PassHeatmap(Guarded, DataTable[Text]):
    """Rows are tasks, columns are models in compare order; ``CellChosen`` when a cell is selected."""

    class CellChosen(Message):
        def __init__(self, task: str, model: str) -> None:
            super().__init__()
            self.task = task
            self.model = model

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(cursor_type="cell", zebra_stripes=False, **kwargs)
        self.comparison: Comparison | None = None

    def show(self, cmp: Comparison) -> None:
        self.comparison = cmp
        self.clear(columns=True)
        self.add_column("task", key="task")
        for m in cmp.models:
            step = cmp.steps.get(m)
            self.add_column(m if step is None else f"{m} @{step}", key=m)
        for t in cmp.tasks:
            cells = [Text(t)]
            for m in cmp.models:
                c = cmp.cells[(t, m)]
                val = "  —  " if c.pass_at_k is None else f"{c.pass_at_k:5.2f}"
                cells.append(Text(f" {val} {MARK[c.band]} ", style=cell_style(c.band, c.pass_at_k)))
            self.add_row(*cells, key=t)
        mean = [Text(f"mean pass@{cmp.k}", style="bold")]
        for m in cmp.models:
            v = cmp.mean_pass_at_k(m)
            mean.append(Text("  —  " if v is None else f" {100 * v:5.1f}%", style="bold"))
        self.add_row(*mean, key="__mean__")

    def cell_at_cursor(self) -> tuple[str, str] | None:
        """(task, model) under the cursor, or None on the task column or the mean row."""
        cmp = self.comparison
        if cmp is None or not cmp.tasks:
            return None
        row, col = self.cursor_coordinate
        if col == 0 or row >= len(cmp.tasks) or col - 1 >= len(cmp.models):
            return None
        return cmp.tasks[row], cmp.models[col - 1]

    def on_data_table_cell_selected(self, event: DataTable.CellSelected) -> None:
        event.stop()
        hit = self.cell_at_cursor()
        if hit is not None:
            self.post_message(self.CellChosen(*hit))
