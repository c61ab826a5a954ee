"""What a compose task's services cost an episode (issue 41): nop and oracle episodes of the token task
(tests/support/taskfactory.py ``make_compose_task``: a healthchecked HTTP sidecar built from the base
image) against the same episodes of a single-container task (``make_task``), interleaved in one process,
images built before timing; and the services' own ``up --wait`` and ``down`` alone.

Run: .venv/bin/python bench/bench_compose.py [N]
"""

from __future__ import annotations

import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bandpass.engine.app import episode_hooks
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import NopAgent, OracleAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox import services
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.images import build_service_images, build_task_image
from bandpass.engine.tasks.importer import import_paths
from bandpass.engine.tasks.taskdir import load_task
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.taskfactory import make_compose_task, make_task


def _median_ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:7.0f} ms"


def main(n: int = 5) -> None:
    episode_hooks.install()
    client = get_client()
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.open(Path(tmp) / "ws")
        plain = make_task(
            Path(tmp) / "src", "bench-plain", dockerfile="FROM bandpass/base:bookworm\nWORKDIR /app\n"
        )
        compose = make_compose_task(Path(tmp) / "src", "bench-compose")
        assert import_paths(ws, [plain, compose]).ok
        with session(ws.engine) as s:
            ids = {Path(r.source).name: r.version_id for r in queries.task_rows(s)}
        for name in ids:  # images built, nothing timed
            run_episode(ws, ids[name], NopAgent())
        times: dict[tuple[str, str], list[float]] = {}
        for _ in range(n):
            for name in ("bench-plain", "bench-compose"):
                for agent in (NopAgent, OracleAgent):
                    t = time.perf_counter()
                    res = run_episode(ws, ids[name], agent())
                    times.setdefault((name, agent.name), []).append(time.perf_counter() - t)
                    assert res.outcome == ("passed" if agent is OracleAgent else "failed"), res
        spec = load_task(compose)
        h = spec.version_hash()
        main_tag = build_task_image(client, spec.path, h).tag
        tags = build_service_images(client, spec, h).tags
        ups, downs = [], []
        for _ in range(n):
            project = services.Services(client, spec, tags, main_tag, services.project_name("bench"))
            t = time.perf_counter()
            project.up()
            ups.append(time.perf_counter() - t)
            t = time.perf_counter()
            project.down()
            downs.append(time.perf_counter() - t)
    client.close()
    for who in ("nop", "oracle"):
        p, c = times[("bench-plain", who)], times[("bench-compose", who)]
        print(
            f"{who:<6} episode  single container {_median_ms(p)}   with a sidecar {_median_ms(c)}"
            f"   ratio {statistics.median(c) / statistics.median(p):4.2f}x  (n={n})"
        )
    print(f"services up --wait (healthcheck every 1 s) {_median_ms(ups)}   down {_median_ms(downs)}  (n={n})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
