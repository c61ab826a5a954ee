"""CPU while nothing happens: the TUI idle on every screen, and a standalone replay, paused.

Run: .venv/bin/python bench/bench_idle.py [--window 15] [--max-busy 120] [--workspace DIR] [--only app|replay]

Why: curators keep Bandpass open all day beside their other work, so an app nobody touches must cost
(next to) nothing; the goal is at most 0.5% of one core on every screen (issue 45). A 30 fps replay clock
that kept ticking while paused cost a paused replay 6-15% of a core; a poll of the store, Runs' hidden
progress bar and a blinking cursor about 1% more. Exit status 1 when a screen misses the goal.

How: the real program in a real terminal. ``bandpass demo -w DIR`` (a fresh demo workspace in a temporary
folder unless ``--workspace``: first use included) runs in a detached tmux session of its own (160x48,
its own tmux server socket), and the keys a curator would press are sent with ``tmux send-keys``. After
each key the bench waits until the expected screen is drawn (a text only that screen shows, read with
``capture-pane``), then until the process is quiet (a one-second sample under 2% of a core, for up to
``--max-busy`` seconds: the time before it is reported as "busy after opening", which is where
first-use work such as building an index shows up), then lets ``--settle`` seconds pass and measures the
process's user + system CPU time (``/proc/<pid>/stat``, all its threads) over ``--window`` seconds, as %
of one core. Nothing is pressed during a window. The same is done for a standalone ``bandpass replay
recordings/samples/…/agent.cast`` (no workspace: its keyframe index is built in memory), paused as it
opens. The resolution is the kernel's clock tick (10 ms): over a 15 s window one tick is 0.07%.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = Path(sys.executable)
GOAL = 0.5  # % of one core
SIZE = (160, 48)
TICK = os.sysconf("SC_CLK_TCK")
#: The sample cast the standalone replay opens: the longest agent recording among the samples.
SAMPLE_CAST = REPO / "recordings" / "samples" / "policy-context-truncated" / "agent.cast"


@dataclass
class Step:
    """One screen to idle on: the keys that bring it up from the previous step's screen, and a text
    only that screen shows (drawn means ready)."""

    name: str
    keys: list[str]
    marker: str


#: Every screen, in an order a curator could press it; each step starts on the previous step's screen.
STEPS = [
    Step("overview (0)", [], "How episodes ended"),
    Step("tasks (1)", ["1"], "d Detail a Audit task"),
    Step("runs (2)", ["2"], "n Start batch"),
    Step("generate (3)", ["3"], "n Start generation"),
    Step("generation (Enter on an attempt)", ["Enter"], "f Full tool results"),
    Step("settings (4)", ["Escape", "4"], "^s Save"),
    Step("calibration (5)", ["5"], "g Report h Models"),
    Step("tag queue (7)", ["7"], "n Next t Tag"),
    Step("episodes (8, from tasks)", ["1", "8"], "space Mark to compare"),
    Step("replay (6, from tasks), paused", ["Escape", "6"], "space Play"),
    Step("changes (d, over replay)", ["d"], "f Flagged only"),
    Step("tag dialog (t, over replay)", ["Escape", "t"], "1-9 class"),
    Step("search (ctrl+f)", ["Escape", "Escape", "C-f"], "/ Query esc Back"),
    Step("help (?, over tasks)", ["Escape", "?"], "Keys: Tasks"),
    Step("tasks, after visiting every screen", ["Escape"], "d Detail a Audit task"),
    Step("overview, after visiting every screen", ["0"], "How episodes ended"),
]


class Term:
    """A program in a detached tmux session on a private tmux server."""

    def __init__(self, name: str, command: list[str], cwd: Path, env: dict[str, str]) -> None:
        self.base = ["tmux", "-L", f"bench-idle-{os.getpid()}-{name}"]
        shell = " ".join(_quote(a) for a in command)
        subprocess.run(
            [*self.base, "-f", "/dev/null", "new-session", "-d", "-s", "b", "-x", str(SIZE[0]),
             "-y", str(SIZE[1]), "-c", str(cwd), f"exec env {_env_args(env)} {shell}"],
            check=True,
        )  # fmt: skip
        self.pid = int(self._tmux("display", "-p", "-t", "b", "#{pane_pid}").strip())

    def _tmux(self, *args: str) -> str:
        return subprocess.run([*self.base, *args], capture_output=True, text=True, check=True).stdout

    def text(self) -> str:
        return self._tmux("capture-pane", "-p", "-t", "b")

    def press(self, key: str) -> None:
        self._tmux("send-keys", "-t", "b", key)

    def wait_for(self, marker: str, timeout: float = 60.0) -> None:
        end = time.monotonic() + timeout
        while marker not in self.text():
            if not self.alive():
                raise SystemExit(f"the program exited before showing {marker!r}")
            if time.monotonic() > end:
                raise SystemExit(f"{marker!r} not on screen after {timeout:.0f} s:\n{self.text()}")
            time.sleep(0.2)

    def alive(self) -> bool:
        return Path(f"/proc/{self.pid}").exists()

    def close(self) -> None:
        subprocess.run([*self.base, "kill-server"], capture_output=True)


def _quote(arg: str) -> str:
    return "'" + arg.replace("'", "'\\''") + "'"


def _env_args(env: dict[str, str]) -> str:
    return " ".join(_quote(f"{k}={v}") for k, v in env.items())


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of the process, all its threads (fields 14 and 15 of /proc/PID/stat)."""
    stat = Path(f"/proc/{pid}/stat").read_text()
    fields = stat[stat.rindex(")") + 2 :].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def cpu_percent(pid: int, seconds: float) -> float:
    """% of one core the process used over the next ``seconds``."""
    c0, t0 = cpu_seconds(pid), time.monotonic()
    time.sleep(seconds)
    return (cpu_seconds(pid) - c0) / (time.monotonic() - t0) * 100


