"""Screen switches on the demo workspace: from the key press to the new screen painted, per switch.

Run: .venv/bin/python bench/bench_screens.py [--rounds 20] [--workspace DIR]

Why: under load a slow switch made Escape on Calibration easy to hit twice (issue 30); a switch should
feel instant. A headless Textual app (``run_test``) on the demo workspace (``bandpass demo``'s data,
prepared in a temporary folder unless ``--workspace``) takes one round through every area and back —
Overview, Tasks, Runs, Generate, Settings, Calibration, Tag queue, Episodes, Replay (``6`` from Tasks)
and Escape out of the pushed ones — ``--rounds`` times. Each key is delivered as the terminal delivers it
(a Key event into the driver's queue); the clock stops when the expected screen is the active one and the
compositor has painted it (``call_after_refresh`` on that screen: the first refresh after it took over).
Figures per switch: median and p95 in ms over the rounds, and, apart, the first round (a mode's screen is
built then; later switches to it resume it). The load average is printed with the figures: the goal, p95
< 150 ms, is for a quiet machine.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from textual import events

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.tui.app import BandpassApp
from bandpass.tui.commands.demo import prepare_demo
from bandpass.tui.screens.calibration import CalibrationScreen
from bandpass.tui.screens.episodes import EpisodesScreen
from bandpass.tui.screens.generate import GenerateScreen
from bandpass.tui.screens.overview import OverviewScreen
from bandpass.tui.screens.replay import ReplayScreen
from bandpass.tui.screens.runs import RunsScreen
from bandpass.tui.screens.settings import SettingsScreen
from bandpass.tui.screens.tag_queue import TagQueueScreen
from bandpass.tui.screens.tasks import TasksScreen

#: One round: (label, key, the screen the key must bring up).
ROUND = [
    ("overview → tasks (1)", "1", TasksScreen),
    ("tasks → runs (2)", "2", RunsScreen),
    ("runs → generate (3)", "3", GenerateScreen),
    ("generate → settings (4)", "4", SettingsScreen),
    ("settings → calibration (5)", "5", CalibrationScreen),
    ("calibration → tag queue (7)", "7", TagQueueScreen),
    ("tag queue → tasks (1)", "1", TasksScreen),
    ("tasks → episodes (8)", "8", EpisodesScreen),
    ("episodes → tasks (esc)", "escape", TasksScreen),
    ("tasks → replay (6)", "6", ReplayScreen),
    ("replay → tasks (esc)", "escape", TasksScreen),
    ("tasks → overview (0)", "0", OverviewScreen),
]
GOAL_P95_MS = 150.0


def send(app: BandpassApp, key: str) -> None:
    event = events.Key(key, key if len(key) == 1 else None)
    event.set_sender(app)
    app._driver.send_message(event)  # as the terminal driver would


async def switch(app: BandpassApp, key: str, want: type) -> float:
    """Seconds from the key to the ``want`` screen active and painted."""
    painted = asyncio.Event()
    t0 = time.perf_counter()
    send(app, key)
    while not isinstance(app.screen, want):
        await asyncio.sleep(0.001)
    app.screen.call_after_refresh(painted.set)
    await painted.wait()
    return time.perf_counter() - t0


async def run(ws: Workspace, rounds: int) -> dict[str, list[float]]:
    os.environ["DOCKER_HOST"] = "unix:///nonexistent/docker.sock"  # nothing reaches Docker
    app = BandpassApp(ws, bus=EventBus(), show_path=False, start="overview")
    times: dict[str, list[float]] = {label: [] for label, _, _ in ROUND}
    async with app.run_test(size=(160, 48)) as pilot:
        while not isinstance(app.screen, OverviewScreen):
            await pilot.pause()
        await pilot.pause()
        for _ in range(rounds):
            for label, key, want in ROUND:
                times[label].append(await switch(app, key, want))
                await pilot.pause(0.05)  # a curator reads before the next key
    assert not app.unexpected, app.unexpected
    return times


def p95(xs: list[float]) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--workspace", type=Path, default=None, help="A prepared demo workspace.")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        root = args.workspace or Path(tmp) / "demo"
        ws, _added, _warnings = prepare_demo(root)
        load = os.getloadavg()
        times = asyncio.run(run(ws, args.rounds))
        load_after = os.getloadavg()
    print(f"screen switches on the demo workspace, 160x48, {args.rounds} rounds")
    print(f"load average {load[0]:.1f} before, {load_after[0]:.1f} after; {os.cpu_count()} CPUs")
    print(f"{'switch':<32} {'first':>8} {'median':>8} {'p95':>8}")
    worst = 0.0
    for label, xs in times.items():
        rest = xs[1:] or xs
        worst = max(worst, p95(rest) * 1000)
        print(
            f"{label:<32} {xs[0] * 1000:>6.0f}ms {statistics.median(rest) * 1000:>6.0f}ms "
            f"{p95(rest) * 1000:>6.0f}ms"
        )
    every = [x for xs in times.values() for x in xs[1:]]
    verdict = "met" if p95(every) * 1000 < GOAL_P95_MS else "not met"
    print(
        f"all switches after the first round: median {statistics.median(every) * 1000:.0f} ms, "
        f"p95 {p95(every) * 1000:.0f} ms, worst switch p95 {worst:.0f} ms "
        f"(goal p95 < {GOAL_P95_MS:.0f} ms on a quiet machine: {verdict} at this load)"
    )


if __name__ == "__main__":
    main()
