"""The paths a task's own files name: what its instruction asks the agent to produce or fix, and what its
tests read from the agent's image. Shared by the audit's checks and the cheat probe that edits verifier
inputs (``engine/run/agents/builtin.py``), which sit in different layers.
"""

from __future__ import annotations

import re

from .taskdir import TaskSpec, task_files

__all__ = ["PATH_RE", "instruction_paths", "verifier_inputs"]

#: Absolute paths an instruction names (under the usual task roots).
PATH_RE = re.compile(r"(?<![\w.])(/(?:app|tmp|srv|opt|var|home|root|etc|data|output|workspace)[\w./-]*\w)")
#: Where a task keeps its own files in the agent's image (not the system, not /tests or /logs).
_TASK_ROOTS = ("/app/", "/srv/", "/opt/", "/var/", "/home/", "/root/", "/data/", "/output/", "/workspace/")
_ABS_PATH = re.compile(r"(?<![\w.$/-])(/[A-Za-z_][\w.-]*(?:/[\w.-]+)+)")


def instruction_paths(spec: TaskSpec) -> list[str]:
    return sorted(set(PATH_RE.findall(spec.instruction)))


def verifier_inputs(spec: TaskSpec) -> list[str]:
    """Absolute paths the tests read that the instruction does not name (neither an output the agent
    writes nor a file it is told to fix): if the agent's image holds one, the agent can change what the
    verifier reads, or runs."""
    named = instruction_paths(spec)
    roots = [spec.path / "tests", *(spec.path / "steps" / n / "tests" for n in spec.steps)]
    found: set[str] = set()
    for p in task_files(spec.path):
        if not any(r in p.parents for r in roots):
            continue
        try:
            text = p.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError):
            continue
        for path in _ABS_PATH.findall(text):
            if not path.startswith(_TASK_ROOTS) or path.endswith("/"):
                continue
            if any(
                path == n or path.startswith(n.rstrip("/") + "/") or n.startswith(path + "/") for n in named
            ):
                continue
            found.add(path)
    return sorted(found)
