"""Load, validate, hash and discover Harbor task directories.

A Harbor task directory is the unit Bandpass curates, audits and exports, so it must stay byte-for-byte
interchangeable with what Harbor itself reads:

    instruction.md          the prompt the policy sees
    task.toml               configuration (see below)
    environment/Dockerfile  the image (optional when [environment].docker_image names a prebuilt one)
    solution/solve.sh       the oracle, typed line by line into an interactive bash
    tests/test.sh           the verifier; writes /logs/verifier/reward.txt or reward.json

``task.toml`` follows Harbor's schema: a top-level ``version`` (schema version), ``[task]``,
``[metadata]`` (free-form; difficulty/category/tags are typed), ``[agent]``, ``[verifier]``,
``[environment]`` and ``[solution]``. Keys Harbor defines but Bandpass does not act on are accepted
and reported as warnings rather than problems, so a Harbor task never fails to load here merely for
being richer than we are; keys nobody defines are problems, because a typo such as ``timeout_secs``
would otherwise silently fall back to a default.

Network is the one deliberate departure: Harbor defaults to public network, Bandpass defaults to none
(DESIGN: "no network unless the task asks"). A task asks with ``network_mode`` ("bridge"/"public"/
"allowlist") or Harbor's legacy ``allow_internet = true``.

Validation reports *all* problems at once: a curator fixing a generated task should not have to
iterate one error at a time.
"""

from __future__ import annotations

import hashlib
import json
import math
import os
import stat
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from engine.tasks import allowances

__all__ = [
    "DIFFICULTIES",
    "IGNORED_NAMES",
    "TaskInvalid",
    "TaskProblem",
    "TaskSpec",
    "find_task_dirs",
    "is_harbor_dir",
    "is_tb1_dir",
    "load_task",
    "task_files",
    "validate_task",
    "version_hash",
]

DIFFICULTIES = ("easy", "medium", "hard")

#: Names that never belong to a task's identity: VCS data, bytecode caches and Finder litter differ
#: between machines for the same task and would make the version hash unstable.
IGNORED_NAMES = frozenset({".git", "__pycache__", ".DS_Store", ".pytest_cache"})

DEFAULT_AGENT_TIMEOUT_SEC = 900.0
DEFAULT_VERIFIER_TIMEOUT_SEC = 600.0  # Harbor's default
DEFAULT_BUILD_TIMEOUT_SEC = 600.0  # Harbor's default
DEFAULT_CPUS = 1.0  # Harbor's default
DEFAULT_MEMORY_MB = 2048  # Harbor's default
#: Harbor's default disk allowance; Bandpass measures the container's writable layer against it
#: (engine/sandbox/attribution.py: overlay2 on ext4 has no per-container quota to enforce it with).
DEFAULT_STORAGE_MB = 10240
DEFAULT_WORKDIR = "/app"

INSTRUCTION = "instruction.md"
CONFIG = "task.toml"
DOCKERFILE = "environment/Dockerfile"
SOLVE = "solution/solve.sh"
TEST = "tests/test.sh"

#: network_mode spellings we accept, mapped to "does the task get a network". Harbor spells them
#: public/no-network/allowlist; Docker spells them bridge/none. "host" is refused: it would hand the
#: agent the workstation's own network namespace (the vLLM server, the Docker API on TCP, ...).
_NETWORK_MODES: dict[str, bool] = {
    "none": False,
    "no-network": False,
    "bridge": True,
    "public": True,
    "allowlist": True,
}

# Keys per section. "used" keys are interpreted; "accepted" keys are Harbor's but ignored here (a
# warning says so, because e.g. a healthcheck the sandbox never runs changes behaviour).
_TOP_LEVEL_SCALARS = {"version", "schema_version", "source"}
_TOP_LEVEL_ACCEPTED = {"artifacts"}
_SECTIONS_USED: dict[str, set[str]] = {
    "task": {"name", "version", "description", "authors", "keywords"},
    "metadata": set(),  # free-form in Harbor; typed keys are checked separately
    "agent": {"timeout_sec"},
    "verifier": {"timeout_sec", "env"},
    "environment": {
        "build_timeout_sec",
        "docker_image",
        "cpus",
        "memory_mb",
        "pids_limit",
        "storage_mb",
        "network_mode",
        "allow_internet",
        "workdir",
        "memory",
    },
    "solution": {"env"},
}
_SECTIONS_ACCEPTED: dict[str, set[str]] = {
    "task": set(),
    "metadata": set(),
    "agent": {"user", "allowed_hosts"},
    "verifier": {"user", "allowed_hosts", "network_mode"},
    "environment": {
        "storage",
        "gpus",
        "gpu_types",
        "allowed_hosts",
        "env",
        "healthcheck",
        "skills_dir",
        "mcp_servers",
        "os",
    },
    "solution": set(),
}


