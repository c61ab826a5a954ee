"""The Tasks table on the UI thread: what setting, filtering and sorting 10,000 rows cost.

Run: .venv/bin/python bench/bench_table.py [--rows 10000] [--repeat 7] [--no-datatable]

A headless Textual app (``run_test``) holds the Tasks screen's ``VirtualTable`` with its real columns;
every operation runs on the UI thread (where it blocks keys and repaints) and is timed as the median of
``--repeat`` runs: ``set_rows`` of all rows, a search re-filter with the Tasks screen's predicate shape
(substring over name, category, difficulty and audit), clearing the filter, and a sort on pass@k. The
baseline is Textual's own ``DataTable`` in the same app: ``add_rows`` of the same rows, and clear + re-add
(what a re-filter costs there). Row data is synthetic and seeded; nothing touches the database (the data
load runs in a worker; ``bench_scale.py`` measures it). Prints one line per figure; asserts row counts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from textual.app import App, ComposeResult
from textual.widgets import DataTable

from bandpass.tui.screens.tasks import COLUMNS
from bandpass.tui.widgets.virtual_table import VirtualTable


def make_rows(n: int, seed: int = 7) -> list[tuple[int, tuple[str, ...]]]:
    r = random.Random(seed)
    rows = []
    for i in range(n):
        cells = {
            "task": f"task-{i:05d}-{r.choice(('logs', 'build', 'net', 'files'))}",
            "category": r.choice(("files", "text", "build", "net")),
            "difficulty": r.choice(("easy", "medium", "hard")),
            "audit": r.choice(("accepted", "warning", "rejected", "—")),
            "pass": f"{r.random():.2f}",
            "n": str(r.randint(0, 16)),
            "band": r.choice(("in", "above", "below", "unknown")),
            "tags": str(r.randint(0, 3)),
        }
        rows.append((i, tuple(cells.get(c.key, "") for c in COLUMNS)))
    return rows


class Host(App[None]):
    def compose(self) -> ComposeResult:
        yield VirtualTable(COLUMNS, id="vt")
        yield DataTable(id="dt")


def median_ms(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        times.append((time.perf_counter() - t) * 1000)
    return statistics.median(times)


async def run(n: int, repeat: int, datatable: bool) -> list[tuple[str, float]]:
    rows = make_rows(n)
    out: list[tuple[str, float]] = []
    async with Host().run_test(size=(160, 50)) as pilot:
        vt = pilot.app.query_one(VirtualTable)
        out.append((f"VirtualTable.set_rows ({n:,} rows)", median_ms(lambda: vt.set_rows(rows), repeat)))
        assert vt.row_count == n

        def search() -> None:
            terms = ["logs", "med"]
            vt.set_filter(lambda r: all(t in f"{r[0]} {r[1]} {r[2]} {r[3]}".lower() for t in terms))

        out.append(("search re-filter (2 terms)", median_ms(search, repeat)))
        assert 0 < vt.row_count < n
        out.append(("clear the filter", median_ms(lambda: vt.set_filter(None), repeat)))
        assert vt.row_count == n
        out.append(("sort by pass@k", median_ms(lambda: vt.sort_by(4, reverse=False), repeat)))
        await pilot.pause()
        if datatable:
            dt = pilot.app.query_one(DataTable)
            dt.add_columns(*(c.label for c in COLUMNS))
            cells = [r for _, r in rows]
            t = time.perf_counter()
            dt.add_rows(cells)
            out.append((f"baseline DataTable.add_rows ({n:,} rows)", (time.perf_counter() - t) * 1000))

            def readd() -> None:
                dt.clear()
                dt.add_rows(cells)

            out.append(("baseline DataTable clear + re-add", median_ms(readd, max(1, repeat // 3))))
            assert dt.row_count == n
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--no-datatable", action="store_true", help="skip the DataTable baseline")
    args = ap.parse_args()
    load = os.getloadavg()[0]
    print(
        f"# bench_table: {args.rows:,} rows · {platform.machine()} · {os.cpu_count()} cpu · "
        f"Python {platform.python_version()} · load {load:.1f}"
    )
    for label, ms in asyncio.run(run(args.rows, args.repeat, not args.no_datatable)):
        print(f"{label:<42} {ms:9.1f} ms")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
