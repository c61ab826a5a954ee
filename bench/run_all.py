"""Runs every ``bench/bench_*.py`` that exists, one after another, and collects their output.

Run: .venv/bin/python bench/run_all.py [--only scale,seek] [--skip panes] [--out bench/results.md]
     [-- extra args passed to every bench]

Why sequential: the figures are ratios against a baseline measured in the same run, and two benches
sharing two cores would each measure the other. Each bench runs in its own process (a crash or a hang
costs only that bench: ``--timeout`` per bench), its stdout and stderr are kept verbatim, and the report
starts with the machine they ran on, so figures pasted into BENCHMARKS.md carry their context.
Exit status: 0 when every bench exited 0, else 1 (the report still lists all of them).
"""

from __future__ import annotations

import argparse
import os
import platform
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

BENCH = Path(__file__).resolve().parent
REPO = BENCH.parent


def machine() -> str:
    """One line naming the machine: CPU model and count, memory, Python, Docker, load."""
    cpu = platform.processor() or platform.machine()
    with_mem = ""
    try:
        for ln in Path("/proc/cpuinfo").read_text().splitlines():
            if ln.startswith("model name"):
                cpu = ln.split(":", 1)[1].strip()
                break
        for ln in Path("/proc/meminfo").read_text().splitlines():
            if ln.startswith("MemTotal"):
                with_mem = f" · {int(ln.split()[1]) / 1024 / 1024:.0f} GiB RAM"
                break
    except OSError:
        pass
    docker = ""
    try:
        out = subprocess.run(
            ["docker", "version", "--format", "{{.Server.Version}}"],
            capture_output=True,
            text=True,
            timeout=10,
        )
        docker = f" · Docker {out.stdout.strip()}" if out.returncode == 0 else " · Docker unavailable"
    except (OSError, subprocess.TimeoutExpired):
        docker = " · Docker unavailable"
    return (
        f"{cpu} × {os.cpu_count()}{with_mem} · {platform.system()} {platform.release()} · "
        f"Python {platform.python_version()}{docker} · load {os.getloadavg()[0]:.1f}"
    )


def discover(only: set[str], skip: set[str]) -> list[Path]:
    found = sorted(BENCH.glob("bench_*.py"))
    name = lambda p: p.stem.removeprefix("bench_")  # noqa: E731 - a one-line helper
    return [p for p in found if (not only or name(p) in only) and name(p) not in skip]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", default="", help="comma-separated bench names (scale,seek,...)")
    ap.add_argument("--skip", default="", help="comma-separated bench names to leave out")
    ap.add_argument("--timeout", type=float, default=1800, help="seconds per bench before it is killed")
    ap.add_argument("--out", type=Path, default=None, help="also write the report (Markdown) here")
    ap.add_argument("extra", nargs="*", help="after --: arguments for every bench")
    args = ap.parse_args()
    benches = discover(set(filter(None, args.only.split(","))), set(filter(None, args.skip.split(","))))
    header = f"# bench/run_all.py · {datetime.now(UTC):%Y-%m-%d %H:%M} UTC\n\nMachine: {machine()}\n"
    report = [header]
    print(header, flush=True)
    failed = []
    for path in benches:
        cmd = [sys.executable, str(path), *args.extra]
        print(f"## {path.name}\n", flush=True)
        t0 = time.monotonic()
        try:
            res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=args.timeout)
            out, rc = (
                res.stdout + (f"\n[stderr]\n{res.stderr}" if res.returncode and res.stderr else ""),
                res.returncode,
            )
        except subprocess.TimeoutExpired as exc:
            out = (exc.stdout or b"").decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
            rc = -1
            out += f"\n[killed after {args.timeout:.0f}s]"
        wall = time.monotonic() - t0
        status = "ok" if rc == 0 else f"FAILED (exit {rc})"
        if rc != 0:
            failed.append(path.name)
        section = f"## {path.name} — {status}, {wall:.0f}s\n\n```\n{out.rstrip()}\n```\n"
        report.append(section)
        print(out.rstrip(), f"\n[{path.name}: {status}, {wall:.0f}s]\n", flush=True)
    summary = f"{len(benches) - len(failed)}/{len(benches)} benches ok" + (
        f"; failed: {', '.join(failed)}" if failed else ""
    )
    report.append(summary + "\n")
    print(summary, flush=True)
    if args.out:
        args.out.write_text("\n".join(report), encoding="utf-8")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
