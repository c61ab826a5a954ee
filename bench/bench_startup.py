"""Start-up cost: the CLI's cold start and the terminal emulator's native set-up.

Run: .venv/bin/python bench/bench_startup.py [--runs 10] [--workspace DIR]

* ``bandpass --help``, ``bandpass episodes`` and ``bandpass show ID`` as a curator runs them (a new
  process each time, wall clock from spawn to exit; min and median of ``--runs``), against a baseline in
  the same run: a bare ``python -c pass`` (the interpreter's own start) and ``python -c "import typer"``.
  Each command also reports whether it loaded libghostty-vt (it must not: none of them shows a screen).
  The workspace is built once with one finished episode (``tests/support/replay_data.make_episode``) unless
  ``--workspace`` names one.
* The emulator's native set-up, each in a fresh process: loading the pre-parsed declarations and the
  library and making the first 160x40 screen (``engine.sandbox.ghostty``), against what the code before
  issue 31 paid: ``import pyghostty._ffi`` (an 80 KB cdef parsed by pycparser) and the first screen.

Prints figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

LOADED = (
    "import sys; g = sys.modules.get('bandpass.engine.sandbox.ghostty'); "
    "sys.stderr.write('LOADED' if (g and g.is_loaded()) or 'pyghostty._ffi' in sys.modules else 'CLEAN')"
)
CLI = (
    "import sys\n"
    "sys.argv = ['bandpass', *sys.argv[1:]]\n"
    "from bandpass.tui.cli import main\n"
    "try:\n"
    "    main()\n"
    "finally:\n"
    f"    {LOADED}\n"
)


def wall(cmd: list[str], runs: int) -> tuple[float, float, str]:
    """(min, median) seconds of ``runs`` fresh processes, and the last one's stderr."""
    times, err = [], ""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    for _ in range(runs):
        t0 = time.perf_counter()
        res = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
        times.append(time.perf_counter() - t0)
        err = res.stderr
    return min(times), statistics.median(times), err


def line(name: str, fig: tuple[float, float, str], extra: str = "") -> None:
    lo, med, _ = fig
    print(f"{name:<44} min {lo * 1000:6.0f} ms   median {med * 1000:6.0f} ms   {extra}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--runs", type=int, default=10)
    ap.add_argument("--workspace", type=Path, default=None)
    args = ap.parse_args()
    py = sys.executable
    with tempfile.TemporaryDirectory() as tmp:
        ws_root = args.workspace
        eid = "1"
        if ws_root is None:
            from bandpass.engine.core.workspace import Workspace
            from tests.support.replay_data import make_episode

            ws = Workspace.open(Path(tmp) / "ws")
            eid = str(make_episode(ws))
            ws_root = ws.root
        print(f"python {sys.version.split()[0]}, {args.runs} runs each, load {os.getloadavg()[0]:.1f}")
        line("python -c pass (baseline)", wall([py, "-c", "pass"], args.runs))
        line("python -c 'import typer' (baseline)", wall([py, "-c", "import typer"], args.runs))
        for name, argv in (
            ("bandpass --help", ["--help"]),
            ("bandpass episodes", ["--workspace", str(ws_root), "episodes"]),
            (f"bandpass show {eid}", ["--workspace", str(ws_root), "show", eid]),
        ):
            fig = wall([py, "-c", CLI, *argv], args.runs)
            loaded = "loads libghostty-vt" if fig[2].endswith("LOADED") else "libghostty-vt not loaded"
            line(name, fig, loaded)
        first_screen = "s = Screen(160, 40); s.feed('x'); s.lines()"
        ours = wall(
            [py, "-c", f"from bandpass.engine.sandbox.emulator import Screen; {first_screen}"],
            args.runs,
        )
        bare = wall([py, "-c", "import numpy"], args.runs)
        old = wall(
            [py, "-c", "import pyghostty._ffi; import pyghostty; t = pyghostty.Terminal(160, 40)"], args.runs
        )
        line("first Screen (pre-parsed declarations)", ours, "includes numpy")
        line("  numpy import alone", bare)
        line("import pyghostty._ffi + first Terminal (before)", old)
        t0 = time.perf_counter()
        from bandpass.engine.sandbox.ghostty import native

        native()
        print(f"in-process: engine.sandbox.ghostty.native() {1000 * (time.perf_counter() - t0):.1f} ms")


if __name__ == "__main__":
    main()
