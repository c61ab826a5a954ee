"""End-state capture overhead: what reading the policy's changes (and checking them with the tamper guard)
adds to an episode, on the example tasks' oracle end states. Budget: 150 ms per episode.

For each sound example: one oracle episode (builds the image; its phase timings are printed), then N
fresh containers of the image in which ``solution/solve.sh`` is run, each captured with the layer reader
(the default beside a local engine), the engine reader (any daemon) and checked by the guard.

Run: .venv/bin/python bench/bench_capture.py [N]
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
from bandpass.engine.run import guard
from bandpass.engine.run.agents.builtin import OracleAgent
from bandpass.engine.run.endstate import capture
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox.container import Sandbox, SandboxSpec
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "tasks"
SOUND = ("access-log-report", "configure-kv-service", "fix-catalog-makefile", "fix-wordfreq")


def _ms(xs: list[float]) -> str:
    return f"{statistics.median(xs) * 1000:6.1f} ms (max {max(xs) * 1000:6.1f})"


def main(n: int = 5) -> None:
    episode_hooks.install()  # its episodes end as `bandpass run`'s do: diagnosed, indexed
    client = get_client()
    totals: dict[str, list[float]] = {"layer": [], "engine": [], "guard": []}
    with tempfile.TemporaryDirectory() as tmp:
        ws = Workspace.open(Path(tmp) / "ws")
        import_paths(ws, [EXAMPLES / name for name in SOUND])
        with session(ws.engine) as s:
            rows = {r.name: r for r in queries.task_rows(s)}
        for name in SOUND:
            row = rows[name]
            res = run_episode(ws, row.version_id, OracleAgent())
            assert res.outcome == "passed", (name, res.outcome, res.detail)
            phases = {p["name"]: p["duration_s"] for p in res.phases}
            solve = (EXAMPLES / name / "solution" / "solve.sh").read_text()
            image = res.image
            times: dict[str, list[float]] = {"layer": [], "engine": [], "guard": []}
            changes = files = 0
            for i in range(n):
                with Sandbox(client, SandboxSpec(image=image, labels={"bandpass.bench": "capture"})) as sb:
                    code, out = sb.exec(["bash", "-c", solve], workdir="/app")
                    assert code == 0, out
                    for reader in ("layer", "engine"):
                        t = time.perf_counter()
                        state = capture(
                            client, sb.container, Path(tmp) / f"{name}-{i}-{reader}.tar", reader=reader
                        )
                        times[reader].append(time.perf_counter() - t)
                    t = time.perf_counter()
                    findings = guard.check(
                        state.changes, exists_in_image=state.exists_in_image, contents=state.contents
                    )
                    times["guard"].append(time.perf_counter() - t)
                    assert not guard.tripped(findings), findings
                    changes = len(state.changes)
                    files = sum(1 for c in state.changes if c.type == "file")
            for k in totals:
                totals[k].extend(times[k])
            print(
                f"{name:<22} {changes:3d} changes ({files} files)  layer {_ms(times['layer'])}  "
                f"engine {_ms(times['engine'])}  guard {_ms(times['guard'])}  "
                f"| episode phases: capture {phases['capture'] * 1000:.0f} ms,"
                f" verify {phases['verify'] * 1000:.0f} ms"
            )
    client.close()
    added = [a + g for a, g in zip(totals["layer"], totals["guard"], strict=True)]
    added_engine = [a + g for a, g in zip(totals["engine"], totals["guard"], strict=True)]
    print(f"added per episode, layer reader + guard   median {_ms(added)}  (n={len(added)}; budget 150 ms)")
    print(f"added per episode, engine reader + guard  median {_ms(added_engine)}  (n={len(added_engine)})")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 5)
