"""Builds calibration test databases: real Harbor task directories in the workspace plus rows inserted
through ``store.queries``, so calibration, report and export tests read what the importer and the
rollout runner would have written."""

from __future__ import annotations

import shutil
from collections.abc import Sequence
from pathlib import Path

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.tasks.taskdir import version_hash
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk

TASK_TOML = """version = "1.0"

[metadata]
difficulty = "{difficulty}"
category = "{category}"
tags = ["calibration-test"]

[agent]
timeout_sec = 120.0

[verifier]
timeout_sec = 60.0

[environment]
cpus = 1
memory_mb = 1024
network_mode = "no-network"
"""


def instruction_for(name: str, category: str = "cli") -> str:
    return (
        f"Create the file /app/{name}.txt containing the word {name}. Then run the {name} checker "
        f"and fix every {name} warning it prints about {category}.\n"
    )


def write_task_dir(
    dest: Path, name: str, instruction: str, *, category: str = "cli", difficulty: str = "medium"
) -> Path:
    (dest / "environment").mkdir(parents=True, exist_ok=True)
    (dest / "solution").mkdir(exist_ok=True)
    (dest / "tests").mkdir(exist_ok=True)
    (dest / "instruction.md").write_text(instruction)
    (dest / "task.toml").write_text(TASK_TOML.format(category=category, difficulty=difficulty))
    (dest / "environment" / "Dockerfile").write_text("FROM ubuntu:24.04\nWORKDIR /app\n")
    solve = dest / "solution" / "solve.sh"
    solve.write_text(f"#!/bin/bash\necho {name} > /app/{name}.txt\n")
    solve.chmod(0o755)
    test = dest / "tests" / "test.sh"
    test.write_text(
        f"#!/bin/bash\nif grep -q {name} /app/{name}.txt; then echo 1; else echo 0; fi"
        " > /logs/verifier/reward.txt\n"
    )
    test.chmod(0o755)
    return dest


def add_task(
    ws: Workspace,
    name: str,
    *,
    instruction: str | None = None,
    category: str = "cli",
    difficulty: str = "medium",
    audit: str | None = "accepted",
) -> tuple[int, str]:
    """A task version stored like the importer stores it (``tasks/<name>/<hash12>``); returns (id, hash)."""
    instruction = instruction if instruction is not None else instruction_for(name, category)
    staging = ws.root / ".staging" / name
    if staging.exists():
        shutil.rmtree(staging)
    write_task_dir(staging, name, instruction, category=category, difficulty=difficulty)
    h = version_hash(staging)
    dest = ws.tasks_dir / name / h[:12]
    dest.parent.mkdir(parents=True, exist_ok=True)
    shutil.move(str(staging), dest)
    with session(ws.engine) as s:
        task, _ = q.get_or_create_task(s, name, source_path=str(dest))
        tv = q.add_task_version(
            s,
            task,
            version_hash=h,
            path=ws.rel(dest),
            instruction=instruction,
            category=category,
            difficulty=difficulty,
            tags=["calibration-test"],
        )
        if audit is not None:
            q.record_audit(s, pk(tv), verdict=audit, reasons=[], details={})
        return pk(tv), h


def add_episodes(
    ws: Workspace, version_id: int, model: str, outcomes: Sequence[str], rewards: Sequence[float | None] = ()
) -> list[int]:
    """Finished episodes; reward defaults to 1.0 for passed, 0.0 for failed, None for errors."""
    ids = []
    with session(ws.engine) as s:
        for i, outcome in enumerate(outcomes):
            ep = q.create_episode(s, version_id, model, attempt=i)
            reward = rewards[i] if i < len(rewards) else {"passed": 1.0, "failed": 0.0}.get(outcome)
            q.finish_episode(s, pk(ep), outcome=outcome, reward=reward)
            ids.append(pk(ep))
    return ids


def outcomes(passed: int = 0, failed: int = 0, **codes: int) -> list[str]:
    """``outcomes(2, 1, infra_error__oom=3, agent_error__turn_limit=1)`` -> a list of outcome strings."""
    out = ["passed"] * passed + ["failed"] * failed
    for key, n in codes.items():
        kind, code = key.split("__", 1)
        out += [f"{kind}:{code}"] * n
    return out
