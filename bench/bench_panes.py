"""Live panes: key-press-to-repaint latency while N TerminalViews each receive 100 KB/s.

Runs the app headless (``App.run_test``), with a grid of ``TerminalView`` (160x40 emulated screens, as
the episode runner uses), four panes a row, every pane visible (``BENCH_LAYOUT=app`` instead uses the
Runs screen's 4x2 grid, the other panes out of sight), and a probe widget bound to a key. Each press is
timed from just before the key is posted to the moment the probe's ``render`` runs with the new value
(i.e. Textual has processed the key, refreshed, and is compositing the frame). Two phases in the same
process: a baseline with the panes idle, then with one plain thread per pane (like the engine's terminal
readers) feeding it ~100 KB/s of coloured ``ls``-like output in 4 KiB chunks.

    BENCH_PANES=16 .venv/bin/python bench/bench_panes.py [--presses 80] [--rate 100] [--fps 60]

The repaint rate counts frames that repainted something, per pane, over the busy phase. (Pilot's
``press`` waits up to a second for the process to look idle, which it never does here, so the busy phase
lasts about two seconds per press; the latency is timed from the press to the probe's render, not that.)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Grid
from textual.widgets import Static

from bandpass.tui.widgets.terminal_view import TerminalView

#: Live panes fed at once (``BENCH_PANES=16`` for the issue's goal: 16 panes x 100 KB/s).
PANES = int(os.environ.get("BENCH_PANES", "8"))
#: ``visible``: a grid that shows every pane (4 a row); ``app``: the Runs screen's 4x2, the rest scrolled off.
LAYOUT = os.environ.get("BENCH_LAYOUT", "visible")
GRID_ROWS = 2 if LAYOUT == "app" else max(1, -(-PANES // 4))
CHUNK = 4096


class Probe(Static):
    """Records when it renders a given value: the end of a key-press-to-repaint measurement."""

    def __init__(self) -> None:
        super().__init__("0", id="probe")
        self.value = 0
        self.rendered: dict[int, float] = {}

    def bump(self) -> None:
        self.value += 1
        self.update(str(self.value))

    def render(self):
        self.rendered.setdefault(self.value, time.perf_counter())
        return super().render()


class BenchApp(App[None]):
    CSS = f"""
    Grid {{ grid-size: 4 {GRID_ROWS}; height: 1fr; }}
    #probe {{ height: 1; }}
    """
    BINDINGS = [Binding("k", "bump", "bump")]

    def __init__(self, fps: float) -> None:
        super().__init__()
        self.fps = fps

    def compose(self) -> ComposeResult:
        yield Probe()
        with Grid():
            for _ in range(PANES):
                yield TerminalView(cols=160, rows=40, max_fps=self.fps)

    def action_bump(self) -> None:
        self.query_one(Probe).bump()


def stream_chunks(seed: int, n: int = 64) -> list[str]:
    """Pre-generated coloured listing output, so generating it costs nothing during the run."""
    rng = random.Random(seed)
    colours = ("\x1b[34m", "\x1b[32m", "\x1b[1;36m", "\x1b[38;5;208m", "\x1b[38;2;200;120;40m", "")
    out = []
    for _ in range(n):
        buf: list[str] = []
        size = 0
        while size < CHUNK:
            name = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz_.") for _ in range(rng.randint(4, 24)))
            size_s = f"{rng.randint(0, 10**7):>9}"
            line = f"-rw-r--r-- 1 root root {size_s} Jan  1 12:00 {rng.choice(colours)}{name}\x1b[0m\r\n"
            buf.append(line)
            size += len(line)
        out.append("".join(buf))
    return out


def feeder(view: TerminalView, rate_kb: float, stop: threading.Event, seed: int, fed: list[int]) -> None:
    chunks = stream_chunks(seed)
    interval = CHUNK / (rate_kb * 1024)
    nxt = time.perf_counter()
    i = 0
    while not stop.is_set():
        view.feed(chunks[i % len(chunks)])
        fed[0] += len(chunks[i % len(chunks)])
        i += 1
        nxt += interval
        delay = nxt - time.perf_counter()
        if delay > 0:
            time.sleep(delay)
        else:
            nxt = time.perf_counter()  # fell behind: don't burst to catch up


async def measure(app: BenchApp, pilot, presses: int) -> list[float]:
    probe = app.query_one(Probe)
    out = []
    for _ in range(presses):
        target = probe.value + 1
        t0 = time.perf_counter()
        await pilot.press("k")
        while target not in probe.rendered:
            await asyncio.sleep(0.0005)
        out.append((probe.rendered[target] - t0) * 1000)
        await asyncio.sleep(0.03 + random.random() * 0.02)  # presses arrive at a human-ish pace, unaligned
    return out


def summary(name: str, xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(round(0.95 * (len(xs) - 1))))]
    return f"{name:<26} median {statistics.median(xs):7.1f} ms   p95 {p95:7.1f} ms   max {xs[-1]:7.1f} ms"


async def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--presses", type=int, default=80)
    ap.add_argument("--rate", type=float, default=100.0, help="KB/s per pane")
    ap.add_argument("--fps", type=float, default=60.0, help="TerminalView.max_fps")
    ap.add_argument("--seconds-warmup", type=float, default=1.0)
    args = ap.parse_args()

    app = BenchApp(args.fps)
    async with app.run_test(size=(200, 60)) as pilot:
        views = list(app.query(TerminalView))
        await pilot.pause(0.5)
        base = await measure(app, pilot, args.presses)

        stop = threading.Event()
        fed = [[0] for _ in views]
        threads = [
            threading.Thread(target=feeder, args=(v, args.rate, stop, i, fed[i]), daemon=True)
            for i, v in enumerate(views)
        ]
        paints0 = [v.paint_count for v in views]
        t_start = time.perf_counter()
        for t in threads:
            t.start()
        await asyncio.sleep(args.seconds_warmup)
        busy = await measure(app, pilot, args.presses)
        elapsed = time.perf_counter() - t_start
        stop.set()
        for t in threads:
            t.join()
        paints = [v.paint_count - p for v, p in zip(views, paints0, strict=True)]
        on_screen = [v in app.screen._compositor.visible_widgets for v in views]
        pane_size = views[0].size

    total_kb = sum(f[0] for f in fed) / 1024
    print(
        f"panes: {PANES} x TerminalView(160x40) in a 200x60 headless app, grid 4x{GRID_ROWS} ({LAYOUT}: "
        f"{sum(on_screen)} panes on screen, each {pane_size.width}x{pane_size.height}), max_fps={args.fps:g}"
    )
    print(
        f"feed: target {args.rate:g} KB/s per pane; achieved {total_kb / elapsed / PANES:.1f} KB/s per pane "
        f"({total_kb / elapsed:.0f} KB/s total) over {elapsed:.1f} s"
    )
    shown = [p / elapsed for p, seen in zip(paints, on_screen, strict=True) if seen] or [0.0]
    print(
        f"repaints per visible pane: {statistics.mean(shown):.1f} /s (min {min(shown):.1f}; cap {args.fps:g})"
    )
    print(summary("baseline (0 panes busy)", base))
    print(summary(f"{PANES} panes x {args.rate:g} KB/s", busy))
    import resource

    rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    print(
        f"process max RSS {rss_mb:.0f} MB with {PANES} panes (each: one native 160x40 terminal, no history)"
    )


if __name__ == "__main__":
    asyncio.run(main())
