"""Seek latency in a long recording: keyframe seek (engine.review.replay) against replaying from the start.

Run: .venv/bin/python bench/bench_seek.py [--mb 20] [--minutes 60] [--seeks 200] [--baseline 5]
Generates a one-hour, ~20 MB agent session (shell output, coloured test runs, full-screen editor
segments, typed commands echoed one character per event, a step marker every ~30 s), writes it as an
asciicast v2 file, then measures: reading it, building the keyframe index, random seeks (the curator
scrubbing the timeline), marker-to-marker jumps, short forward skips, and — for a few of the same
targets — replaying from the first byte. Checks that both ways give the same screen. Also: a seek
followed by reading the whole visible screen as a pane paints it (all 40 rows as styled runs: the
restored keyframe's rows are decoded then, not before), and the process's resident memory before reading
the cast and after indexing and seeking (``/proc/self/statm``; the emulator's native set-up is paid
before the first figure). Prints figures.
"""

from __future__ import annotations

import argparse
import gc
import json
import platform
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.review.replay import KeyframeIndex, Player, replay_from_start, settle_gc
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.sandbox.emulator import Screen

COLS, ROWS = 120, 40


def _plain(r: random.Random, n: int) -> str:
    out, size = [], 0
    while size < n:
        size_ = r.randint(0, 10**7)
        line = (
            f"-rw-r--r-- 1 user group {size_:>9} Jan {r.randint(1, 31):>2} file_{r.randint(0, 10**6)}.txt\r\n"
        )
        out.append(line)
        size += len(line)
    return "".join(out)


def _tests(r: random.Random, n: int) -> str:
    out, size = [], 0
    while size < n:
        ok = r.random() < 0.9
        colour = "\x1b[32m" if ok else "\x1b[31m"
        name = f"tests/test_mod_{r.randint(0, 99)}.py::test_case_{r.randint(0, 999)}"
        verdict = f"{colour}{'PASSED' if ok else 'FAILED'}\x1b[0m"
        line = f"{name} {verdict} \x1b[38;5;{r.randint(16, 255)}m[{r.randint(0, 100):>3}%]\x1b[0m\r\n"
        out.append(line)
        size += len(line)
    return "".join(out)


def _editor(r: random.Random, n: int) -> str:
    out = ["\x1b[?1049h\x1b[H\x1b[2J"]
    size = 0
    while size < n:
        y, x = r.randint(1, ROWS), r.randint(1, COLS - 20)
        word = r.choice(["def ", "return ", "import ", "class "])
        chunk = f"\x1b[{y};{x}H\x1b[7m{word}\x1b[0m\x1b[K{r.randint(0, 10**6)}"
        out.append(chunk)
        size += len(chunk)
    out.append("\x1b[?1049l")
    return "".join(out)


