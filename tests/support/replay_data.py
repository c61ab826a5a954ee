"""Builders for replay and tagging tests: casts with exact times, and episodes with steps and casts."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from sqlalchemy import text

from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk

PYTEST_FAIL = """============================= test session starts ==============================
collected 3 items

tests/test_outputs.py .F.                                                [100%]

=========================== short test summary info ============================
FAILED tests/test_outputs.py::{test} - AssertionError: expected 42
========================= 1 failed, 2 passed in 0.12s ==========================
"""


def write_cast(
    path: Path,
    events: list[tuple[float, str, str]],
    *,
    cols: int = 40,
    rows: int = 8,
    version: int = 2,
    header: dict[str, Any] | None = None,
    cut_last: bool = False,
) -> Path:
    """A cast with exactly these absolute event times (v3: written as intervals)."""
    if version == 2:
        head: dict[str, Any] = {"version": 2, "width": cols, "height": rows, "timestamp": 1700000000}
    else:
        head = {"version": 3, "term": {"cols": cols, "rows": rows, "type": "xterm-256color"}}
    head.update(header or {})
    lines = [json.dumps(head)]
    prev = 0.0
    for t, code, data in events:
        stamp = t if version == 2 else round(t - prev, 6)
        prev = t
        lines.append(json.dumps([stamp, code, data]))
    text = "\n".join(lines) + "\n"
    if cut_last:
        text = text.rstrip("\n")
        text = text[: len(text) - max(3, len(lines[-1]) // 2)]
    path.write_text(text, encoding="utf-8")
    return path


def agent_events(steps: int = 3) -> list[tuple[float, str, str]]:
    """A shell session: a prompt, then per step a marker, the typed command's echo and its output."""
    ev: list[tuple[float, str, str]] = [(0.1, "o", "$ ")]
    t = 1.0
    for i in range(steps):
        ev.append((t, "m", f"step {i}"))
        ev.append((t + 0.2, "o", f"echo step{i}\r\n"))
        ev.append((t + 0.5, "o", f"output of step {i}\r\n$ "))
        t += 10.0  # 10 s apart: long idle gaps to exercise the idle limit
    return ev


def make_episode(
    ws: Workspace,
    *,
    task: str = "fix-it",
    outcome: str = "failed",
    test: str = "test_answer",
    steps: int = 3,
    agent: str = "m1",
    with_casts: bool = True,
) -> int:
    """One finished episode with agent and verifier casts, steps and a pytest-like verifier output."""
    with session(ws.engine) as s:
        t, _ = q.get_or_create_task(s, task)
        tv = q.version_by_hash(s, (task * 64)[:64]) or q.add_task_version(
            s, t, version_hash=(task * 64)[:64], path=f"tasks/{task}", instruction="do it"
        )
        ep = q.create_episode(s, pk(tv), agent)
        eid = pk(ep)
    rec = ws.recordings_dir / f"episode-{eid}"
    rec.mkdir(parents=True, exist_ok=True)
    agent_cast = verifier_cast = ""
    if with_casts:
        write_cast(rec / "agent.cast", agent_events(steps))
        write_cast(rec / "verifier.cast", [(0.1, "o", "running tests\r\n"), (0.5, "o", "1 failed\r\n")])
        agent_cast, verifier_cast = ws.rel(rec / "agent.cast"), ws.rel(rec / "verifier.cast")
    with session(ws.engine) as s:
        for i in range(steps):
            q.add_step(
                s,
                eid,
                i,
                marker_time=1.0 + 10.0 * i,
                action={
                    "analysis": f"analysis of step {i}",
                    "plan": f"plan {i}",
                    "commands": [{"keystrokes": f"echo step{i}\n", "duration": 1.0}],
                    "task_complete": False,
                },
                observation=f"observation given at step {i}",
                prompt_tokens=100 + i,
                completion_tokens=20 + i,
                latency_s=1.5,
                raw_reply="{}",
            )
        q.finish_episode(
            s,
            eid,
            outcome=outcome,
            reward=0.0 if outcome == "failed" else None,
            agent_cast=agent_cast,
            verifier_cast=verifier_cast,
            verifier_output=PYTEST_FAIL.format(test=test) if outcome == "failed" else "",
        )
    return eid


def make_loop_episode(ws: Workspace, task: str = "loopy") -> int:
    """A turn_limit episode whose three steps type the same `ls` at an unchanged screen."""
    eid = make_episode(ws, task=task, outcome="agent_error:turn_limit")
    action = json.dumps({"commands": [{"keystrokes": "ls\n", "duration": 1}]})
    with session(ws.engine) as s:
        s.connection().execute(
            text("UPDATE step SET action_json = :a, observation = '$ ls\n$ ' WHERE episode_id = :e"),
            {"a": action, "e": eid},
        )
    return eid