def quiet(pid: int, max_busy: float) -> float:
    """Seconds until a one-second sample that reads under 2% of a core begins (0: quiet at once), or
    ``max_busy`` when none does by then."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < max_busy:
        start = time.monotonic()
        if cpu_percent(pid, 1.0) < 2.0:
            return start - t0
    return max_busy


@dataclass
class Row:
    name: str
    busy_s: float
    percent: float


def idle_on(term: Term, step: Step, args: argparse.Namespace) -> Row:
    for key in step.keys:
        term.press(key)
        time.sleep(0.3)  # as a curator presses keys, one after another
    term.wait_for(step.marker)
    busy = quiet(term.pid, args.max_busy)
    time.sleep(args.settle)
    row = Row(step.name, busy, cpu_percent(term.pid, args.window))
    print(f"  {row.name:<40} busy {row.busy_s:5.1f} s   idle {row.percent:5.2f}% of a core", flush=True)
    return row


def run(args: argparse.Namespace, tmp: Path) -> list[Row]:
    env = {
        "TERM": "xterm-256color",
        "COLORTERM": "truecolor",
        "DOCKER_HOST": "unix:///nonexistent/docker.sock",  # nothing reaches Docker
        "PYTHONPATH": str(REPO),
    }
    rows: list[Row] = []
    only = set(args.only.split(",")) if args.only else set()
    if not only or "app" in only:
        root = args.workspace or tmp / "demo"
        print(f"bandpass demo -w {root}", flush=True)
        term = Term("app", [str(PYTHON), "-m", "bandpass.tui.cli", "demo", "-w", str(root)], REPO, env)
        try:
            for step in STEPS:
                rows.append(idle_on(term, step, args))
        finally:
            term.close()
    if not only or "replay" in only:
        cast = tmp / "bare" / SAMPLE_CAST.name  # a folder that is no workspace: nothing is saved
        cast.parent.mkdir()
        shutil.copy(SAMPLE_CAST, cast)
        print(f"bandpass replay {SAMPLE_CAST.relative_to(REPO)} (standalone, paused)", flush=True)
        term = Term("replay", [str(PYTHON), "-m", "bandpass.tui.cli", "replay", str(cast)], cast.parent, env)
        try:
            rows.append(idle_on(term, Step("standalone replay, paused", [], "space Play"), args))
        finally:
            term.close()
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--window", type=float, default=15.0, help="Seconds measured per screen.")
    ap.add_argument("--settle", type=float, default=2.0, help="Seconds let pass before each window.")
    ap.add_argument("--max-busy", type=float, default=120.0, help="Longest wait for the process to go quiet.")
    ap.add_argument("--workspace", type=Path, default=None, help="A demo workspace (default: a fresh one).")
    ap.add_argument("--only", default="", help="app, replay (comma-separated; default both).")
    args = ap.parse_args()
    if shutil.which("tmux") is None:
        raise SystemExit("bench_idle needs tmux (the app runs in a real terminal)")
    load = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="bench-idle-") as tmp:
        rows = run(args, Path(tmp))
    print()
    print(
        f"idle CPU, {args.window:g} s windows, {SIZE[0]}x{SIZE[1]}, load {load:.1f} → "
        f"{os.getloadavg()[0]:.1f}, {os.cpu_count()} CPUs; goal ≤ {GOAL}% of one core"
    )
    print()
    print("| screen | busy after opening (s) | idle (% of one core) |")
    print("|---|---:|---:|")
    for r in rows:
        print(f"| {r.name} | {r.busy_s:.1f} | {r.percent:.2f} |")
    worst = max(rows, key=lambda r: r.percent)
    verdict = "met" if worst.percent <= GOAL else "NOT met"
    print(f"\nworst: {worst.name} at {worst.percent:.2f}% — goal {verdict}")
    sys.exit(0 if worst.percent <= GOAL else 1)


if __name__ == "__main__":
    main()
