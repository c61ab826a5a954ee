"""What the defences against the policy's code cost (issue #40): the oracle episode of every sound example
task with the verifier's wrapper and pytest observer (engine/run/observer.py) against the same episode
without them (``BANDPASS_VERIFIER_OBSERVER=0``: test.sh typed as before), interleaved in one process
(the order alternates every round, so drift in the machine's load hits both alike), verified in a clean
room as a rollout is.

Prints, per task and overall, the median episode wall time each way and the ratio, and the median verify
phase each way (the only phase that changes). The goal: at most +10% per episode.

Run: .venv/bin/python bench/bench_defences.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bandpass.engine.app import episode_hooks
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import OracleAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.run.verifier import OBSERVER_ENV
from bench.sound_examples import SOUND, phase_s, sound_workspace

ARMS = ("without", "with")


def _run(ws: Workspace, vid: int, arm: str) -> object:
    os.environ[OBSERVER_ENV] = "1" if arm == "with" else "0"
    try:
        return run_episode(ws, vid, OracleAgent())
    finally:
        os.environ.pop(OBSERVER_ENV, None)


def main(rounds: int = 5) -> None:
    episode_hooks.install()  # its episodes end as `bandpass run`'s do: diagnosed, indexed
    load0 = os.getloadavg()[0]
    with sound_workspace() as (ws, vids):
        for name in SOUND:  # images built, pools warmed (not timed)
            for arm in ARMS:
                res = _run(ws, vids[name], arm)
                assert res.outcome == "passed", (name, arm, res.outcome, res.detail)  # type: ignore[attr-defined]
        wall: dict[tuple[str, str], list[float]] = {(n, a): [] for n in SOUND for a in ARMS}
        verify: dict[str, list[float]] = {a: [] for a in ARMS}
        for r in range(rounds):
            order = ARMS if r % 2 == 0 else ARMS[::-1]
            for name in SOUND:
                for arm in order:
                    t = time.perf_counter()
                    res = _run(ws, vids[name], arm)
                    wall[(name, arm)].append(time.perf_counter() - t)
                    assert res.outcome == "passed", (name, arm, res.outcome)  # type: ignore[attr-defined]
                    verify[arm].append(phase_s(res, "verify"))
    load1 = os.getloadavg()[0]
    print(f"load {load0:.1f} -> {load1:.1f}; {rounds} rounds x {len(SOUND)} tasks x 2 arms (oracle episodes)")
    print(f"{'task':24} {'without':>10} {'with':>10} {'ratio':>7}")
    totals = {a: 0.0 for a in ARMS}
    for name in SOUND:
        wo, wi = statistics.median(wall[(name, "without")]), statistics.median(wall[(name, "with")])
        totals["without"] += wo
        totals["with"] += wi
        print(f"{name:24} {wo * 1000:8.0f} ms {wi * 1000:8.0f} ms {wi / wo:6.2f}x")
    ratio = totals["with"] / totals["without"]
    wo_sum, wi_sum = totals["without"] * 1000, totals["with"] * 1000
    print(f"{'sum of medians':24} {wo_sum:8.0f} ms {wi_sum:8.0f} ms {ratio:6.2f}x")
    wo, wi = statistics.median(verify["without"]), statistics.median(verify["with"])
    print(f"{'verify phase (median)':24} {wo * 1000:8.0f} ms {wi * 1000:8.0f} ms {wi / wo:6.2f}x")
    print(f"defences per episode: {100 * (ratio - 1):+.1f}% (goal: at most +10%)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
