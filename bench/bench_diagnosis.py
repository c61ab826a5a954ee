"""Diagnosis at scale: 10,000 stored episodes diagnosed, and the tag queue's cluster view over 10,000
failures.

Run: .venv/bin/python bench/bench_diagnosis.py [--episodes 10000] [--tasks 500] [--repeat 3] [--no-tui]
Fills a fresh workspace with synthetic finished episodes (each with 4 steps of keystrokes and screens,
and a pytest-like verifier output naming one of a few failing tests, or an agent/infra error), then
times, best of ``--repeat``:

* ``engine.review.diagnoser.diagnose_episodes`` over all of them (read, rules, signature, write), against
  a baseline that only reads the same rows and parses their JSON (the floor any diagnosis pays);
* ``engine.review.clusters.load_clusters`` (``bandpass clusters``) over the stored diagnoses;
* the tag queue in a headless Textual app over 10,000 failures: its load — in a worker thread: the wall
  time from ``r`` to the rows shown, the worker's read and grouping, the UI thread's share (handing the
  rows to the table), and the longest the UI event loop went unanswered meanwhile (a 10 ms ticker); each
  the median of 3 reloads — and
  ``k``, the cluster view opening (key to cluster rows painted; median of 5).

Goals (issue 15): diagnose 10,000 < 10 s; cluster view over 10,000 failures opens < 300 ms.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries
from bandpass.store.db import session

PYTEST = (
    "============================= test session starts ==============================\n"
    "collected 4 items\n\ntests/test_outputs.py ..F.{pad}\n\n"
    "=========================== short test summary info ============================\n"
    "FAILED tests/test_outputs.py::{test} - AssertionError: expected {n}\n"
    "========================= 1 failed, 3 passed in 0.12s ==========================\n"
)
OUTCOMES = (
    "failed",
    "failed",
    "failed",
    "agent_error:turn_limit",
    "agent_error:parse_error",
    "infra_error:policy_unavailable",
)


def fill(ws: Workspace, n_eps: int, n_tasks: int, seed: int = 11) -> None:
    r = random.Random(seed)
    tasks = [{"id": i, "name": f"diag-task-{i:04d}", "source_path": ""} for i in range(1, n_tasks + 1)]
    versions = [
        {
            "id": i,
            "task_id": i,
            "hash": f"{r.getrandbits(64):016x}{i:016x}",
            "path": f"tasks/diag-task-{i:04d}",
            "instruction": f"Write the answer into /app/out-{i}.txt.",
        }
        for i in range(1, n_tasks + 1)
    ]
    eps, steps = [], []
    for e in range(1, n_eps + 1):
        outcome = r.choice(OUTCOMES)
        test = f"test_{r.choice('abc')}"
        eps.append(
            {
                "id": e,
                "task_version_id": r.randint(1, n_tasks),
                "agent": "policy:bench",
                "batch_id": "bench",
                "status": "done",
                "outcome": outcome,
                "reward": 0.0 if not outcome.startswith("infra") else None,
                "error": "try 0: infra_error:policy_unavailable: step 0: cannot reach http://127.0.0.1:9/v1"
                if outcome.startswith("infra")
                else "",
                "verifier_output": PYTEST.format(test=test, n=r.randint(1, 99), pad=" " * 40)
                if outcome == "failed"
                else "",
            }
        )
        loop = outcome == "agent_error:turn_limit" and r.random() < 0.5
        for i in range(4):
            keys = "ls\n" if loop else f"cat /app/file{i}.txt | head -n {i + 5}\n"
            steps.append(
                (
                    e,
                    i,
                    1.0 + 7.5 * i,
                    json.dumps(
                        {
                            "analysis": "looking at the files " * 4,
                            "plan": "print the file, then fix it " * 3,
                            "commands": [{"keystrokes": keys, "duration": 1.0}],
                            "task_complete": False,
                            "results": [{"completed": True, "exit_code": 0, "timed_out": False}],
                        }
                    ),
                    ("$ ls\nanswer.txt\n" * 3 if loop else f"$ cat file{i}\n" + "line of output\n" * 30)
                    + "$ ",
                    "[]",
                    "{}",
                )
            )
    with session(ws.engine) as s:
        queries.bulk_insert(s, "task", tasks)
        queries.bulk_insert(s, "task_version", versions)
        queries.bulk_insert(s, "episode", eps)
        s.connection().exec_driver_sql(
            'INSERT INTO step (episode_id, "index", marker_time, action_json, observation, cuts_json,'
            " raw_reply, prompt_tokens, completion_tokens, latency_s, created_at)"
            " VALUES (?,?,?,?,?,?,?,0,0,0.0,'2026-01-01')",
            steps,
        )


def best(fn: Callable[[], object], repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def baseline_read(ws: Workspace) -> None:
    """Reads what the diagnosis reads and parses the JSON: the floor."""
    import sqlite3

    con = sqlite3.connect(ws.db_path)
    for (v,) in con.execute("SELECT verifier_output FROM episode WHERE status = 'done'"):
        v.splitlines()
    for a, c in con.execute("SELECT action_json, cuts_json FROM step"):
        json.loads(a)
        json.loads(c)
    con.close()


@dataclass
class LoadFigures:
    wall: float  # `r` to the rows shown
    worker: float  # read + group, in the worker thread
    ui: float  # the rows handed to the table, on the UI thread
    stall: float  # the longest the event loop went unanswered during the load


async def cluster_view(ws: Workspace, repeat: int) -> tuple[float, LoadFigures, int, int]:
    from textual.app import App

    from bandpass.tui.app import freeze_startup_objects
    from bandpass.tui.screens.tag_queue import TagQueueScreen

    class Host(App[None]):
        def __init__(self) -> None:
            super().__init__()
            self.queue = TagQueueScreen(ws)

        def on_mount(self) -> None:
            if not os.environ.get("BANDPASS_BENCH_NO_FREEZE"):
                freeze_startup_objects()  # as BandpassApp does on mount
            self.push_screen(self.queue)

    app = Host()
    async with app.run_test(size=(170, 45)) as pilot:
        q = app.queue
        while not q.settled:  # the first load, on mount
            await asyncio.sleep(0.01)
        runs = []
        for _ in range(max(repeat, 3)):
            loads = q.loads
            t0 = time.perf_counter()
            q.action_refresh()  # what `r` runs: the load goes to its worker thread
            last, stall = time.perf_counter(), 0.0
            while q.loads == loads:  # the UI event loop keeps turning: how long did it go unanswered?
                await asyncio.sleep(0.01)
                now = time.perf_counter()
                stall, last = max(stall, now - last), now
            runs.append((time.perf_counter() - t0, q.last_load_s or 0.0, q.last_apply_s or 0.0, stall))
        load = LoadFigures(*(statistics.median(r[k] for r in runs) for k in range(4)))
        times = []
        for _ in range(max(repeat, 5)):
            t0 = time.perf_counter()
            q.action_toggle_clusters()  # what `k` runs: the clusters' rows into the table
            await pilot.pause()  # and painted
            times.append(time.perf_counter() - t0)
            q.action_toggle_clusters()
            await pilot.pause()
        q.action_toggle_clusters()
        await pilot.pause()
        return statistics.median(times), load, len(q._all), len(q.clusters)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--episodes", type=int, default=10_000)
    ap.add_argument("--tasks", type=int, default=500)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-tui", action="store_true")
    args = ap.parse_args()
    from bandpass.engine.review.clusters import load_clusters
    from bandpass.engine.review.diagnoser import diagnose_episodes

    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.open(Path(tmp) / "ws")
        t0 = time.perf_counter()
        fill(ws, args.episodes, args.tasks)
        print(
            f"fill: {args.episodes} episodes x 4 steps over {args.tasks} tasks"
            f" in {time.perf_counter() - t0:.1f} s"
        )
        base = best(lambda: baseline_read(ws), args.repeat)
        n = diagnose_episodes(ws)
        assert n == args.episodes, n
        diag = best(lambda: diagnose_episodes(ws, None, missing_only=False), args.repeat)
        print(
            f"diagnose {args.episodes:,} episodes      {diag:7.2f} s   baseline (read+parse) {base:.2f} s"
            f"   ratio {diag / base:.1f}x   goal < 10 s"
        )
        cl: list = []
        t = best(lambda: cl.extend(load_clusters(ws)) or None, args.repeat)
        print(f"load_clusters (bandpass clusters)   {t * 1000:7.0f} ms  {len(cl) // args.repeat} clusters")
        if not args.no_tui:
            view, load, items, clusters = asyncio.run(cluster_view(ws, args.repeat))
            print(
                f"tag queue load ({items:,} failures)     {load.wall * 1000:7.0f} ms   in its worker"
                f" {load.worker * 1000:.0f} ms, on the UI thread {load.ui * 1000:.0f} ms,"
                f" longest UI stall {load.stall * 1000:.0f} ms"
            )
            print(f"cluster view open (k, {clusters} clusters, median) {view * 1000:5.0f} ms   goal < 300 ms")


if __name__ == "__main__":
    main()
