"""Step round trip: ``true`` through TerminalSession.run against a bare ``container.exec_run("true")``.

Run: .venv/bin/python bench/bench_step.py [--n 50]
The harness's per-step overhead is what marker-based completion must keep small: a fixed-sleep harness
pays its sleep on every step. Prints medians and their ratio; asserts nothing. Needs a Docker engine and
the local image bandpass/base:bookworm.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import docker

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.sandbox.terminal import TerminalSession

IMAGE = "bandpass/base:bookworm"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=50)
    args = ap.parse_args()
    client = docker.from_env()
    container = client.containers.run(
        IMAGE, ["sleep", "infinity"], detach=True, network_mode="none", init=True, labels={"bandpass": "1"}
    )
    try:
        session = TerminalSession(client, container, cols=120, rows=40)
        t = time.perf_counter()
        session.start()
        start_s = time.perf_counter() - t
        session.run("true")  # warm up
        runs = []
        for _ in range(args.n):
            t = time.perf_counter()
            r = session.run("true")
            runs.append(time.perf_counter() - t)
            if not r.completed:
                raise SystemExit(f"step did not complete: {r}")
        forks = []  # `true` is a bash builtin; /bin/true adds the fork+exec a real command pays
        for _ in range(args.n):
            t = time.perf_counter()
            session.run("/bin/true")
            forks.append(time.perf_counter() - t)
        session.close()
        container.exec_run("true")
        execs = []
        for _ in range(args.n):
            t = time.perf_counter()
            container.exec_run("true")
            execs.append(time.perf_counter() - t)
    finally:
        container.remove(force=True)
    m_run, m_exec = statistics.median(runs), statistics.median(execs)
    print(f"session start (to first prompt): {start_s * 1000:.1f} ms")
    print(
        f"TerminalSession.run('true'): median {m_run * 1000:.2f} ms, "
        f"p90 {_p90(runs) * 1000:.2f} ms (n={args.n})"
    )
    print(f"TerminalSession.run('/bin/true'): median {statistics.median(forks) * 1000:.2f} ms")
    print(f"container.exec_run('true'):  median {m_exec * 1000:.2f} ms, p90 {_p90(execs) * 1000:.2f} ms")
    print(f"ratio exec_run / session.run: {m_exec / m_run:.1f}x")


def _p90(xs: list[float]) -> float:
    return sorted(xs)[int(0.9 * (len(xs) - 1))]


if __name__ == "__main__":
    main()
