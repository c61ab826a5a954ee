"""A SIGKILLed audit or batch leaves no container of its workspace up: N runs of each (issue 40, item 6).

Each run starts ``bandpass audit`` (or ``bandpass run --agent nop``) on a task whose verifier takes 45 s,
waits until one of its containers is *paused* (an agent's container frozen while its clean room
verifies: the case a lifeline inside the container cannot handle), SIGKILLs the process, and measures the
seconds until no container of that workspace is running or paused. A run past 60 s fails. The logic is
the suite's own (``tests/engine/sandbox/test_reaper.py::sigkill_while_paused``), which runs it once per
command.

Run: .venv/bin/python bench/bench_reaper.py [N]   (default 20)
"""

from __future__ import annotations

import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("BANDPASS_REAP_ON_START", "0")

from bandpass.engine.sandbox.docker_engine import get_client
from tests.engine.sandbox.test_reaper import OUTLIVE_S, sigkill_while_paused


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    client = get_client(reap=False)
    print(f"load {os.getloadavg()[0]:.1f}; {n} runs per command, bound {OUTLIVE_S:g} s")
    for command in ("audit", "run"):
        with tempfile.TemporaryDirectory(prefix=f"bench-reaper-{command}-") as tmp:
            started = time.monotonic()
            took = []
            failed = 0
            for i in range(n):
                try:
                    took += sigkill_while_paused(client, Path(tmp) / str(i), command)
                except AssertionError as exc:
                    failed += 1
                    print(f"  run {i + 1}: FAILED: {exc}")
            ok = len(took)
            print(
                f"{command:5}: {ok} of {n} runs left nothing up within {OUTLIVE_S:g} s "
                f"(failed {failed}); nothing up a median {statistics.median(took):.2f} s, "
                f"max {max(took):.2f} s after the SIGKILL; {time.monotonic() - started:.0f} s wall"
                if took
                else f"{command:5}: 0 of {n} runs"
            )
    print(f"load {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