@dataclass(frozen=True)
class TaskProblem:
    """One thing wrong with a task directory, addressed precisely enough to fix without searching.

    ``file`` is relative to the task directory; ``field`` names the TOML key as ``[section].key``
    (None when the problem is about the file as a whole).
    """

    file: str
    field: str | None
    message: str

    def __str__(self) -> str:
        if self.field:
            return f"{self.file}: {self.field}: {self.message}"
        return f"{self.file}: {self.message}"


class TaskInvalid(Exception):
    """Raised by :func:`load_task` with every problem found, so one run shows the full repair list."""

    def __init__(self, path: str | os.PathLike[str], problems: list[TaskProblem]) -> None:
        self.path = Path(path)
        self.problems = list(problems)
        lines = "\n".join(f"  - {p}" for p in self.problems)
        count = len(self.problems)
        super().__init__(f"invalid task {self.path} ({count} problem{'s' if count != 1 else ''}):\n{lines}")


@dataclass
class TaskSpec:
    """A validated task, with every setting resolved to a concrete value the engine can act on.

    ``raw`` keeps the parsed TOML so exporters can write back keys Bandpass does not interpret.
    ``warnings`` are non-fatal observations (ignored Harbor keys, conversion notes) that a curator
    should see but that do not stop the task from running.
    """

    name: str
    path: Path
    instruction: str
    agent_timeout_sec: float = DEFAULT_AGENT_TIMEOUT_SEC
    verifier_timeout_sec: float = DEFAULT_VERIFIER_TIMEOUT_SEC
    build_timeout_sec: float = DEFAULT_BUILD_TIMEOUT_SEC
    cpus: float = DEFAULT_CPUS
    memory_mb: int = DEFAULT_MEMORY_MB
    pids_limit: int | None = None
    storage_mb: int = DEFAULT_STORAGE_MB
    network: bool = False
    network_mode: str = "none"
    workdir: str = DEFAULT_WORKDIR
    docker_image: str | None = None
    difficulty: str | None = None
    category: str | None = None
    tags: list[str] = field(default_factory=list)
    description: str = ""
    schema_version: str | None = None
    verifier_env: dict[str, str] = field(default_factory=dict)
    solution_env: dict[str, str] = field(default_factory=dict)
    metadata: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)

    @property
    def dockerfile(self) -> Path | None:
        """The Dockerfile to build, or None when the task runs a prebuilt ``docker_image``."""
        p = self.path / DOCKERFILE
        return p if p.is_file() else None

    @property
    def environment_dir(self) -> Path:
        return self.path / "environment"

    @property
    def solution_dir(self) -> Path:
        return self.path / "solution"

    @property
    def tests_dir(self) -> Path:
        return self.path / "tests"

    def version_hash(self) -> str:
        """Hash of the files as they are now (not cached: the directory may have been edited)."""
        return version_hash(self.path)


# ---------------------------------------------------------------------------------------------------
# value helpers


