"""Audits a handful of public tasks for real (Docker) and prints each verdict with its reasons, for the
table in bench/BENCHMARKS.md ("is it right by reading the task" is a person's judgement, written there).

    /work/bin/heavy .venv/bin/python bench/world_audit_sample.py [ROOT] [--reruns 1] [--workspace DIR]

ROOT (default ``/work/world/tasks``) holds the public repositories. Nothing can be pulled here, so the
workspace's ``[images.aliases]`` maps the public base images to local ones: ``ubuntu:24.04`` to the offline
``bandpass/base:bookworm``, and the ``python:*-slim`` images to ``bandpass-world/python:3-slim`` — the
same base plus ``PIP_BREAK_SYSTEM_PACKAGES=1``, built here once, so a Dockerfile's ``pip install`` of what
the base already has succeeds as it would on the real image (anything else cannot be fetched: the build
then fails for the environment, and the audit says it could not audit the task).
"""

from __future__ import annotations

import argparse
import io
import json
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bandpass.engine.audit.task_audit import audit_version  # noqa: E402 - imported after the sys.path set-up above
from bandpass.engine.core.workspace import Workspace  # noqa: E402 - imported after the sys.path set-up above
from bandpass.engine.sandbox.docker_engine import get_client  # noqa: E402 - imported after the sys.path set-up above
from bandpass.engine.tasks.images import BASE_TAG  # noqa: E402 - imported after the sys.path set-up above
from bandpass.engine.tasks.importer import import_one  # noqa: E402 - imported after the sys.path set-up above
from bandpass.store import queries  # noqa: E402 - imported after the sys.path set-up above
from bandpass.store.db import session  # noqa: E402 - imported after the sys.path set-up above

PY_ALIAS = "bandpass-world/python:3-slim"
SAMPLE = (
    "purple29th-tbench-2/laser-weld-keyhole-channel-porosity",
    "purple29th-tbench-2/aero-composite-delam-subvoxel-area",
    "purple29th-tbench-2/hello-world",
    "terminal-bench-datasets/datasets/livecodebenchpro/lcbpro-1983a",
    "terminal-bench-datasets/datasets/swebench-verified/astropy__astropy-12907",
    "Terminal-Bench-DS-Tasks/New Tasks/001. tasks-distributed-ledger-audit",
    "Terminal-Bench-DS-Tasks/laude-institute terminal-bench main tasks-pandas-sql-query",
    "harbor-shipped/init/task-steps",
    "harbor-shipped/init/task-default",
)


def python_alias() -> str:
    client = get_client()
    try:
        client.images.get(PY_ALIAS)
    except Exception:  # noqa: BLE001 - build it once
        dockerfile = f"FROM {BASE_TAG}\nENV PIP_BREAK_SYSTEM_PACKAGES=1\n"
        client.images.build(fileobj=io.BytesIO(dockerfile.encode()), tag=PY_ALIAS, rm=True)
    return PY_ALIAS


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("root", nargs="?", default="/work/world/tasks")
    ap.add_argument("--reruns", type=int, default=1)
    ap.add_argument("--workspace", type=Path)
    ap.add_argument("--json", type=Path, help="write every report here")
    args = ap.parse_args()
    root = Path(args.root)
    ws_root = args.workspace or Path(tempfile.mkdtemp(prefix="bandpass-world-audit-"))
    ws_root.mkdir(parents=True, exist_ok=True)
    alias = python_alias()
    aliases = {f"python:{v}": alias for v in ("3.11-slim", "3.12-slim", "3.13-slim", "3.12", "3.11")}
    (ws_root / "bandpass.toml").write_text(
        "[images.aliases]\n" + "".join(f'"{k}" = "{v}"\n' for k, v in aliases.items())
    )
    ws = Workspace.open(ws_root)
    reports = []
    print(f"workspace {ws_root}")
    for rel in SAMPLE:
        src = root / rel
        item = import_one(ws, src)
        if item.status not in ("new", "new_version", "unchanged"):
            print(f"{rel}: not imported: {item.problems}")
            continue
        with session(ws.engine) as s:
            version = queries.version_by_hash(s, item.version_hash)
            assert version is not None and version.id is not None
            vid = version.id
        started = time.monotonic()
        rep = audit_version(ws, vid, reruns=args.reruns)
        took = time.monotonic() - started
        reports.append({"task": rel, **rep.as_dict()})
        print(f"\n{rel}\n  {rep.verdict}  {', '.join(rep.reasons) or '-'}  ({took:.0f} s)")
        for f in rep.checks.get("findings", []):
            first = str(f["detail"]).splitlines()[0] if f["detail"] else ""
            print(f"    {f['code']}: {first[:240]}")
        eps = rep.checks.get("episodes") or {}
        for name in ("oracle", "nop"):
            if name in eps:
                print(f"    {name}: " + ", ".join(f"{e['outcome']} {e['reward']}" for e in eps[name]))
    if args.json:
        args.json.write_text(json.dumps(reports, indent=1, default=str))
    return 0


if __name__ == "__main__":
    sys.exit(main())
