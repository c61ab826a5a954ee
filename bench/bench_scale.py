"""Store scale: 100,000 episodes over 10,000 tasks — band computation and the Tasks screen's load.

Run: .venv/bin/python bench/bench_scale.py [--tasks 10000] [--episodes 100000] [--repeat 3] [--no-tui]
Fills a fresh workspace through ``store.queries.bulk_insert`` (one executemany per table), then times,
best of ``--repeat``, each against a baseline measured in the same run on the same file:

* band computation: ``engine.calibration.calibrate.estimates`` + ``band_status`` for every task, against
reading the
  same (version, outcome) rows with sqlite3 directly and counting passes in a dict;
* ``store.queries.task_rows``, against a plain sqlite3 read of the same 10,000 task/version rows;
* the Tasks screen's data load (``tui.screens.tasks.load_tasks``: rows + estimates + bands), against the
  same sqlite3 baseline as the band computation;
* the Tasks screen in a headless Textual app (``run_test``), mount to rows on screen, against a plain
  ``SELECT count(*) FROM episode``.

Prints one line per figure with ``ratio`` = Bandpass / baseline; asserts nothing but row counts.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import platform
import random
import sqlite3
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.calibration import calibrate
from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries
from bandpass.store.db import session

MODEL = "bench-model"
OUTCOMES = ("passed", "failed", "failed", "agent_error:parse_error", "infra_error:container_died")


def fill(ws: Workspace, n_tasks: int, n_episodes: int, seed: int = 7) -> float:
    """Synthetic tasks (one version each) and finished episodes of one model; returns seconds taken."""
    r = random.Random(seed)
    t0 = time.perf_counter()
    tasks = [{"id": i, "name": f"scale-task-{i:05d}", "source_path": ""} for i in range(1, n_tasks + 1)]
    versions = [
        {
            "id": i,
            "task_id": i,
            "hash": f"{i:016x}{r.getrandbits(64):016x}",
            "path": f"tasks/scale-task-{i:05d}/{i:08x}",
            "instruction": f"Do thing {i}.",
            "category": r.choice(("files", "text", "build", "net")),
            "difficulty": r.choice(("easy", "medium", "hard")),
        }
        for i in range(1, n_tasks + 1)
    ]
    # Per-task pass rates spread over [0, 1] so every band status occurs.
    rate = {i: r.random() for i in range(1, n_tasks + 1)}
    episodes = []
    for e in range(n_episodes):
        vid = 1 + e % n_tasks
        outcome = "passed" if r.random() < rate[vid] else r.choice(OUTCOMES[1:])
        episodes.append(
            {
                "task_version_id": vid,
                "agent": MODEL,
                "batch_id": f"bscale-{e // 5000}",
                "attempt": e // n_tasks,
                "status": "done",
                "outcome": outcome,
                "reward": 1.0 if outcome == "passed" else (0.0 if outcome == "failed" else None),
            }
        )
    with session(ws.engine) as s:
        queries.bulk_insert(s, "task", tasks)
        queries.bulk_insert(s, "task_version", versions)
    with session(ws.engine) as s:
        for i in range(0, len(episodes), 20_000):
            queries.bulk_insert(s, "episode", episodes[i : i + 20_000])
    return time.perf_counter() - t0


def best(fn: Callable[[], Any], repeat: int) -> tuple[float, Any]:
    times, out = [], None
    for _ in range(repeat):
        t0 = time.perf_counter()
        out = fn()
        times.append(time.perf_counter() - t0)
    return min(times), out


def baseline_bands(db: Path) -> dict[int, tuple[int, int]]:
    """The least work a band needs: every (version, outcome) of the model, counted in a dict."""
    con = sqlite3.connect(db)
    try:
        counts: dict[int, list[int]] = {}
        for vid, outcome in con.execute(
            "SELECT task_version_id, outcome FROM episode WHERE agent = ? AND status = 'done'", (MODEL,)
        ):
            c = counts.setdefault(vid, [0, 0])
            if not outcome.startswith("infra_error"):
                c[0] += 1
                c[1] += outcome == "passed"
        return {v: (n, p) for v, (n, p) in counts.items()}
    finally:
        con.close()


def baseline_rows(db: Path) -> list[tuple[Any, ...]]:
    con = sqlite3.connect(db)
    try:
        return con.execute(
            "SELECT t.id, t.name, v.id, v.hash, v.category, v.difficulty FROM task_version v "
            "JOIN task t ON t.id = v.task_id ORDER BY t.id"
        ).fetchall()
    finally:
        con.close()


def baseline_count(db: Path) -> int:
    con = sqlite3.connect(db)
    try:
        return con.execute("SELECT count(*) FROM episode").fetchone()[0]
    finally:
        con.close()


def bands(ws: Workspace) -> Counter[str]:
    ests = calibrate.estimates(ws, MODEL, (1, 2))
    return Counter(calibrate.band_status(e, 0.1, 0.9, 4, 2) for e in ests)


async def tui_mount(ws: Workspace, n_tasks: int) -> float:
    """Seconds from app start to the Tasks table holding every row (headless)."""
    from bandpass.tui.app import BandpassApp
    from bandpass.tui.screens.tasks import TasksScreen
    from bandpass.tui.widgets.virtual_table import VirtualTable

    t0 = time.perf_counter()
    app = BandpassApp(ws, show_path=False)
    async with app.run_test(size=(160, 48)) as pilot:
        while True:
            screen = app.screen
            if isinstance(screen, TasksScreen) and screen.last_load_s is not None:
                table = screen.query_one(VirtualTable)
                if table.total_count >= n_tasks:
                    await pilot.pause()  # one more frame: the rows are painted, not just held
                    break
            if time.perf_counter() - t0 > 300:
                raise RuntimeError("the Tasks screen did not load within 300 s")
            await pilot.pause(0.02)
        return time.perf_counter() - t0


def line(name: str, ours: float, base: float, base_name: str, extra: str = "") -> None:
    print(
        f"{name:<34} {ours * 1000:9.1f} ms   baseline {base_name:<28} {base * 1000:8.1f} ms   "
        f"ratio {ours / base:7.1f}x {extra}",
        flush=True,
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-tui", action="store_true", help="skip the headless Tasks screen figure")
    args = ap.parse_args()
    print(
        f"# bench_scale: {args.episodes:,} episodes x {args.tasks:,} tasks · {platform.machine()} · "
        f"{os.cpu_count()} cpu · Python {platform.python_version()} · load {os.getloadavg()[0]:.1f}",
        flush=True,
    )
    with tempfile.TemporaryDirectory(prefix="bandpass-bench-scale-") as tmp:
        ws = Workspace.open(Path(tmp) / "ws")
        secs = fill(ws, args.tasks, args.episodes)
        size_mb = sum(p.stat().st_size for p in ws.db_path.parent.glob(ws.db_path.name + "*")) / 1e6
        print(f"fill (bulk_insert)                  {secs:9.2f} s    db {size_mb:.1f} MB", flush=True)

        base_b, counted = best(lambda: baseline_bands(ws.db_path), args.repeat)
        ours_b, statuses = best(lambda: bands(ws), args.repeat)
        assert len(counted) == args.tasks and sum(statuses.values()) == args.tasks
        line("band computation (estimates)", ours_b, base_b, "sqlite3 outcomes + dict", f"{dict(statuses)}")

        def rows() -> list[Any]:
            with session(ws.engine) as s:
                return queries.task_rows(s)

        base_r, raw = best(lambda: baseline_rows(ws.db_path), args.repeat)
        ours_r, got = best(rows, args.repeat)
        assert len(raw) == len(got) == args.tasks
        line("queries.task_rows", ours_r, base_r, "sqlite3 task+version rows")

        from bandpass.tui.screens.tasks import load_tasks

        ours_l, data = best(lambda: load_tasks(ws, MODEL), args.repeat)
        assert len(data.rows) == args.tasks
        line("Tasks screen data (load_tasks)", ours_l, base_b, "sqlite3 outcomes + dict")

        if not args.no_tui:
            base_c, n = best(lambda: baseline_count(ws.db_path), args.repeat)
            assert n == args.episodes
            ours_t = asyncio.run(tui_mount(ws, args.tasks))
            line("Tasks screen mount -> rows shown", ours_t, base_c, "SELECT count(*) FROM episode")


if __name__ == "__main__":
    main()