def _show(value: Any) -> str:
    """Render a TOML value the way the user wrote it, so messages can be matched against the file."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        return json.dumps(value)
    if isinstance(value, dict):
        return "a table"
    if isinstance(value, list):
        return f"an array {json.dumps(value, default=str)}" if len(value) < 8 else "an array"
    return str(value)


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


class _Checker:
    """Accumulates problems while reading task.toml, so one bad field never hides the next."""

    def __init__(self) -> None:
        self.problems: list[TaskProblem] = []
        self.warnings: list[str] = []

    def problem(self, file: str, fld: str | None, message: str) -> None:
        self.problems.append(TaskProblem(file, fld, message))

    def positive_number(self, section: dict[str, Any], sec: str, key: str, default: float) -> float:
        if key not in section:
            return default
        value = section[key]
        if not _is_number(value) or value <= 0:
            self.problem(CONFIG, f"[{sec}].{key}", f"expected a number > 0, got {_show(value)}")
            return default
        return float(value)

    def positive_int(self, section: dict[str, Any], sec: str, key: str, default: int | None) -> int | None:
        if key not in section:
            return default
        value = section[key]
        if isinstance(value, float) and value.is_integer() and value > 0:
            return int(value)
        if not isinstance(value, int) or isinstance(value, bool) or value <= 0:
            self.problem(CONFIG, f"[{sec}].{key}", f"expected an integer > 0, got {_show(value)}")
            return default
        return value

    def string(self, section: dict[str, Any], sec: str, key: str, *, nonempty: bool = False) -> str | None:
        if key not in section:
            return None
        value = section[key]
        if not isinstance(value, str) or (nonempty and not value.strip()):
            what = "a non-empty string" if nonempty else "a string"
            self.problem(CONFIG, f"[{sec}].{key}", f"expected {what}, got {_show(value)}")
            return None
        return value

    def string_list(self, section: dict[str, Any], sec: str, key: str) -> list[str]:
        if key not in section:
            return []
        value = section[key]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.problem(CONFIG, f"[{sec}].{key}", f"expected an array of strings, got {_show(value)}")
            return []
        return list(value)

    def string_table(self, section: dict[str, Any], sec: str, key: str) -> dict[str, str]:
        if key not in section:
            return {}
        value = section[key]
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            self.problem(CONFIG, f"[{sec}].{key}", f"expected a table of strings, got {_show(value)}")
            return {}
        return dict(value)


_MEMORY_SUFFIXES = {"G": 1024.0, "M": 1.0, "K": 1 / 1024}


def _parse_memory(text: str) -> int | None:
    """Harbor's deprecated ``memory = "2G"`` form; None when it does not parse."""
    t = text.strip().upper().removesuffix("B")
    if not t or t[-1] not in _MEMORY_SUFFIXES:
        return None
    try:
        mb = int(float(t[:-1]) * _MEMORY_SUFFIXES[t[-1]])
    except ValueError:
        return None
    return mb if mb > 0 else None


# ---------------------------------------------------------------------------------------------------
# loading


def _read_text(path: Path, rel: str, chk: _Checker) -> str | None:
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        chk.problem(rel, None, f"not valid UTF-8 ({exc.reason} at byte {exc.start})")
    except OSError as exc:
        chk.problem(rel, None, f"cannot be read: {exc.strerror or exc}")
    return None


def _check_script(root: Path, rel: str, chk: _Checker, why: str) -> None:
    p = root / rel
    if not p.exists():
        chk.problem(rel, None, f"missing ({why})")
        return
    if not p.is_file():
        chk.problem(rel, None, "expected a file, found a directory" if p.is_dir() else "not a regular file")
        return
    # Harbor invokes these through bash, so the bit is not strictly needed there; we still require it
    # because a curator running ./solve.sh by hand, and other harnesses that exec the file, do need it.
    if not p.stat().st_mode & 0o111:
        chk.problem(rel, None, "not executable (chmod +x)")
        return
    with p.open("rb") as fh:
        head = fh.read(2)
    if not head:
        chk.problem(rel, None, "is empty")


def _table(doc: dict[str, Any], name: str, chk: _Checker) -> dict[str, Any]:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        chk.problem(CONFIG, f"[{name}]", f"expected a table, got {_show(value)}")
        return {}
    return value


