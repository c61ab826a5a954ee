"""Episode overhead: a whole nop episode (container, agent terminal, verifier terminal, reward, removal,
database rows, two recordings) against the floor, ``docker run --rm IMAGE true``, in the same run.

Run: .venv/bin/python bench/bench_episode.py [N]
"""

from __future__ import annotations

import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bandpass.engine.app import episode_hooks
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import NopAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.taskfactory import make_task


def main(n: int = 15) -> None:
    episode_hooks.install()  # its episodes end as `bandpass run`'s do: diagnosed, indexed
    client = get_client()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.open(Path(tmp) / "ws")
        import_paths(ws, [make_task(Path(tmp), "bench-nop")])
        with session(ws.engine) as s:
            (row,) = queries.task_rows(s)
        first = run_episode(ws, row.version_id, NopAgent())  # builds the image once (not timed)
        image = f"bandpass-task/bench-nop:{row.version_hash[:16]}"
        assert first.outcome == "failed", first

        docker_times, episode_times = [], []
        for _ in range(n):
            t = time.perf_counter()
            subprocess.run(["docker", "run", "--rm", "--network", "none", image, "true"], check=True)
            docker_times.append(time.perf_counter() - t)
            t = time.perf_counter()
            res = run_episode(ws, row.version_id, NopAgent())
            episode_times.append(time.perf_counter() - t)
            assert res.outcome == "failed"
    client.close()
    d, e = statistics.median(docker_times), statistics.median(episode_times)
    print(f"docker run --rm IMAGE true   median {d * 1000:7.0f} ms  (n={n})")
    print(f"nop episode (full)           median {e * 1000:7.0f} ms  (n={n})")
    print(f"ratio episode / docker run   {e / d:5.2f}x")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 15)
