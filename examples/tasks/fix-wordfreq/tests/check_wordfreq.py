"""Run the agent's wordfreq.py on unseen inputs and compare with an independent reference."""

import re
import subprocess
import sys
from collections import Counter
from pathlib import Path

SCRIPT = "/app/wordfreq.py"
INPUTS = sorted(Path("/tests/inputs").glob("*.txt"))


def reference(text: str, n: int) -> str:
    counts = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", text))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:n]
    return "".join(f"{w}\t{c}\n" for w, c in ranked)


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["python3", SCRIPT, *args], capture_output=True, text=True, timeout=20, check=False
    )


def main() -> int:
    failures = 0
    for path in INPUTS:
        text = path.read_text(encoding="utf-8")
        for n in (None, 1, 3, 7, 50):
            args = [str(path)] if n is None else [str(path), str(n)]
            proc = run(*args)
            want = reference(text, 10 if n is None else n)
            if proc.returncode != 0 or proc.stdout != want:
                failures += 1
                print(f"FAIL: {path.name} N={n}: exit {proc.returncode}")
                print(f"  expected {want[:200]!r}\n  got      {proc.stdout[:200]!r}")
    for bad in ("0", "-3", "three", "2.5"):
        proc = run(str(INPUTS[0]), bad)
        if proc.returncode != 2 or proc.stdout or not proc.stderr.strip():
            failures += 1
            print(f"FAIL: N={bad!r} should exit 2 with a usage message on stderr only; "
                  f"got exit {proc.returncode}, stdout {proc.stdout[:80]!r}")
    print("PASS" if failures == 0 else f"{failures} check(s) failed")
    return 0 if failures == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