def _check_keys(doc: dict[str, Any], chk: _Checker) -> None:
    for key, value in doc.items():
        if key in _SECTIONS_USED:
            if not isinstance(value, dict):
                continue  # reported by _table
            if key == "metadata":
                continue
            known = _SECTIONS_USED[key] | _SECTIONS_ACCEPTED[key]
            for sub in value:
                if sub in _SECTIONS_ACCEPTED[key]:
                    chk.warnings.append(f"{CONFIG}: [{key}].{sub} is a Harbor setting Bandpass ignores")
                elif sub not in known:
                    chk.problem(CONFIG, f"[{key}].{sub}", f"unknown key (known: {', '.join(sorted(known))})")
        elif key in _TOP_LEVEL_SCALARS:
            if not isinstance(value, str):
                chk.problem(CONFIG, key, f"expected a string, got {_show(value)}")
        elif key in _TOP_LEVEL_ACCEPTED:
            chk.warnings.append(f"{CONFIG}: {key} is a Harbor setting Bandpass ignores")
        elif isinstance(value, dict):
            chk.problem(CONFIG, f"[{key}]", f"unknown section (known: {', '.join(sorted(_SECTIONS_USED))})")
        else:
            known_top = ", ".join(sorted(_TOP_LEVEL_SCALARS | _TOP_LEVEL_ACCEPTED))
            chk.problem(
                CONFIG, key, f"unknown top-level key (known: {known_top}; settings belong in a section)"
            )


def _resolve_network(env: dict[str, Any], chk: _Checker) -> tuple[bool, str]:
    mode = env.get("network_mode")
    allow = env.get("allow_internet")
    network, normalized = False, "none"
    if allow is not None:
        if not isinstance(allow, bool):
            chk.problem(CONFIG, "[environment].allow_internet", f"expected true or false, got {_show(allow)}")
        else:
            network, normalized = allow, ("bridge" if allow else "none")
    if mode is not None:
        if mode == "host":
            chk.problem(
                CONFIG,
                "[environment].network_mode",
                '"host" is not allowed (it shares the workstation\'s network with the agent); use "bridge"',
            )
        elif not isinstance(mode, str) or mode not in _NETWORK_MODES:
            chk.problem(
                CONFIG,
                "[environment].network_mode",
                f"expected one of {', '.join(json.dumps(m) for m in _NETWORK_MODES)}, got {_show(mode)}",
            )
        else:
            wants = _NETWORK_MODES[mode]
            if isinstance(allow, bool) and allow != wants:
                chk.problem(
                    CONFIG,
                    "[environment].network_mode",
                    f"{json.dumps(mode)} contradicts allow_internet = {_show(allow)}",
                )
            network, normalized = wants, ("bridge" if wants else "none")
    return network, normalized


