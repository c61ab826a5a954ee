"""The floor under an audit's cost (issue 43's "≤ 8 oracle-episode equivalents"): what the probes the
audit cannot do without cost by themselves, in oracle-episode equivalents, on real audits.

Run: .venv/bin/python bench/bench_audit_floor.py [--tasks access-log-report,configure-kv-service,...]
Needs a Docker engine. Hold the shared Docker lock around it.

Each task is audited once (``--reruns 3``, as ``bandpass audit``) on a fresh workspace, then its episodes
are read back (agent, outcome, seconds) and split as ``checks.cost`` counts them:

* ``cost``: every episode's seconds over ``U``, one passing oracle episode's (``checks.cost``).
* ``corpus``: the same without the harness probes (memory hog, fork bomb, sandbox kill), which run once
  per image setting and are then cached for every task of a corpus that shares it
  (engine/audit/probe_cache.py).
* ``least``: the least probe set that can say what an audit says — one passing oracle episode (``U``
  itself: 1.0), the cheaper nop episode, and each cheat of the catalogue once, with no rerun at all. Each
  cheat needs an episode of its own: it is root in its container and may change anything in it, and
  two cheats in one container can hide each other (a shadowed ``python3`` crashes the verifier that a
  written reward would have fooled), so no sharing keeps the verdict's "this cheat passed". A cheat's
  episode has an oracle episode's phases (setup, agent, capture, verify), so on a task whose oracle is
  quick it costs about one ``U`` itself.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.app import episode_hooks
from bandpass.engine.audit.task_audit import audit_version
from bandpass.engine.core import probes
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import CHEATS, SANDBOX_PROBES
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"
DEFAULT = "access-log-report,configure-kv-service,extract-error-codes,fix-catalog-makefile,fix-wordfreq"


def split(episodes: list[tuple[str, str, float]], unit: float) -> dict[str, Any]:
    """An audit's episodes (agent, outcome, seconds): cost, corpus cost, least probe set, over ``unit``."""
    harness = {p.name for p in SANDBOX_PROBES}
    cheats = {c.name for c in CHEATS}
    total = sum(s for _, _, s in episodes)
    corpus = sum(s for a, _, s in episodes if a not in harness)
    nop = min((s for a, _, s in episodes if a == probes.NOP), default=0.0)
    cheat_s = sum(s for a, _, s in episodes if a in cheats)
    return {
        "episodes": len(episodes),
        "cheats": sum(1 for a, _, _ in episodes if a in cheats),
        "cost_eq": round(total / unit, 2),
        "corpus_eq": round(corpus / unit, 2),
        "least_eq": round((unit + nop + cheat_s) / unit, 2),
        "cheats_eq": round(cheat_s / unit, 2),
    }


def main() -> None:
    episode_hooks.install()  # its episodes end as `bandpass audit`'s do
    ap = argparse.ArgumentParser()
    ap.add_argument("--tasks", default=DEFAULT)
    ap.add_argument("--reruns", type=int, default=3)
    args = ap.parse_args()
    rows = []
    for name in [t for t in args.tasks.split(",") if t]:
        with tempfile.TemporaryDirectory(prefix="bandpass-bench-floor-") as tmp:
            ws = Workspace.open(Path(tmp) / "ws")  # its own probe cache: the harness probes run here
            assert import_paths(ws, [EXAMPLES / name]).ok
            with session(ws.engine) as s:
                vid = queries.task_rows(s)[0].version_id
            report = audit_version(ws, vid, reruns=args.reruns)
            unit = (report.checks.get("cost") or {}).get("oracle_episode_seconds")
            if not unit:
                print(f"{name}: {report.verdict}, no passing oracle episode: no unit to measure by")
                continue
            with session(ws.engine) as s:
                eps = [
                    (e.agent, e.outcome, (e.ended_at - e.started_at).total_seconds())
                    for e in queries.episodes(s, batch_id=report.checks["batch"])
                    if e.started_at and e.ended_at
                ]
            rows.append(
                {"task": name, "verdict": report.verdict, "oracle_ms": round(unit * 1000)} | split(eps, unit)
            )
            print(rows[-1], flush=True)
    print()
    print(
        "| task | verdict | episodes | oracle episode | cost (eq.) | without harness probes (eq.) "
        "| the cheats alone (eq.) | least probe set (eq.) |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|")
    for r in rows:
        print(
            f"| {r['task']} | {r['verdict']} | {r['episodes']} | {r['oracle_ms']} ms | {r['cost_eq']} | "
            f"{r['corpus_eq']} | {r['cheats_eq']} ({r['cheats']} cheats) | {r['least_eq']} |"
        )


if __name__ == "__main__":
    main()
