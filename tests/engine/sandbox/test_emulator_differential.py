"""The native core (libghostty-vt) against the bittty emulator it replaced, cell for cell.

Why: the screen is the policy's observation and the curator's evidence; switching emulators must not
change what either sees. bittty stays a test-only dependency for exactly this comparison
(tests/support/bittty_reference.py is the old backend, verbatim). Compared: every cell's text, colours (16,
256, true colour) and attributes, the cursor, and the alternate-screen flag — on every committed sample
recording at every step marker, on the benchmark corpora, and on focused cases (alternate screen, wide
and combining characters, scroll regions, cursor movement, erasing, wrapping, resize).
"""

from __future__ import annotations

import sys
from dataclasses import astuple
from pathlib import Path

import pytest

from bandpass.engine.review.replay import apply_events
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.sandbox.emulator import Screen
from tests.support.bittty_reference import BitttyScreen
from tests.support.paths import REPO as ROOT

sys.path.insert(0, str(ROOT / "bench"))
from bench_emulator import fullscreen, plain, sgr

# Slow (every sample recording against bittty): the full suite runs it, `scripts/test --fast` does not.
pytestmark = pytest.mark.slow

SAMPLES = sorted((ROOT / "recordings" / "samples").glob("*/*.cast"))


def differences(a: Screen, b: BitttyScreen) -> list[str]:
    """Human-readable differences: up to five cells, then cursor and alternate screen."""
    out = []
    for y, (ra, rb) in enumerate(zip(a.styled_rows(), b.styled_rows(), strict=True)):
        for x, (p, q) in enumerate(zip(ra, rb, strict=True)):
            if astuple(p) != astuple(q):
                out.append(f"cell ({x},{y}): ghostty {p} != bittty {q}")
    if a.cursor() != b.cursor():
        out.append(f"cursor: ghostty {a.cursor()} != bittty {b.cursor()}")
    if a.alternate_screen != b.alternate_screen:
        out.append("alternate screen flag differs")
    return out[:5] + out[-2:] if len(out) > 7 else out


def test_the_samples_exist() -> None:
    assert len(SAMPLES) >= 10


@pytest.mark.parametrize("path", SAMPLES, ids=lambda p: f"{p.parent.name}/{p.name}")
def test_every_sample_recording_at_every_marker(path: Path) -> None:
    cast = read_cast(path)
    a, b = Screen(cast.cols, cast.rows), BitttyScreen(cast.cols, cast.rows)
    events, done, checked = cast.events, 0, 0
    for i, ev in enumerate(events):
        if ev.code == "m" or i == len(events) - 1:
            apply_events(a, events, done, i + 1)
            apply_events(b, events, done, i + 1)  # type: ignore[arg-type]
            done = i + 1
            assert differences(a, b) == [], f"{path.name} after event {i}"
            checked += 1
    assert checked >= 1 and a.text().strip()


@pytest.mark.parametrize("gen", [plain, sgr, fullscreen], ids=lambda g: g.__name__)
def test_bench_corpora_in_pty_sized_chunks(gen) -> None:  # type: ignore[no-untyped-def]
    data = gen(120_000)
    a, b = Screen(120, 40), BitttyScreen(120, 40)
    for n, i in enumerate(range(0, len(data), 4096)):
        a.feed(data[i : i + 4096])
        b.feed(data[i : i + 4096])
        if n % 6 == 0:
            assert differences(a, b) == [], f"{gen.__name__} at byte {i}"
    assert differences(a, b) == []


CASES: dict[str, tuple[str, ...]] = {
    "alternate_screen": ("$ vim\r\n\x1b[?1049h\x1b[2J\x1b[HEDIT\x1b[5;5Hx", "\x1b[?1049l"),
    "wide": ("日本語テキスト\r\nab日本cd\r\n" + "x" * 19 + "日",),
    "combining": ("e\u0301a\u0308\u0301 n\u0303\r\nq\u20dd",),
    "colour_16": tuple(
        f"\x1b[{c}mX\x1b[0m" for c in [*range(30, 38), *range(40, 48), *range(90, 98), *range(100, 108)]
    ),
    "colour_256": tuple(f"\x1b[38;5;{c};48;5;{255 - c}mX" for c in range(0, 256, 7)),
    "true_colour": tuple(f"\x1b[38;2;{c};{255 - c};7m\x1b[48;2;1;{c};3mX" for c in range(0, 256, 17)),
    "attributes": ("\x1b[1mb\x1b[3mi\x1b[4mu\x1b[7mr\x1b[22mn\x1b[23;24;27mz\x1b[0m",),
    "scroll_region": (
        "".join(f"line{i}\r\n" for i in range(12)),
        "\x1b[3;6r\x1b[6;1H\r\nA\r\nB\x1b[4;1H\x1b[2L\x1b[M\x1b[r\x1b[H\x1b[2S\x1b[T",
    ),
    "cursor_movement": (
        "\x1b[5;10Hx\x1b[2Ay\x1b[3Cz\x1b[10D\x1b[Bw\x1b7\x1b[1;1Ha\x1b8b\x1b[Gc\x1b[20Gd\x1b[3dq\tT\x1b[Zk\bK",
    ),
    "erase_insert_delete": (
        "".join(f"{i}" * 20 + "\r\n" for i in range(8)),
        "\x1b[3;5H\x1b[K\x1b[4;5H\x1b[1K\x1b[5;1H\x1b[2K\x1b[6;3H\x1b[3X\x1b[7;3H\x1b[2P\x1b[8;3H\x1b[2@",
    ),
    "autowrap": ("x" * 45 + "\x1b[?7l" + "y" * 45 + "\x1b[?7h",),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_focused_cases(name: str) -> None:
    a, b = Screen(20, 10), BitttyScreen(20, 10)
    for part in CASES[name]:
        a.feed(part)
        b.feed(part)
        assert differences(a, b) == [], name


@pytest.mark.parametrize("size", [(30, 12), (10, 5), (20, 10), (40, 4)])
def test_resize_reflows_alike(size: tuple[int, int]) -> None:
    a, b = Screen(20, 10), BitttyScreen(20, 10)
    for s in (a, b):
        s.feed("".join(f"row{i} " for i in range(30)) + "\r\nprompt$ ")
        s.resize(*size)
    assert (a.cols, a.rows) == size
    assert differences(a, b) == []
