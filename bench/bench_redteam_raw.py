"""Are the red-team probes real? Each probe of tests/engine/run/test_redteam.py with each of its four
verifiers, run the way a verifier ran before the clean room — in the container the policy just controlled, by
plain ``docker exec``, no guard, no clean start — printing which verifiers each probe fools (reward 1 for a
wrong answer). The matrix's "0 forged" means something only for the probes that forge here.

Probes that hang or end the container instead of forging (the FIFOs, the loop, ``kill -KILL -1``, the
workdir replaced) are left out: their failure mode is a hang or an excused infra error, which the matrix
checks directly.

Run: .venv/bin/python bench/bench_redteam_raw.py
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.engine.run import test_redteam as rt

NOT_FORGING = {
    "kill_sandbox",
    "loop_forever",
    "fifo_output",
    "workdir_file",
    "terminfo_fifo",
    "dev_null_fifo",
}
IMAGE = "bandpass/base:bookworm"


def _run(cid: str, script: str, stdin: str | None = None) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run(
        ["docker", "exec", "-i", cid, "bash", "-c", script],
        input=stdin.encode() if stdin is not None else None,
        capture_output=True,
        timeout=120,
    )


def reward(commands: list[str], test_sh: str) -> str:
    cid = (
        subprocess.check_output(
            [
                "docker",
                "run",
                "-d",
                "--label",
                "bandpass=1",
                "--network",
                "none",
                "-w",
                "/app",
                IMAGE,
                "sleep",
                "300",
            ]
        )
        .decode()
        .strip()
    )
    try:
        _run(cid, "mkdir -p /app /tests /logs/verifier\n" + "\n".join(commands) + "\n")
        _run(cid, "cat > /tests/test.sh", test_sh)
        _run(cid, "cat > /tests/test_answer.py", rt.TEST_PY)
        _run(cid, "bash /tests/test.sh")
        return _run(cid, "cat /logs/verifier/reward.txt").stdout.decode().strip() or "-"
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)


def main() -> None:
    print(f"load {os.getloadavg()[0]:.1f}; 1 = the verifier passed a wrong answer")
    flavours = list(rt.VERIFIERS)
    print(f"{'probe':20} " + " ".join(f"{f:>12}" for f in flavours))
    forged = 0
    for name, commands in rt.PROBES.items():
        if name in NOT_FORGING:
            continue
        row = [reward(commands, rt.VERIFIERS[f]) for f in flavours]
        forged += row.count("1")
        print(f"{name:20} " + " ".join(f"{r:>12}" for r in row), flush=True)
    print(f"forged without defences: {forged} of {len(flavours) * (len(rt.PROBES) - len(NOT_FORGING))}")


if __name__ == "__main__":
    main()
