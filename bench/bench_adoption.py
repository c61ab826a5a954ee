"""What learning a version's footprint before its first rollout costs (issue #41 item 4).

Before the first rollout of a version no audit settled, the batch runs the audit's footprint check on it
(engine/audit/adoption.py): one oracle episode in the clean room, and only when that fails one in place
plus the minimisation's verifier runs. It happens once per version. This measures, in one process, per
task: the learning's wall time, and a ``--k``-episode oracle batch of the same version run right after
(the learning cached, so the batch pays nothing more), and prints the ratio of (learning + batch) to the
batch alone — what the first rollout of an unaudited version costs extra. Tasks: two sound examples
(their oracle passes in the clean room: one episode) and an install task whose verifier runs a command
the solution puts in /usr/local/bin (clean room fails, in place passes, the path is minimised and adopted).

Run: .venv/bin/python bench/bench_adoption.py [K]
"""

from __future__ import annotations

import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bandpass.engine.app import batches, episode_hooks
from bandpass.engine.audit.adoption import learn_before_rollout
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.sandbox import pool
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session

REPO = Path(__file__).resolve().parents[1]
EXAMPLES = REPO / "examples" / "tasks"
SOUND = ("access-log-report", "fix-wordfreq")
SUMCOL = "/usr/local/bin/sumcol"


def _install_task(root: Path) -> Path:
    """The tests' install task (tests/engine/audit/test_adoption.py), written here so the bench stands
    alone."""
    d = root / "install-sumcol"
    for sub in ("environment", "solution", "tests"):
        (d / sub).mkdir(parents=True)
    (d / "instruction.md").write_text(f"Install a command `sumcol N` at {SUMCOL}: the sum of column N.\n")
    (d / "task.toml").write_text(
        'version = "1.0"\n[metadata]\ndifficulty = "easy"\ncategory = "bench"\n'
        "[agent]\ntimeout_sec = 60\n[verifier]\ntimeout_sec = 30\n[environment]\nmemory_mb = 256\n"
    )
    (d / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\n")
    solve = (
        f"#!/bin/bash\ncat > {SUMCOL} <<'EOF'\n#!/bin/bash\n"
        "awk -v c=\"$1\" '{ s += $c } END { print s }'\nEOF\n"
        f"chmod +x {SUMCOL}\n"
    )
    test = (
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        "if [ \"$(printf '1 2\\n3 4\\n' | sumcol 2)\" = 6 ]\n"
        "then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    (d / "solution" / "solve.sh").write_text(solve)
    (d / "tests" / "test.sh").write_text(test)
    for p in (d / "solution" / "solve.sh", d / "tests" / "test.sh"):
        p.chmod(0o755)
    return d


def main(k: int = 4) -> None:
    episode_hooks.install()
    tmp = Path(tempfile.mkdtemp(prefix="bench-adoption-"))
    try:
        ws = Workspace.open(tmp / "ws")
        dirs = [EXAMPLES / name for name in SOUND] + [_install_task(tmp / "src")]
        assert import_paths(ws, dirs).ok
        with session(ws.engine) as s:
            rows = {r.name: r.version_id for r in queries.task_rows(s)}
        print(f"k = {k} oracle episodes per batch, concurrency 2; one version at a time")
        print(f"{'task':<20} {'learning s':>10} {'batch s':>8} {'ratio':>6}  learnt")
        ratios = []
        for name, vid in rows.items():
            started = time.monotonic()
            (learnt,) = learn_before_rollout(ws, [vid], workers=1)
            learning = time.monotonic() - started
            planned = batches.start_batch(
                ws, batches.StartBatch(name="oracle", kind="builtin", version_ids=[vid], k=k)
            )
            started = time.monotonic()
            summary = batches.run_batch(ws, planned.batch_id, batches.RunOptions(concurrency=2))
            batch = time.monotonic() - started
            ratio = (learning + batch) / batch
            ratios.append(ratio)
            what = f"adopted {', '.join(learnt.adopted)}" if learnt.adopted else learnt.mode
            print(
                f"{name:<20} {learning:>10.1f} {batch:>8.1f} {ratio:>6.2f}  {what} "
                f"(batch: {summary.passed}/{summary.total} passed)"
            )
        print(f"median ratio (learning + first batch) / batch: {statistics.median(ratios):.2f}")
    finally:
        pool.drain()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 4)