def generate(path: Path, mb: float, minutes: float, seed: int = 7) -> int:
    """Writes the cast; returns its size in bytes."""
    r = random.Random(seed)
    total = int(mb * 1_000_000)
    duration = minutes * 60
    steps = max(1, int(duration // 30))
    per_step = total // steps
    with path.open("w", encoding="utf-8") as f:
        f.write(json.dumps({"version": 2, "width": COLS, "height": ROWS, "timestamp": 1700000000}) + "\n")
        t = 0.0

        def ev(code: str, data: str) -> None:
            f.write(json.dumps([round(t, 6), code, data], ensure_ascii=False) + "\n")

        for step in range(steps):
            t = step * 30.0 + 0.05
            ev("m", f"step {step}")
            command = r.choice(["ls -l /var/log", "pytest -v", "vim main.py", "make -j2", "cat data.csv"])
            for ch in command:  # the echo of typed keys: many tiny events
                t += 0.05
                ev("o", ch)
            t += 0.05
            ev("o", "\r\n")
            kind = r.random()
            body = (
                _editor(r, per_step)
                if kind < 0.15
                else _tests(r, per_step)
                if kind < 0.55
                else _plain(r, per_step)
            )
            burst_end = t + r.uniform(2, 20)
            chunks = [body[i : i + 4096] for i in range(0, len(body), 4096)]
            for i, chunk in enumerate(chunks):
                t_i = t + (burst_end - t) * i / max(1, len(chunks))
                f.write(json.dumps([round(t_i, 6), "o", chunk], ensure_ascii=False) + "\n")
            t = burst_end
            ev("o", "$ ")
    return path.stat().st_size


def read_screen(screen: Screen, rows: list[tuple[int, int]]) -> list[list[tuple[str, object]]]:
    """What a pane's repaint reads (``styled_runs`` row by row on emulators older than the batch call,
    so the same script measures the code before issue 31)."""
    many = getattr(screen, "styled_runs_many", None)
    if many is not None:
        return many(rows, 0, COLS)
    return [screen.styled_runs(y, 0, COLS, mark) for y, mark in rows]


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * 4096 / 1e6


def ms(xs: list[float]) -> str:
    xs = sorted(xs)
    p95 = xs[min(len(xs) - 1, int(len(xs) * 0.95))]
    return (
        f"median {statistics.median(xs) * 1000:.1f} ms, p95 {p95 * 1000:.1f} ms, max {xs[-1] * 1000:.1f} ms"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=20.0)
    ap.add_argument("--minutes", type=float, default=60.0)
    ap.add_argument("--seeks", type=int, default=200)
    ap.add_argument("--baseline", type=int, default=5, help="targets replayed from the start (slow)")
    ap.add_argument("--every", type=int, default=None, help="keyframe spacing in characters")
    args = ap.parse_args()
    print(f"python {platform.python_version()} on {platform.machine()}")

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "long.cast"
        size = generate(path, args.mb, args.minutes)
        read_screen(Screen(COLS, ROWS), [(0, -1)])  # the native set-up and numpy: not the cast's memory
        gc.collect()
        rss0 = rss_mb()
        t0 = time.perf_counter()
        cast = read_cast(path)
        t_read = time.perf_counter() - t0
        print(
            f"cast: {size / 1e6:.1f} MB, {len(cast.events):,} events, {len(cast.markers)} markers, "
            f"{cast.duration / 60:.0f} min; read_cast {t_read:.2f} s"
        )

        kwargs = {} if args.every is None else {"every": args.every}
        index = KeyframeIndex(cast, **kwargs)  # type: ignore[arg-type]
        t0 = time.perf_counter()
        index.build()
        t_build = time.perf_counter() - t0
        print(
            f"index: {len(index.keyframes)} keyframes (every {index.every:,} chars + every marker), "
            f"built in {t_build:.2f} s ({index.offsets[-1] / 1e6 / t_build:.1f} M chars/s)"
        )

        r = random.Random(1)
        player = Player(index)
        random_s = []
        for _ in range(args.seeks):
            target = r.uniform(0, index.duration)
            t0 = time.perf_counter()
            player.seek(target)
            random_s.append(time.perf_counter() - t0)
        print(f"random seek ({args.seeks}, keyframes): {ms(random_s)}")
        # The outliers above are CPython's full (gen 2) collections walking every keyframe's cells; the
        # Replay screen freezes the index once it is built (engine.review.replay.settle_gc), measured here.
        settle_gc()
        r = random.Random(1)
        frozen_s = []
        for _ in range(args.seeks):
            target = r.uniform(0, index.duration)
            t0 = time.perf_counter()
            player.seek(target)
            frozen_s.append(time.perf_counter() - t0)
        print(f"random seek ({args.seeks}, keyframes, after settle_gc): {ms(frozen_s)}")

        r = random.Random(2)
        everything = [(y, -1) for y in range(ROWS)]
        read_s = []
        for _ in range(args.seeks):
            target = r.uniform(0, index.duration)
            t0 = time.perf_counter()
            player.seek(target)
            runs = read_screen(player.screen, everything)
            read_s.append(time.perf_counter() - t0)
        assert len(runs) == ROWS
        print(
            f"random seek + read the visible screen ({ROWS} rows as styled runs, {args.seeks}): {ms(read_s)}"
        )

        marker_s = []
        player.seek(0)
        for _ in range(min(100, len(index.markers))):
            t0 = time.perf_counter()
            player.next_marker()
            marker_s.append(time.perf_counter() - t0)
        print(f"next marker ({len(marker_s)}): {ms(marker_s)}")

        skip_s = []
        player.seek(index.duration / 3)
        for _ in range(100):
            t0 = time.perf_counter()
            player.skip(5.0)
            skip_s.append(time.perf_counter() - t0)
        print(f"+5 s skip (100): {ms(skip_s)}")

        gc.collect()
        rss1 = rss_mb()
        print(
            f"memory: resident +{rss1 - rss0:.1f} MB for the cast read, indexed, seeked and painted "
            f"({(rss1 - rss0) / (size / 1e6):.2f}x the {size / 1e6:.1f} MB file); keyframes hold "
            f"{sum(len(k.snapshot.data) for k in index.keyframes) / 1e6:.1f} MB"
        )

        targets = [index.duration * (i + 0.5) / args.baseline for i in range(args.baseline)]
        base_s, kf_s = [], []
        for target in targets:
            t0 = time.perf_counter()
            reference = replay_from_start(cast, target)
            base_s.append(time.perf_counter() - t0)
            t0 = time.perf_counter()
            seeked = index.screen_at(target)
            kf_s.append(time.perf_counter() - t0)
            assert seeked.lines() == reference.lines() and seeked.cursor() == reference.cursor(), target
        print(
            f"same {args.baseline} targets (10%..90%): "
            f"replay from start mean {statistics.mean(base_s):.2f} s "
            f"(max {max(base_s):.2f} s); keyframe seek mean {statistics.mean(kf_s) * 1000:.1f} ms; "
            f"speed-up {statistics.mean(base_s) / statistics.mean(kf_s):.0f}x; screens identical"
        )


if __name__ == "__main__":
    main()
