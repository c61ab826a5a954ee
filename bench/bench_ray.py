"""Local vs Ray throughput: the same small batch of tiny episodes on both executors, in one run.

Run: .venv/bin/python bench/bench_ray.py [--tasks 3] [--k 4] [--concurrency 2]
Needs the ``cluster`` extra (Ray) and a Docker engine. Oracle on ``--tasks`` tiny tasks × ``--k`` (12
episodes by default), each executor on a fresh workspace with the same tasks, images built beforehand:

* ``local``: ``LocalExecutor(concurrency)``, a thread pool on this Docker engine;
* ``ray``: ``RayExecutor(concurrency)`` on a Ray instance started in this process (``ray.init`` with
  ``concurrency`` CPUs; its workers are separate processes on the same engine), after one warm-up batch
  so worker start-up (a Python process importing the engine per CPU) is reported apart, not in the rate.

Prints episodes/min for each, the ratio ray/local, Ray's start-up costs and the load average before and
after; asserts only that every episode passed. On one machine Ray can only add cost (serialising the
task, streaming events back, the head writing the result); the ratio is that cost.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.app import episode_hooks
from bandpass.engine.run.executors import LocalExecutor
from bandpass.engine.run.rollouts import BatchSummary, plan_batch, run_planned
from bench.bench_rollouts import _workspace


def _load() -> str:
    return " ".join(f"{x:.2f}" for x in os.getloadavg())


def _line(name: str, sm: BatchSummary, wall: float) -> str:
    rate = 60.0 * sm.ran / wall
    return f"{name:<5}: {sm.ran} episodes in {wall:.1f}s = {rate:.1f} episodes/min  outcomes {sm.outcomes}"


def main() -> None:
    episode_hooks.install()  # its episodes end as `bandpass run`'s do: diagnosed, indexed
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=3)
    ap.add_argument("--k", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=2)
    args = ap.parse_args()
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray

    from bandpass.engine.run.executors.ray_executor import RayExecutor

    c, n = args.concurrency, args.tasks * args.k
    print(f"# bench_ray: {n} oracle episodes ({args.tasks} tiny tasks x k={args.k}), concurrency {c}")
    print(f"load before: {_load()} (1/5/15 min) · {os.cpu_count()} cpu · ray {ray.__version__}", flush=True)
    rates: dict[str, float] = {}
    with tempfile.TemporaryDirectory(prefix="bandpass-bench-ray-") as tmp:
        warm_ws, warm_vids = _workspace(Path(tmp) / "warm", args.tasks)  # builds the task images once
        run_planned(warm_ws, plan_batch(warm_ws, "oracle", warm_vids, 1, kind="builtin"), concurrency=c)

        ws, vids = _workspace(Path(tmp) / "local", args.tasks)
        bid = plan_batch(ws, "oracle", vids, args.k, kind="builtin")
        t0 = time.monotonic()
        sm = run_planned(ws, bid, executor=LocalExecutor(c))
        wall = time.monotonic() - t0
        assert sm.passed == n, sm.outcomes
        rates["local"] = 60.0 * sm.ran / wall
        print(_line("local", sm, wall), flush=True)

        t0 = time.monotonic()
        ray.init(num_cpus=c, include_dashboard=False, log_to_driver=False, logging_level="warning")
        init_s = time.monotonic() - t0
        try:
            ws, vids = _workspace(Path(tmp) / "raywarm", args.tasks)
            t0 = time.monotonic()
            run_planned(ws, plan_batch(ws, "oracle", vids[:1], c, kind="builtin"), executor=RayExecutor(c))
            warm_s = time.monotonic() - t0
            print(
                f"ray start-up: ray.init {init_s:.1f}s, "
                f"first batch ({c} episodes, cold workers) {warm_s:.1f}s"
            )
            ws, vids = _workspace(Path(tmp) / "ray", args.tasks)
            bid = plan_batch(ws, "oracle", vids, args.k, kind="builtin")
            t0 = time.monotonic()
            sm = run_planned(ws, bid, executor=RayExecutor(c))
            wall = time.monotonic() - t0
            assert sm.passed == n, sm.outcomes
            rates["ray"] = 60.0 * sm.ran / wall
            print(_line("ray", sm, wall), flush=True)
        finally:
            ray.shutdown()
    print(f"ratio ray/local: {rates['ray'] / rates['local']:.2f}x")
    print(f"load after: {_load()}")


if __name__ == "__main__":
    main()
