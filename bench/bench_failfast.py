"""Fail-fast: how long `bandpass run` takes to tell a curator that the policy endpoint cannot serve.

Run: .venv/bin/python bench/bench_failfast.py [--tasks 8] [--k 1] [--mid-k 8]

Two scenarios, each measured with the fail-fast behaviour and with it switched off (``--no-check
--stop-after-unavailable 0``: what `bandpass run` did before), on the same machine in the same run:

1. *nothing listens* at ``--base-url`` (the issue's report: 126 s, 8 of 8 infra errors, exit 0): the
   endpoint check answers before any container starts.
2. *the endpoint dies mid-batch* (answers the check, then HTTP 503 forever): three consecutive
   ``policy_unavailable`` episodes stop the batch instead of burning all of them.

Prints wall time, exit status and episodes run for each; asserts nothing. Needs a Docker engine for the
"before" figures and scenario 2 (tiny tasks on debian:bookworm-slim, aliased to the offline base image).
"""

from __future__ import annotations

import argparse
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))
from bandpass.engine.core.workspace import Workspace  # noqa: E402 - imported after the sys.path set-up above
from bandpass.engine.tasks.importer import import_paths  # noqa: E402 - imported after the sys.path set-up above
from bandpass.store import queries  # noqa: E402 - imported after the sys.path set-up above
from bandpass.store.db import session  # noqa: E402 - imported after the sys.path set-up above
from tests.support.servers.openai_server import running_server  # noqa: E402 - imported after the sys.path set-up above
from tests.support.taskfactory import make_task  # noqa: E402 - imported after the sys.path set-up above


def _workspace(root: Path, n: int) -> Workspace:
    ws = Workspace.open(root / "ws")
    dirs = [
        make_task(root / "src", f"ff-{i}", instruction=f"Write 42 into /app/answer.txt ({i}).")
        for i in range(n)
    ]
    assert import_paths(ws, dirs).ok
    return ws


def _dead_url() -> str:
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()
    return f"http://127.0.0.1:{port}/v1"


def _run(ws: Workspace, *args: str) -> tuple[float, int, int]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    t0 = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), "run", *args, "-j", "2"],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.monotonic() - t0
    with session(ws.engine) as s:
        done = len(queries.episodes(s, status="done"))
    return wall, proc.returncode, done


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", type=int, default=8)
    ap.add_argument("--k", type=int, default=1)
    ap.add_argument("--mid-k", type=int, default=8)
    args = ap.parse_args()
    old = ["--no-check", "--stop-after-unavailable", "0"]
    with tempfile.TemporaryDirectory(prefix="bandpass-bench-ff-") as tmp:
        root = Path(tmp)
        dead = _dead_url()
        common = ["--model", "x", "--base-url", dead, "--k", str(args.k)]
        print(f"1. nothing listens at the endpoint: {args.tasks} tasks x k={args.k}")
        ws = _workspace(root / "a", args.tasks)
        wall, rc, done = _run(ws, *common)
        print(f"   fail-fast: {wall:6.1f}s  exit {rc}  episodes run {done}", flush=True)
        ws = _workspace(root / "b", args.tasks)
        wall_old, rc, done = _run(ws, *common, *old)
        print(f"   before:    {wall_old:6.1f}s  exit {rc}  episodes run {done}", flush=True)
        print(f"   ratio: {wall_old / wall:.0f}x sooner", flush=True)

        print(f"2. endpoint dies after the check (HTTP 503): 1 task x k={args.mid_k}")
        with running_server() as server:
            for label, extra, sub in (("fail-fast", [], "c"), ("before", old[1:], "d")):
                server.script("dying", ["ok", {"status": 503}])
                ws = _workspace(root / sub, 1)
                wall, rc, done = _run(
                    ws, "--model", "dying", "--base-url", server.base_url, "--k", str(args.mid_k),
                    "--infra-retries", "0", *extra,
                )  # fmt: skip
                print(f"   {label:<10} {wall:6.1f}s  exit {rc}  episodes run {done}", flush=True)


if __name__ == "__main__":
    main()