def _inspect(path: str | os.PathLike[str]) -> tuple[TaskSpec | None, list[TaskProblem]]:
    """Read everything, collecting problems; a spec comes back only when there were none."""
    root = Path(path)
    chk = _Checker()
    if not root.exists():
        return None, [TaskProblem(str(root), None, "task directory does not exist")]
    if not root.is_dir():
        return None, [TaskProblem(str(root), None, "not a directory")]

    # --- instruction
    instruction = ""
    ip = root / INSTRUCTION
    if not ip.is_file():
        chk.problem(INSTRUCTION, None, "missing (the prompt the agent is given)")
    else:
        text = _read_text(ip, INSTRUCTION, chk)
        if text is not None and not text.strip():
            chk.problem(INSTRUCTION, None, "is empty")
        instruction = text or ""

    # --- task.toml
    doc: dict[str, Any] = {}
    cp = root / CONFIG
    if not cp.is_file():
        chk.problem(CONFIG, None, "missing")
    else:
        text = _read_text(cp, CONFIG, chk)
        if text is not None:
            try:
                doc = tomllib.loads(text)
            except tomllib.TOMLDecodeError as exc:
                # tomllib's message already carries "(at line N, column M)".
                chk.problem(CONFIG, None, f"invalid TOML: {exc}")

    _check_keys(doc, chk)
    task = _table(doc, "task", chk)
    meta = _table(doc, "metadata", chk)
    agent = _table(doc, "agent", chk)
    verifier = _table(doc, "verifier", chk)
    env = _table(doc, "environment", chk)
    solution = _table(doc, "solution", chk)

    name = chk.string(task, "task", "name", nonempty=True) or root.resolve().name
    description = chk.string(task, "task", "description") or ""
    task_version = chk.string(task, "task", "version", nonempty=True)
    chk.string_list(task, "task", "keywords")
    if "authors" in task and not (
        isinstance(task["authors"], list)
        and all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in task["authors"])
    ):
        chk.problem(CONFIG, "[task].authors", "expected an array of tables each with a string name")

    schema_version = doc.get("schema_version", doc.get("version"))
    if not isinstance(schema_version, str):
        schema_version = None

    difficulty = chk.string(meta, "metadata", "difficulty")
    if difficulty is not None and difficulty not in DIFFICULTIES:
        chk.problem(
            CONFIG,
            "[metadata].difficulty",
            f"expected one of {', '.join(json.dumps(d) for d in DIFFICULTIES)}, got {_show(difficulty)}",
        )
        difficulty = None
    category = chk.string(meta, "metadata", "category", nonempty=True)
    tags = chk.string_list(meta, "metadata", "tags")
    for fld, problem in allowances.parse(meta)[1]:  # the tamper guard's per-task allowances
        chk.problem(CONFIG, fld, problem)

    agent_timeout = chk.positive_number(agent, "agent", "timeout_sec", DEFAULT_AGENT_TIMEOUT_SEC)
    verifier_timeout = chk.positive_number(verifier, "verifier", "timeout_sec", DEFAULT_VERIFIER_TIMEOUT_SEC)
    verifier_env = chk.string_table(verifier, "verifier", "env")
    solution_env = chk.string_table(solution, "solution", "env")

    build_timeout = chk.positive_number(env, "environment", "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_SEC)
    cpus = chk.positive_number(env, "environment", "cpus", DEFAULT_CPUS)
    memory_mb = chk.positive_int(env, "environment", "memory_mb", None)
    if "memory" in env:
        legacy = env["memory"]
        parsed = _parse_memory(legacy) if isinstance(legacy, str) else None
        if parsed is None:
            chk.problem(
                CONFIG, "[environment].memory", f'expected a size like "2G" or "512M", got {_show(legacy)}'
            )
        elif memory_mb is not None and memory_mb != parsed:
            chk.problem(
                CONFIG,
                "[environment].memory",
                f"{_show(legacy)} ({parsed} MB) contradicts memory_mb = {memory_mb}",
            )
        else:
            memory_mb = parsed
            chk.warnings.append(f"{CONFIG}: [environment].memory is deprecated in Harbor; use memory_mb")
    pids_limit = chk.positive_int(env, "environment", "pids_limit", None)
    storage_mb = chk.positive_int(env, "environment", "storage_mb", DEFAULT_STORAGE_MB)
    network, network_mode = _resolve_network(env, chk)
    docker_image = chk.string(env, "environment", "docker_image", nonempty=True)
    workdir = chk.string(env, "environment", "workdir", nonempty=True) or DEFAULT_WORKDIR
    if not PurePosixPath(workdir).is_absolute():
        chk.problem(CONFIG, "[environment].workdir", f"expected an absolute path, got {_show(workdir)}")

    # --- files
    df = root / DOCKERFILE
    if not df.is_file() and docker_image is None:
        chk.problem(DOCKERFILE, None, "missing (and [environment].docker_image is not set)")
    _check_script(root, SOLVE, chk, "the oracle solution the audit runs")
    _check_script(root, TEST, chk, "the verifier that writes /logs/verifier/reward.txt")

    if chk.problems:
        return None, chk.problems

    metadata = dict(meta)
    if task_version is not None:
        metadata.setdefault("task_version", task_version)
    spec = TaskSpec(
        name=name,
        path=root,
        instruction=instruction,
        agent_timeout_sec=agent_timeout,
        verifier_timeout_sec=verifier_timeout,
        build_timeout_sec=build_timeout,
        cpus=cpus,
        memory_mb=memory_mb if memory_mb is not None else DEFAULT_MEMORY_MB,
        pids_limit=pids_limit,
        storage_mb=storage_mb if storage_mb is not None else DEFAULT_STORAGE_MB,
        network=network,
        network_mode=network_mode,
        workdir=workdir,
        docker_image=docker_image,
        difficulty=difficulty,
        category=category,
        tags=tags,
        description=description,
        schema_version=schema_version,
        verifier_env=verifier_env,
        solution_env=solution_env,
        metadata=metadata,
        raw=doc,
        warnings=chk.warnings,
    )
    return spec, []


def load_task(path: str | os.PathLike[str]) -> TaskSpec:
    """Load a Harbor task directory; raise :class:`TaskInvalid` listing every problem found."""
    spec, problems = _inspect(path)
    if spec is None:
        raise TaskInvalid(path, problems)
    return spec


def validate_task(path: str | os.PathLike[str]) -> list[TaskProblem]:
    """Every problem with the task directory; an empty list means :func:`load_task` will succeed."""
    return _inspect(path)[1]


# ---------------------------------------------------------------------------------------------------
# identity


def _walk(root: Path) -> list[tuple[str, Path]]:
    """(relative posix path, path) for every file, following symlinks but never looping.

    Symlinks are followed because copy tools disagree on them (``shutil.copytree`` dereferences by
    default, ``cp -r`` does not); hashing what they point at is the only choice stable under both.
    """
    out: list[tuple[str, Path]] = []
    seen: set[str] = set()

    def visit(d: Path, rel: PurePosixPath) -> None:
        real = os.path.realpath(d)
        if real in seen:
            return
        seen.add(real)
        try:
            entries = sorted(os.scandir(d), key=lambda e: e.name)
        except OSError:
            return
        for e in entries:
            if e.name in IGNORED_NAMES:
                continue
            child = Path(e.path)
            r = rel / e.name
            if e.is_dir(follow_symlinks=True):
                visit(child, r)
            else:
                out.append((r.as_posix(), child))

    visit(root, PurePosixPath())
    out.sort(key=lambda t: t[0])
    return out


def task_files(path: str | os.PathLike[str]) -> list[Path]:
    """The files that make up a task (the same set :func:`version_hash` covers), sorted by relative path."""
    return [p for _, p in _walk(Path(path))]


def version_hash(path: str | os.PathLike[str]) -> str:
    """sha256 identifying a task version: every result refers to one, so edits never mix results.

    Covers relative path, executable bit and contents of each file; not mtimes, owners or the
    directory's own name, so the same task hashes the same after a copy, a clone or a rename.
    Each field is length-prefixed so that no two different trees can produce the same byte stream.
    """
    h = hashlib.sha256(b"bandpass-task-v1\0")
    for rel, p in _walk(Path(path)):
        name = rel.encode("utf-8", "surrogateescape")
        try:
            st = p.stat()
            data = p.read_bytes()
            kind = b"x" if st.st_mode & 0o111 else b"-"
        except FileNotFoundError:
            # A dangling symlink: its target text is all there is to identify it by.
            data = os.readlink(p).encode("utf-8", "surrogateescape")
            kind = b"L"
        if kind != b"L" and not stat.S_ISREG(st.st_mode):
            continue  # fifos, sockets: not content
        h.update(b"%d:%s%s%d:" % (len(name), name, kind, len(data)))
        h.update(data)
    return h.hexdigest()


# ---------------------------------------------------------------------------------------------------
# discovery


def is_harbor_dir(p: str | os.PathLike[str]) -> bool:
    return (Path(p) / CONFIG).is_file()


def is_tb1_dir(p: str | os.PathLike[str]) -> bool:
    """A Terminal-Bench 1 task (task.yaml) that has not (also) been converted in place."""
    q = Path(p)
    return (q / "task.yaml").is_file() and not (q / CONFIG).is_file()


def find_task_dirs(root: str | os.PathLike[str]) -> list[Path]:
    """Every Harbor or TB1 task directory under ``root`` (``root`` itself included), sorted.

    Task directories are not descended into: their ``tests/`` or ``environment/`` may legitimately
    contain files named like task markers (fixtures of a task-linting task, say).
    """
    base = Path(root)
    found: list[Path] = []

    def visit(d: Path) -> None:
        if is_harbor_dir(d) or is_tb1_dir(d):
            found.append(d)
            return
        try:
            children = sorted(c for c in d.iterdir() if c.is_dir())
        except OSError:
            return
        for c in children:
            if c.name in IGNORED_NAMES or c.name.startswith(".") or c.is_symlink():
                continue
            visit(c)

    if base.is_dir():
        visit(base)
    return sorted(found)
