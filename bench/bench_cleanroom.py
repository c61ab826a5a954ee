"""Clean-room and service cost: the oracle episode of every sound example task verified in a clean room (a
second, fresh container with the artifacts carried in) and as a service (the same fresh container joined
to the agent container's network namespace, the agent's listening processes kept) against the same
episode verified in place, interleaved in one process (the order rotates every round so drift in the
machine's load hits every mode alike).

Prints, per task and overall, the median episode wall time each way and the ratios, and the median of the
phases that differ (capture, verify). Goals: the clean room at most +25% per episode (issue #27); a
service task verified as a service instead of in place at most +10% (issue #40).

Run: .venv/bin/python bench/bench_cleanroom.py [ROUNDS]
"""

from __future__ import annotations

import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bandpass.engine.app import episode_hooks
from bandpass.engine.run.agents.builtin import OracleAgent
from bandpass.engine.run.episode import run_episode
from bench.sound_examples import SOUND, phase_s, sound_workspace

MODES = ("in_place", "clean_room", "service")


def main(rounds: int = 5) -> None:
    episode_hooks.install()  # its episodes end as `bandpass run`'s do: diagnosed, indexed
    load0 = os.getloadavg()[0]
    with sound_workspace() as (ws, vids):
        for name in SOUND:  # images built, pools warmed (not timed)
            for mode in MODES:
                res = run_episode(ws, vids[name], OracleAgent(), verify_mode=mode)
                assert res.outcome == "passed", (name, mode, res.outcome, res.detail)
        wall: dict[tuple[str, str], list[float]] = {(n, m): [] for n in SOUND for m in MODES}
        phases: dict[tuple[str, str], list[float]] = {
            (p, m): [] for p in ("setup", "agent", "capture", "verify") for m in MODES
        }
        for r in range(rounds):
            order = MODES[r % 3 :] + MODES[: r % 3]
            for name in SOUND:
                for mode in order:
                    t = time.perf_counter()
                    res = run_episode(ws, vids[name], OracleAgent(), verify_mode=mode)
                    wall[(name, mode)].append(time.perf_counter() - t)
                    assert res.outcome == "passed", (name, mode, res.outcome, res.detail)
                    for p in ("setup", "agent", "capture", "verify"):
                        phases[(p, mode)].append(phase_s(res, p))
    load1 = os.getloadavg()[0]
    print(
        f"load {load0:.1f} -> {load1:.1f}; {rounds} rounds x {len(SOUND)} tasks x {len(MODES)} modes "
        "(oracle episodes)"
    )
    print(f"{'task':24} {'in place':>10} {'clean room':>11} {'service':>10} {'cr/ip':>6} {'sv/ip':>6}")
    totals = {m: 0.0 for m in MODES}
    for name in SOUND:
        ip, cr, sv = (statistics.median(wall[(name, m)]) for m in MODES)
        for m, v in zip(MODES, (ip, cr, sv), strict=True):
            totals[m] += v
        print(
            f"{name:24} {ip * 1000:8.0f} ms {cr * 1000:9.0f} ms {sv * 1000:8.0f} ms "
            f"{cr / ip:5.2f}x {sv / ip:5.2f}x"
        )
    ip, cr, sv = (totals[m] for m in MODES)
    print(
        f"{'sum of medians':24} {ip * 1000:8.0f} ms {cr * 1000:9.0f} ms {sv * 1000:8.0f} ms "
        f"{cr / ip:5.2f}x {sv / ip:5.2f}x"
    )
    for p in ("setup", "agent", "capture", "verify"):
        ip_p, cr_p, sv_p = (statistics.median(phases[(p, m)]) for m in MODES)
        print(f"phase {p:18} {ip_p * 1000:8.0f} ms {cr_p * 1000:9.0f} ms {sv_p * 1000:8.0f} ms")
    print(f"clean room per episode: {100 * (cr / ip - 1):+.0f}% (goal: at most +25%)")
    print(f"service per episode: {100 * (sv / ip - 1):+.0f}% against in place (goal: at most +10%)")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
