"""The audit's checks that read the task's files: they run *before* the image is built, so a leaked answer is
reported even when the build then fails, and a task Bandpass cannot run is said so without spending
minutes on containers.

- **Unsupported** (``infra.unsupported_task``): a separate verifier image, a compose service asking for
  what this machine does not give (privileges, the Docker socket, a Windows platform) — the import recorded
  them; no verdict about the task is possible here.
- **No oracle** (``invalidity.oracle_fails``: there is none to pass), an empty instruction
  (``invalidity.underspecified_instruction``).
- **Leaks into the agent's image** (``invalidity.solution_leak``): only what the Dockerfile's *final* stage
  takes from the build context reaches the image the agent works in. A builder stage that copies
  ``tests/generate_data.py`` to produce data leaks nothing (the false alarm this replaces flagged any
  ``COPY tests/`` line); a final-stage ``COPY tests/``, ``COPY .`` over a context holding the tests, or a
  context file identical to the solution or to an expected-output file of the tests leaks the answer.
- **The oracle reading the verifier's files** (``invalidity.oracle_fails``): ``solve.sh`` that opens
  ``/tests/…`` or a file only ``tests/`` ships proves nothing about solvability.

After the build, :func:`coverage_check` asks which outputs the instruction names that no test checks —
without the false alarms on starter files the instruction names (they are in the build context, whatever
path the Dockerfile copies them to) or on outputs the tests build from a pattern (``OUT / f"{x}.json"``:
their folder is checked).
"""

from __future__ import annotations

import fnmatch
import hashlib
import re
from pathlib import Path, PurePosixPath
from typing import Protocol

from ..core.plural import listed
from ..tasks import dockerfile as dockerfile_reader
from ..tasks.task_paths import PATH_RE, instruction_paths, verifier_inputs
from ..tasks.taskdir import TaskSpec, task_files
from .verdict import UNSUPPORTED

__all__ = [
    "PATH_RE",
    "before_build",
    "coverage_check",
    "instruction_paths",
    "verifier_inputs",
]

#: Test files whose name says they hold the answer the verifier compares against.
_EXPECTED_NAME = re.compile(r"expected|answer|golden|gold|reference|truth|correct|solution|oracle", re.I)
#: Files smaller than this are too generic to fingerprint (an empty list, "ok\n").
_MIN_FINGERPRINT = 40


class Report(Protocol):
    def add(self, code: str, detail: str) -> None: ...


def _rel(spec: TaskSpec, p: Path) -> str:
    return p.relative_to(spec.path).as_posix()


def _files_under(spec: TaskSpec, folder: str) -> list[Path]:
    root = spec.path / folder
    return [p for p in task_files(spec.path) if root in p.parents]


def _final_context_files(spec: TaskSpec) -> dict[str, tuple[str, str]]:
    """Build-context files (relative to environment/) the final stage copies: the line that does, and the
    path the file lands at when the line says it exactly ("" otherwise)."""
    df = spec.dockerfile
    if df is None:
        return {}
    env = spec.environment_dir
    ctx = [p.relative_to(env).as_posix() for p in task_files(env)] if env.is_dir() else []
    text = df.read_text(encoding="utf-8", errors="replace")
    stages = dockerfile_reader.stages(text)
    final_runs = [(i.line, i.args) for i in stages[-1].instructions if i.keyword == "RUN"] if stages else []
    out: dict[str, tuple[str, str]] = {}
    for c in dockerfile_reader.copies(text):
        if not c.final or c.from_ref is not None:
            continue
        if _removed_later(c.dest, c.line, final_runs):
            continue  # copied to generate something, then deleted: not in the image the agent gets
        for src in c.sources:
            pat = src
            while pat.startswith("./") or pat.startswith("/"):
                pat = pat[2:] if pat.startswith("./") else pat[1:]
            pat = pat.rstrip("/")
            for rel in ctx:
                exact = rel == pat
                if (
                    pat in ("", ".", "*")
                    or exact
                    or rel.startswith(pat + "/")
                    or fnmatch.fnmatchcase(rel, pat)
                ):
                    dest = c.dest
                    if not dest.startswith("/"):
                        dest = str(PurePosixPath(spec.workdir) / dest)
                    landed = dest if exact and not c.dest.endswith("/") else ""
                    if exact and c.dest.endswith("/"):
                        landed = str(PurePosixPath(dest) / PurePosixPath(rel).name)
                    out.setdefault(rel, (f"line {c.line}: {c.text}", landed))
    return out


def _removed_later(dest: str, line: int, runs: list[tuple[int, str]]) -> bool:
    """A later RUN of the same (final) stage deletes what this COPY put at ``dest``."""
    target = dest.rstrip("/")
    if not target or target in (".", "/"):
        return False
    pattern = re.compile(r"\brm\s+(?:-\w+\s+)*[^;&|]*" + re.escape(target) + r"(?![\w.-])")
    return any(n > line and pattern.search(args) for n, args in runs)


def _digest(p: Path) -> str | None:
    try:
        data = p.read_bytes()
    except OSError:
        return None
    return hashlib.sha256(data.strip()).hexdigest() if len(data.strip()) > _MIN_FINGERPRINT else None


def _folders(spec: TaskSpec, name: str) -> list[str]:
    """``name`` (tests, solution) of the task and of each of its steps (``steps/<step>/<name>``)."""
    return [name, *(f"steps/{s}/{name}" for s in spec.steps)]


