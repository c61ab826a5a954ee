"""Emulator ingest throughput: the chosen backend (engine.sandbox.emulator.Screen, libghostty-vt) against
pyte and bittty (the previous backend, kept as tests/support/bittty_reference.py), all in one run.

Run: .venv/bin/python bench/bench_emulator.py [--mb 2]
Both emulators get the same generated streams, in 4 KiB chunks (a pty read's size), in the same run, so
the ratio is meaningful even on a busy machine. Then non-ASCII streams (CJK text, box drawing, combining
marks and emoji, accented Latin) through ``Screen.feed`` against a thin wrapper over the same library
and terminal options (encode, ``ghostty_terminal_vt_write``: the floor any wrapper pays), feed alone and
feed with a read of every row every 8 chunks (a pane at ~25 fps). Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import platform
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pyte

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.sandbox.emulator import Screen
from tests.support.bittty_reference import BitttyScreen

COLS, ROWS = 120, 40
CHUNK = 4096


def plain(n: int) -> str:
    """``ls -l``-like lines: the bulk of what a shell agent produces."""
    r = random.Random(1)
    out, size = [], 0
    while size < n:
        line = (
            f"-rw-r--r-- 1 user group {r.randint(0, 10**7):>9} Jan {r.randint(1, 31):>2} "
            f"12:{r.randint(0, 59):02d} file_{r.randint(0, 10**6)}.txt\r\n"
        )
        out.append(line)
        size += len(line)
    return "".join(out)


def sgr(n: int) -> str:
    """Colourful output (test runners, ``ls --color``, compilers): 8/256/truecolour SGR every word."""
    r = random.Random(2)
    out, size = [], 0
    while size < n:
        parts = []
        for _ in range(8):
            k = r.random()
            if k < 0.3:
                c = f"\x1b[{r.choice([31, 32, 33, 34, 35, 36, 1, 4])}m"
            elif k < 0.6:
                c = f"\x1b[38;5;{r.randint(0, 255)}m"
            elif k < 0.8:
                c = f"\x1b[38;2;{r.randint(0, 255)};{r.randint(0, 255)};{r.randint(0, 255)}m"
            else:
                c = "\x1b[1;48;5;236m"
            parts.append(f"{c}word{r.randint(0, 999)}\x1b[0m ")
        line = "".join(parts) + "\r\n"
        out.append(line)
        size += len(line)
    return "".join(out)


def fullscreen(n: int) -> str:
    """A ``top``-like app on the alternate screen: absolute cursor moves, erase-line, reverse video."""
    r = random.Random(3)
    out, size = ["\x1b[?1049h\x1b[?25l\x1b[2J"], 0
    while size < n:
        frame = [f"\x1b[H\x1b[7m top - load average: {r.random():.2f} \x1b[K\x1b[0m"]
        for y in range(2, ROWS):
            frame.append(
                f"\x1b[{y};1H\x1b[{r.choice([0, 1, 32, 33])}m{r.randint(1, 99999):>6} root  20 0 "
                f"{r.randint(0, 10**6):>8} S {r.random() * 100:5.1f} proc{y}\x1b[K"
            )
        frame.append(f"\x1b[{ROWS};1H\x1b[2K:")
        f = "".join(frame)
        out.append(f)
        size += len(f)
    out.append("\x1b[?1049l\x1b[?25h")
    return "".join(out)


def cjk(n: int) -> str:
    r = random.Random(4)
    out, size = [], 0
    while size < n:
        line = "".join(chr(r.randint(0x4E00, 0x9FFF)) for _ in range(r.randint(5, 50))) + "\r\n"
        out.append(line)
        size += len(line)
    return "".join(out)


def boxes(n: int) -> str:
    """A ``tree``/``htop``-like listing: box drawing, bars, arrows."""
    r = random.Random(5)
    out, size = [], 0
    while size < n:
        depth = r.randint(0, 5)
        line = (
            "│   " * depth + r.choice("├└") + "── " + f"file_{r.randint(0, 999)}.py " + "█" * r.randint(0, 20)
        )
        out.append(line + " ▏→ ✓\r\n")
        size += len(line) + 8
    return "".join(out)


def marks(n: int) -> str:
    """Combining marks, ZWJ emoji sequences, skin-tone modifiers, variation selectors."""
    r = random.Random(6)
    pieces = ["e\u0301", "a\u0308\u0301", "n\u0303", "👍🏽", "👨\u200d👩\u200d👧", "❤\ufe0f", "ok ", "\r\n"]
    out, size = [], 0
    while size < n:
        p = r.choice(pieces)
        out.append(p)
        size += len(p)
    return "".join(out)


def latin(n: int) -> str:
    r = random.Random(7)
    words = ["café", "naïve", "über", "señor", "Ærø", "déjà", "vu", "ok", "façade"]
    out, size = [], 0
    while size < n:
        line = " ".join(r.choice(words) for _ in range(12)) + "\r\n"
        out.append(line)
        size += len(line)
    return "".join(out)


class ThinScreen:
    """The least a wrapper can do: the same terminal options, ``encode`` and one native write."""

    def __init__(self, cols: int, rows: int) -> None:
        from bandpass.engine.sandbox.ghostty import native

        self.ffi, self.lib = ffi, lib = native()
        t = ffi.new("GhosttyTerminal*")
        lib.ghostty_terminal_new(ffi.NULL, t, cols, rows)
        self.t = t[0]
        lib.ghostty_terminal_set(self.t, lib.GHOSTTY_TERMINAL_OPT_SCROLLBACK_MAX_BYTES, ffi.new("size_t*", 0))
        lib.ghostty_terminal_set(
            self.t, lib.GHOSTTY_TERMINAL_OPT_CONTINUATION_MAX_BYTES, ffi.new("size_t*", 65536)
        )

    def feed(self, data: str) -> None:
        raw = data.encode("utf-8", "surrogateescape")
        self.lib.ghostty_terminal_vt_write(self.t, raw, len(raw))

    def close(self) -> None:
        self.lib.ghostty_terminal_free(self.t)


def feed_thin(chunks: list[str]) -> None:
    screen = ThinScreen(COLS, ROWS)
    for c in chunks:
        screen.feed(c)
    screen.close()


def read_all(screen: Screen, rows: list[tuple[int, int]]) -> None:
    many = getattr(screen, "styled_runs_many", None)  # row by row on the code before issue 31
    if many is not None:
        many(rows, 0, COLS)
    else:
        for y, mark in rows:
            screen.styled_runs(y, 0, COLS, mark)


def feed_and_read(chunks: list[str]) -> None:
    screen = Screen(COLS, ROWS)
    everything = [(y, -1) for y in range(ROWS)]
    for i, c in enumerate(chunks):
        screen.feed(c)
        if i % 8 == 7:
            read_all(screen, everything)


def feed_pyte(chunks: list[str]) -> None:
    screen = pyte.Screen(COLS, ROWS)
    stream = pyte.Stream(screen)
    for c in chunks:
        stream.feed(c)


def feed_screen(chunks: list[str]) -> None:
    screen = Screen(COLS, ROWS)
    for c in chunks:
        screen.feed(c)


def feed_bittty(chunks: list[str]) -> None:
    screen = BitttyScreen(COLS, ROWS)
    for c in chunks:
        screen.feed(c)


def best_mbps(fn: Callable[[list[str]], None], chunks: list[str], nbytes: int, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn(chunks)
        times.append(time.perf_counter() - t)
    return nbytes / 1e6 / min(times)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mb", type=float, default=2.0, help="size of each stream in MB")
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    n = int(args.mb * 1e6)
    print(f"python {platform.python_version()}, {platform.machine()}, screen {COLS}x{ROWS}, chunks {CHUNK} B")
    print(
        f"{'stream':<12}{'pyte MB/s':>11}{'bittty MB/s':>13}{'ghostty MB/s':>14}"
        f"{'vs pyte':>9}{'vs bittty':>11}"
    )
    for name, gen in (("plain", plain), ("sgr", sgr), ("fullscreen", fullscreen)):
        data = gen(n)
        chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
        nbytes = len(data.encode())
        p = best_mbps(feed_pyte, chunks, nbytes, args.repeat)
        b = best_mbps(feed_bittty, chunks, nbytes, 1)
        g = best_mbps(feed_screen, chunks, nbytes, args.repeat)
        print(f"{name:<12}{p:>11.2f}{b:>13.2f}{g:>14.2f}{g / p:>8.0f}x{g / b:>10.0f}x")
    print(
        f"{'non-ASCII':<12}{'thin MB/s':>11}{'Screen MB/s':>13}{'ratio':>8}"
        f"{'  + read all rows every 8 chunks: Screen MB/s'}"
    )
    for name, gen in (("cjk", cjk), ("boxes", boxes), ("marks", marks), ("latin", latin)):
        data = gen(n // 2)
        chunks = [data[i : i + CHUNK] for i in range(0, len(data), CHUNK)]
        nbytes = len(data.encode())
        th = best_mbps(feed_thin, chunks, nbytes, args.repeat)
        g = best_mbps(feed_screen, chunks, nbytes, args.repeat)
        gr = best_mbps(feed_and_read, chunks, nbytes, args.repeat)
        print(f"{name:<12}{th:>11.2f}{g:>13.2f}{g / th:>7.2f}x{gr:>14.2f}")
    screen = Screen(COLS, ROWS)
    screen.feed(sgr(200_000))
    snaps, restores = [], []
    for _ in range(20):
        t = time.perf_counter()
        snap = screen.snapshot()
        snaps.append(time.perf_counter() - t)
        t = time.perf_counter()
        Screen.restore(snap)
        restores.append(time.perf_counter() - t)
    snap_ms, restore_ms = statistics.median(snaps) * 1000, statistics.median(restores) * 1000
    print(
        f"snapshot {snap_ms:.2f} ms ({len(snap.data)} bytes), restore {restore_ms:.2f} ms "
        f"(median of 20, {COLS}x{ROWS})"
    )
    batch_ms, single_ms = [], []
    everything = [(y, -1) for y in range(ROWS)]
    for _ in range(20):
        screen.feed(sgr(4096))
        t = time.perf_counter()
        read_all(screen, everything)  # what a pane's repaint does
        batch_ms.append(time.perf_counter() - t)
        screen.feed(sgr(4096))
        t = time.perf_counter()
        for y in range(ROWS):
            screen.styled_runs(y, 0, COLS)
        single_ms.append(time.perf_counter() - t)
    together, by_row = statistics.median(batch_ms) * 1000, statistics.median(single_ms) * 1000
    print(
        f"read all {ROWS} rows as styled runs after a 4 KiB SGR chunk: {together:.2f} ms "
        f"(together, as a repaint reads them); row by row {by_row:.2f} ms"
    )


if __name__ == "__main__":
    main()
