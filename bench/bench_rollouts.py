"""Rollout throughput: episodes per minute at several concurrencies, oracle agent on tiny tasks.

Run: .venv/bin/python bench/bench_rollouts.py [--tasks 2] [--k 4] [--concurrency 1 2 4]
Each concurrency gets a fresh workspace and its own batch of tasks x k episodes; the task images are built
once beforehand so the figures are episode cost (container start, terminal, oracle, verifier, teardown),
not build cost. Prints one line per concurrency and the speed-up over the first; asserts nothing. Needs a
Docker engine (tiny tasks use debian:bookworm-slim, aliased to the offline base image).
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.app import episode_hooks
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.rollouts import plan_batch, run_planned
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.taskfactory import make_task


def _workspace(root: Path, n_tasks: int) -> tuple[Workspace, list[int]]:
    ws = Workspace.open(root / "ws")
    dirs = [
        make_task(root / "src", f"bench-{i}", instruction=f"Write 42 into /app/answer.txt ({i}).")
        for i in range(n_tasks)
    ]
    assert import_paths(ws, dirs).ok
    with session(ws.engine) as s:
        return ws, [r.version_id for r in queries.task_rows(s)]


def main() -> None:
    episode_hooks.install()  # its episodes end as `bandpass run`'s do: diagnosed, indexed
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=2)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--concurrency", type=int, nargs="+", default=[1, 2, 4])
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="bandpass-bench-") as tmp:
        warm_ws, warm_vids = _workspace(Path(tmp) / "warm", args.tasks)
        run_planned(warm_ws, plan_batch(warm_ws, "oracle", warm_vids, 1, kind="builtin"), concurrency=2)
        base = None
        for c in args.concurrency:
            ws, vids = _workspace(Path(tmp) / f"c{c}", args.tasks)
            bid = plan_batch(ws, "oracle", vids, args.k, kind="builtin")
            t0 = time.monotonic()
            sm = run_planned(ws, bid, concurrency=c)
            wall = time.monotonic() - t0
            rate = 60.0 * sm.ran / wall
            base = base or rate
            print(
                f"concurrency {c}: {sm.ran} episodes in {wall:.1f}s = {rate:.1f} episodes/min "
                f"({rate / base:.2f}x)  outcomes {sm.outcomes}",
                flush=True,
            )


if __name__ == "__main__":
    main()
