"""Tasks audited per hour: sequential vs concurrent (local) vs Ray, on the examples and a generated corpus.

Run: .venv/bin/python bench/bench_audit_scale.py [--corpus 50] [--sample 4] [--concurrency 2]
     [--modes seq,concurrent,ray] [--source examples|corpus|compose|both] [--reruns 3] [--json OUT]
Needs a Docker engine (and the ``cluster`` extra for ``ray``). Hold the shared Docker lock around it.

* The corpus is generated deterministically, no model needed: ``--corpus`` variants of the eight examples
  (``<example>-NN``), each with its own task version (a marker line in the instruction), so each builds,
  settles and is audited as a task of its own.
* ``compose``: ``--sample`` service tasks (``tests/support/taskfactory.py`` ``make_compose_task``: the answer
  only a healthchecked HTTP sidecar knows), each its own version. Their episodes mostly wait (``compose up
  --wait`` on the sidecar's healthcheck, ~2 s of a ~3.4 s episode) rather than compute: the case where the
  CPUs and Docker are not what an audit waits on.
* Each mode audits the same ``--sample`` tasks of a source on a fresh workspace (its own probe cache: the
  harness probes run once per mode), images built beforehand so no mode pays another's builds:
  ``seq`` is ``LocalAuditExecutor(1)`` (what ``bandpass audit`` did before), ``concurrent``
  ``LocalAuditExecutor(--concurrency)``, ``ray`` ``RayAuditExecutor`` on a two-raylet cluster this script
  starts (``ray start``, one CPU per raylet, killed by process group at the end) — on one machine that
  shows the mechanism and its overhead, not a cluster's scaling.
* Printed per mode: tasks/hour (sample / wall), the ratio to ``seq``, the per-phase seconds summed over
  the sample, the mean oracle-episode equivalents per task (episode seconds / one oracle episode's) and
  the episodes per task; and the load average before and after each mode.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.app import episode_hooks
from bandpass.engine.audit.corpus import plan_audits, run_audits, run_reports
from bandpass.engine.audit.executors import AuditExecutor, LocalAuditExecutor, RayAuditExecutor
from bandpass.engine.audit.phases import PHASES
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.episode import ensure_image, ensure_service_images
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.importer import import_paths
from bandpass.engine.tasks.taskdir import load_task
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.taskfactory import make_compose_task

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"


def generate_corpus(dest: Path, n: int) -> list[Path]:
    """``n`` task dirs: variants of the examples, round robin, each a distinct task version."""
    examples = sorted(p for p in EXAMPLES.iterdir() if (p / "task.toml").is_file())
    out = []
    for i in range(n):
        src = examples[i % len(examples)]
        d = dest / f"{src.name}-{i // len(examples):02d}"
        shutil.copytree(src, d)
        with (d / "instruction.md").open("a", encoding="utf-8") as f:
            f.write(f"\n<!-- corpus variant {i} -->\n")
        out.append(d)
    return out


def _load() -> str:
    return " ".join(f"{x:.1f}" for x in os.getloadavg())


def _workspace(root: Path, tasks: list[Path]) -> tuple[Workspace, list[int]]:
    ws = Workspace.open(root)
    assert import_paths(ws, tasks).ok
    with session(ws.engine) as s:
        rows = {r.name: r.version_id for r in queries.task_rows(s)}
    return ws, [rows[t.name] for t in tasks]


def _prebuild(ws: Workspace, vids: list[int]) -> None:
    client = get_client()
    for vid in vids:
        with session(ws.engine) as s:
            version = queries.get_version(s, vid)
        assert version is not None
        spec = load_task(ws.abs(version.path))
        ensure_image(ws, client, version, spec, None)
        if spec.compose is not None:
            assert ensure_service_images(ws, client, version, spec, None).failure() is None


@contextlib.contextmanager
def two_raylets() -> Iterator[str]:
    """A head and one more raylet on this machine (one CPU each), killed by process group at the end."""
    ray_bin = str(Path(sys.executable).with_name("ray"))
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    temp = tempfile.mkdtemp(prefix="bp-bench-ray-")
    token = Path(temp) / "auth_token"
    token.write_text(secrets.token_hex(32))
    env = {**os.environ, "RAY_USAGE_STATS_ENABLED": "0", "RAY_AUTH_MODE": "token"}
    env["RAY_AUTH_TOKEN_PATH"] = str(token)
    os.environ.update(RAY_AUTH_MODE="token", RAY_AUTH_TOKEN_PATH=str(token), RAY_USAGE_STATS_ENABLED="0")
    common = ["--num-cpus", "1", "--block", "--disable-usage-stats", "--node-ip-address", "127.0.0.1"]
    head = [
        ray_bin,
        "start",
        "--head",
        "--port",
        str(port),
        "--temp-dir",
        temp,
        "--include-dashboard",
        "false",
    ]
    procs = [
        subprocess.Popen(
            [*head, *common],
            env=env,
            start_new_session=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
    ]
    address = f"127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 180
        while True:
            with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1):
                break
            if time.monotonic() > deadline:
                raise RuntimeError("the Ray head did not start")
            time.sleep(0.5)
        procs.append(
            subprocess.Popen(
                [ray_bin, "start", "--address", address, *common],
                env=env,
                start_new_session=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        )
        import ray

        ray.init(address=address, log_to_driver=False, logging_level="warning")
        deadline = time.monotonic() + 240
        while len([n for n in ray.nodes() if n["Alive"]]) < 2:
            if time.monotonic() > deadline:
                raise RuntimeError("the second raylet did not join")
            time.sleep(0.5)
        yield address
    finally:
        with contextlib.suppress(Exception):
            import ray

            ray.shutdown()
        for p in reversed(procs):
            with contextlib.suppress(ProcessLookupError):
                os.killpg(p.pid, signal.SIGKILL)
            p.wait(30)
        shutil.rmtree(temp, ignore_errors=True)


def run_mode(
    name: str, executor: AuditExecutor, tasks: list[Path], root: Path, reruns: int
) -> dict[str, Any]:
    ws, vids = _workspace(root, tasks)
    _prebuild(ws, vids)
    load_before = _load()
    run = plan_audits(ws, vids, reruns=reruns)
    t0 = time.monotonic()
    sm = run_audits(ws, run, executor=executor)
    wall = time.monotonic() - t0
    reports = run_reports(ws, run)
    phases = {
        p: round(sum((r["checks"].get("phases") or {}).get(p, 0.0) for r in reports), 1) for p in PHASES
    }
    oee = [
        r["checks"]["cost"]["oracle_equivalents"]
        for r in reports
        if (r["checks"].get("cost") or {}).get("oracle_equivalents")
    ]
    eps = [r["checks"]["cost"]["episodes"] for r in reports if r["checks"].get("cost")]
    return {
        "mode": name,
        "tasks": sm.ran,
        "wall_s": round(wall, 1),
        "tasks_per_hour": round(3600.0 * sm.ran / wall, 1),
        "phases_s": phases,
        "oracle_equivalents_per_task": round(sum(oee) / len(oee), 2) if oee else None,
        "oracle_equivalents_median": sorted(oee)[len(oee) // 2] if oee else None,
        "episodes_per_task": round(sum(eps) / len(eps), 1) if eps else None,
        "verdicts": {r["task"]: r["verdict"] for r in reports},
        "nodes": sorted({r.get("node") or "" for r in reports}),
        "load": f"{load_before} -> {_load()}",
    }


def _table(source: str, rows: list[dict[str, Any]]) -> str:
    seq = next((r["tasks_per_hour"] for r in rows if r["mode"] == "seq"), None)
    out = [
        f"#### {source}",
        "",
        "| mode | tasks | wall (s) | tasks/hour | vs seq | oracle-ep. eq./task (mean, median) "
        "| episodes/task | " + " | ".join(f"{p} (s)" for p in PHASES) + " | load |",
        "|---|---:|---:|---:|---:|---:|---:|" + "---:|" * len(PHASES) + "---|",
    ]
    for r in rows:
        ratio = f"{r['tasks_per_hour'] / seq:.2f}x" if seq else "—"
        out.append(
            f"| {r['mode']} | {r['tasks']} | {r['wall_s']} | {r['tasks_per_hour']} | {ratio} | "
            f"{r['oracle_equivalents_per_task']}, {r['oracle_equivalents_median']} | "
            f"{r['episodes_per_task']} | "
            + " | ".join(str(r["phases_s"][p]) for p in PHASES)
            + f" | {r['load']} |"
        )
    return "\n".join(out)


def main() -> None:
    episode_hooks.install()  # its episodes end as `bandpass audit`'s do
    ap = argparse.ArgumentParser()
    ap.add_argument("--corpus", type=int, default=50)
    ap.add_argument("--sample", type=int, default=4)
    ap.add_argument("--concurrency", type=int, default=2)
    ap.add_argument("--reruns", type=int, default=3)
    ap.add_argument("--modes", default="seq,concurrent,ray")
    ap.add_argument("--source", default="both", choices=("examples", "corpus", "compose", "both"))
    ap.add_argument("--json", default="")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    print(f"# bench_audit_scale: sample {args.sample}, concurrency {args.concurrency}, reruns {args.reruns}")
    print(f"{os.cpu_count()} cpu · load {_load()}", flush=True)
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="bandpass-bench-audit-") as tmp:
        sources: dict[str, list[Path]] = {}
        if args.source in ("examples", "both"):
            sources["examples"] = sorted(p for p in EXAMPLES.iterdir() if (p / "task.toml").is_file())
        if args.source in ("corpus", "both"):
            t0 = time.monotonic()
            corpus = generate_corpus(Path(tmp) / "corpus", args.corpus)
            probe_ws, _ = _workspace(Path(tmp) / "corpus-ws", corpus)  # the whole corpus imports
            print(f"corpus: {len(corpus)} tasks generated and imported in {time.monotonic() - t0:.1f}s")
            # the sample: spread over the corpus (every k-th), so it mixes examples and variants
            step = max(1, len(corpus) // max(1, args.sample))
            sources[f"generated corpus ({args.corpus} tasks)"] = corpus[::step][: args.sample]
        if args.source == "compose":
            (Path(tmp) / "compose").mkdir()
            sources["service tasks (compose)"] = []
            for i in range(args.sample):
                d = make_compose_task(Path(tmp) / "compose", f"service-task-{i:02d}")
                with (d / "instruction.md").open("a", encoding="utf-8") as f:
                    f.write(f"\n<!-- variant {i} -->\n")  # each its own version
                sources["service tasks (compose)"].append(d)
        for source, tasks in sources.items():
            sample = tasks[: args.sample]
            rows = []
            ray_ctx = two_raylets() if "ray" in modes else contextlib.nullcontext("")
            for mode in modes:
                root = Path(tmp) / f"{source[:8].strip()}-{mode}"
                if mode == "seq":
                    rows.append(run_mode(mode, LocalAuditExecutor(1), sample, root, args.reruns))
                elif mode == "concurrent":
                    rows.append(
                        run_mode(mode, LocalAuditExecutor(args.concurrency), sample, root, args.reruns)
                    )
                elif mode == "ray":
                    with ray_ctx as address:
                        rows.append(
                            run_mode(mode, RayAuditExecutor(address=address), sample, root, args.reruns)
                        )
                print(json.dumps(rows[-1]), flush=True)
            results[source] = rows
            print(_table(source, rows), flush=True)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