def _leaks(spec: TaskSpec, report: Report) -> None:
    context = _final_context_files(spec)
    answer_prints: dict[str, str] = {}
    files = [
        p for f in (*_folders(spec, "solution"), *_folders(spec, "tests")) for p in _files_under(spec, f)
    ]
    for p in files:
        rel = _rel(spec, p)
        if "solution/" in rel or p.name == "test.sh" or _EXPECTED_NAME.search(p.name):
            d = _digest(p)
            if d:
                answer_prints[d] = rel
    flagged: set[str] = set()
    named = set(instruction_paths(spec))
    for rel, (how, landed) in sorted(context.items()):
        first = rel.split("/", 1)[0]
        if first in ("tests", "solution") or PurePosixPath(rel).name in ("solve.sh", "solution.sh"):
            key = first if first in ("tests", "solution") else rel
            if key not in flagged:
                flagged.add(key)
                report.add(
                    "invalidity.solution_leak",
                    f"environment/Dockerfile {how} puts environment/{key} into the image the agent works in",
                )
            continue
        d = _digest(spec.environment_dir / rel)
        if d and d in answer_prints and landed not in named:
            # (a starting file the instruction names that already equals the answer is a task solved at
            # the start: the nop probe proves that one, as invalidity.trivially_solved)
            report.add(
                "invalidity.solution_leak",
                f"environment/{rel} is a copy of {answer_prints[d]}, and the Dockerfile ({how}) puts it into "
                "the agent's image",
            )


def _oracle_uses_tests(spec: TaskSpec, report: Report) -> None:
    for solution, tests in zip(_folders(spec, "solution"), _folders(spec, "tests"), strict=True):
        _solve_uses_tests(spec, report, solution, sorted({"tests", tests}))


def _solve_uses_tests(spec: TaskSpec, report: Report, solution: str, tests: list[str]) -> None:
    solve = spec.path / solution / "solve.sh"
    if not solve.is_file():
        return
    text = solve.read_text(encoding="utf-8", errors="replace")
    hits = sorted(set(re.findall(r"/tests/[\w./-]+", text)))
    for p in [p for folder in tests for p in _files_under(spec, folder)]:
        name = p.name
        if name in ("test.sh", "run-tests.sh", "__init__.py") or len(name) < 6:
            continue
        if re.search(rf"(?<![\w./-]){re.escape(name)}(?![\w-])", text):
            hits.append(_rel(spec, p))
    if hits:
        report.add(
            "invalidity.oracle_fails",
            f"{solution}/solve.sh reads the verifier's files ({', '.join(sorted(set(hits))[:5])}): the tests "
            "are not in the agent's container, so the oracle's pass proves nothing about the task",
        )


def before_build(spec: TaskSpec, report: Report, *, unsupported: list[str]) -> bool:
    """Every check that needs no container. Returns False when there is nothing a container could add:
    the task cannot be run as written, or has no oracle to run."""
    for line in unsupported:
        report.add(UNSUPPORTED, line)
    if not spec.has_solution and not spec.steps:
        report.add(
            "invalidity.oracle_fails", "solution/solve.sh is missing: no oracle proves the task solvable"
        )
    elif not spec.has_solution:  # a multi-step task: the oracle runs each step's solve.sh (else the task's)
        missing = [n for n in spec.steps if not (spec.path / "steps" / n / "solution" / "solve.sh").is_file()]
        report.add(
            "invalidity.oracle_fails",
            f"no solve.sh for {listed('step', missing)} (steps/<name>/solution/solve.sh, or a shared "
            "solution/solve.sh): no oracle proves the task solvable",
        )
    if not spec.instruction.strip():
        report.add(
            "invalidity.underspecified_instruction", "instruction.md is empty: the agent is told nothing"
        )
    _leaks(spec, report)
    _oracle_uses_tests(spec, report)
    return not unsupported and spec.has_solution


def _starter(spec: TaskSpec, path: str) -> bool:
    """A file the build context ships (copied to wherever the Dockerfile puts it), or a multi-step task's
    step puts in the workdir (``steps/<name>/workdir/``): input, not output."""
    env = spec.environment_dir
    roots = [env, *(spec.path / "steps" / n / "workdir" for n in spec.steps)]
    rel = [p.relative_to(r).as_posix() for r in roots if r.is_dir() for p in task_files(r)]
    if not rel:
        return False
    name = PurePosixPath(path).name
    tail = "/".join(PurePosixPath(path).parts[-2:])
    return any(r == name or r.endswith("/" + name) or r.endswith(tail) for r in rel if name != "Dockerfile")


def _tested(path: str, tests_text: str, workdir: str) -> bool:
    p = PurePosixPath(path)
    if path in tests_text or p.name in tests_text:
        return True
    parent = str(p.parent)
    # built from a pattern: the tests look in the output's own folder (not merely the task's workdir)
    return parent not in ("/", workdir.rstrip("/") or "/") and parent in tests_text


def coverage_check(spec: TaskSpec, report: Report, present_at_start: dict[str, bool]) -> list[str]:
    """Outputs the instruction asks for (paths neither in the fresh image nor shipped in the build context)
    must appear in the tests; returns those outputs."""
    tests = [p for folder in _folders(spec, "tests") for p in _files_under(spec, folder)]
    tests_text = "\n".join(p.read_text(errors="replace") for p in tests)
    outputs = [
        p for p in instruction_paths(spec) if not present_at_start.get(p, False) and not _starter(spec, p)
    ]
    untested = [p for p in outputs if not _tested(p, tests_text, spec.workdir)]
    if untested:
        report.add(
            "invalidity.instruction_untested",
            f"named in instruction.md, never checked: {', '.join(untested)}",
        )
    return outputs
