"""Are the red-team probes real? Each probe of tests/engine/run/test_redteam.py with each of its four
verifiers, run the way a verifier ran before the clean room — in the container the policy just controlled, by
plain ``docker exec``, no guard, no clean start — printing which verifiers each probe fools (reward 1 for a
wrong answer). The matrix's "0 forged" means something only for the probes that forge here.

Probes that hang or end the container instead of forging (the FIFOs, the loop, ``kill -KILL -1``, the
workdir replaced) are left out: their failure mode is a hang or an excused infra error, which the matrix
checks directly.

The probes that make the policy's own code hostile (``CODE_PROBES``) are run a second way: through
Bandpass itself, in a clean room, with the verifier's wrapper and pytest observer switched off
(``BANDPASS_VERIFIER_OBSERVER=0``: the verifier as it ran before them), the reward files read as they
were read before (``reward.json`` first, whoever wrote it): "forges" means that reading pays 1.

Run: .venv/bin/python bench/bench_redteam_raw.py [--code-only]
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.engine.run import test_redteam as rt
from tests.support.taskfactory import make_task

NOT_FORGING = {
    *rt.CODE_PROBES,  # run through Bandpass with the defences off instead (code_probes below)
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
        _run(cid, "cat > /tests/test_import.py", rt.TEST_IMPORT_PY)
        _run(cid, "bash /tests/test.sh")
        return _run(cid, "cat /logs/verifier/reward.txt").stdout.decode().strip() or "-"
    finally:
        subprocess.run(["docker", "rm", "-f", cid], capture_output=True)


def code_probes() -> None:
    """Each code probe on each verifier, through Bandpass in a clean room without the wrapper and observer."""
    import tempfile

    from bandpass.engine.core.workspace import Workspace
    from bandpass.engine.run.episode import run_episode
    from bandpass.engine.run.verifier import OBSERVER_ENV
    from bandpass.engine.tasks import rewards
    from bandpass.engine.tasks.importer import import_paths
    from bandpass.store import queries
    from bandpass.store.db import session

    os.environ[OBSERVER_ENV] = "0"
    flavours = list(rt.VERIFIERS)
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.open(Path(tmp) / "ws")
        for flavour, test in rt.VERIFIERS.items():
            d = make_task(
                Path(tmp) / "src",
                f"raw-{flavour}",
                instruction="Write /app/answer.sh, a bash script that prints 42.",
                solve=rt.SOLVE,
                test=test,
                verifier_timeout=rt.VERIFIER_TIMEOUT,
            )
            (d / "tests" / "test_answer.py").write_text(rt.TEST_PY)
            (d / "tests" / "test_import.py").write_text(rt.TEST_IMPORT_PY)
        assert import_paths(ws, [Path(tmp) / "src"]).ok
        with session(ws.engine) as s:
            vids = {r.name: r.version_id for r in queries.task_rows(s)}
        print(
            f"\nthe policy's code made hostile, Bandpass without the wrapper and observer (load "
            f"{os.getloadavg()[0]:.1f}); P = passed (forged)"
        )
        print(f"{'probe':20} " + " ".join(f"{f:>14}" for f in flavours))
        forged = 0
        for name, commands in rt.CODE_PROBES.items():
            row = []
            for f in flavours:
                r = run_episode(ws, vids[f"raw-{f}"], rt.Keys(name, commands), max_infra_retries=0)
                # read as before: reward.json first, no question which files the tests write
                files = (r.verifier_evidence or {}).get("files") or {}
                before = rewards.harbor_scalar(
                    rewards.read(
                        files["reward.json"].encode() if "reward.json" in files else None,
                        files["reward.txt"].encode() if "reward.txt" in files else None,
                    )
                )
                paid = r.outcome == "passed" or (before or 0.0) >= 1.0
                row.append("P" if paid else r.outcome.split(":")[-1][:14])
            forged += row.count("P")
            print(f"{name:20} " + " ".join(f"{c:>14}" for c in row), flush=True)
        print(f"forged without the defences: {forged} of {len(flavours) * len(rt.CODE_PROBES)}")


def main() -> None:
    if "--code-only" in sys.argv:
        code_probes()
        return
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
    code_probes()


if __name__ == "__main__":
    main()
