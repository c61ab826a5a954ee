"""Load, validate, hash and discover Harbor task directories.

A Harbor task directory is the unit Bandpass curates, audits and exports, so it must stay byte-for-byte
interchangeable with what Harbor itself reads:

    instruction.md          the prompt the policy sees
    task.toml               configuration (see below)
    environment/Dockerfile  the image (optional when [environment].docker_image names a prebuilt one)
    solution/solve.sh       the oracle, typed line by line into an interactive bash
    tests/test.sh           the verifier; writes /logs/verifier/reward.txt or reward.json

``task.toml`` follows Harbor 0.25's schema (``engine/tasks/harbor_schema.py``): a top-level
``schema_version``, ``[task]``, ``[metadata]`` (free-form; difficulty/category/tags are read when
well-typed), ``[agent]``, ``[verifier]``, ``[environment]``, ``[solution]``, ``[[steps]]``. Harbor's loader
ignores keys it does not define, so Bandpass never refuses a task for a key. A warning says only where
Bandpass behaves differently from Harbor (a Harbor key Bandpass does not act on, when its value asks for
something: what that changes), or a key that looks like a Harbor key gone wrong (a likely typo, with
"did you mean", or a key of another table), whose setting Harbor loses too; a value Harbor accepts and
Bandpass handles as Harbor does — a task's own extension keys included — is silent. Problems are what
neither can run: a wrong type on a key both read, a missing instruction or verifier. ``solve.sh``/``test.sh``
need no exec bit: Harbor and Bandpass run them through bash. Compose services (``environment/docker-compose.
yaml``: engine/tasks/compose.py) and multi-step tasks (``[[steps]]``: engine/tasks/steps.py) are read as
Harbor reads them. What Bandpass cannot run faithfully (a separate verifier image, a Windows task, a service
that asks for privileges this machine does not give) is listed in ``unsupported``: the task imports, and the
audit says it could not audit it.

Network: a task that sets ``network_mode`` (Harbor's ``no-network``/``public``/``allowlist``; the older
``none``/``bridge`` are read with a warning) or ``allow_internet`` gets exactly that. A task that says
nothing gets Harbor's default, ``public``, silently when its own scripts — followed into the scripts they
source or call (``script_refs``) — download something (the author relied on that default); otherwise it
runs offline (DESIGN: "no network unless the task asks") with a warning that Harbor would have given it
one.

Validation reports *all* problems at once: a curator fixing a generated task should not have to
iterate one error at a time.
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import json
import math
import os
import re
import shutil
import stat
import tempfile
import tomllib
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

from ..core.errors import BandpassError
from . import allowances, harbor_schema, rewards, script_refs
from . import artifacts as artifact_spec
from . import compose as compose_spec
from . import steps as step_spec
from .script_refs import DOWNLOADS_RE

__all__ = [
    "DIFFICULTIES",
    "DOWNLOADS_RE",
    "IGNORED_NAMES",
    "TaskInvalid",
    "TaskProblem",
    "TaskSpec",
    "dockerfile_workdir",
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
#: (engine/sandbox/attribution/: overlay2 on ext4 has no per-container quota to enforce it with).
DEFAULT_STORAGE_MB = 10240
#: Docker's own default working directory: what a container of an image without WORKDIR starts in. A task
#: that sets no ``workdir`` runs in its image's WORKDIR (Harbor's rule), refined from the built image.
DEFAULT_WORKDIR = "/"

INSTRUCTION = "instruction.md"
CONFIG = "task.toml"
DOCKERFILE = "environment/Dockerfile"
COMPOSE = "environment/docker-compose.yaml"
SOLVE = "solution/solve.sh"
TEST = "tests/test.sh"

#: "host" is refused: it would hand the agent the workstation's own network namespace (the vLLM server,
#: the Docker API on TCP, ...).
_REFUSED_NETWORK = "host"

#: A ``[task].name`` written by hand must be safe as a folder name inside the workspace.
_SAFE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._ -]*(/[A-Za-z0-9][A-Za-z0-9._ -]*)?$")
_STEP_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
#: Where Harbor puts a task's folders in the container, for following one script into another.
TASK_MOUNTS = {"/tests": "tests", "/solution": "solution", "/oracle": "solution", "$TEST_DIR": "/tests"}


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


class TaskInvalid(BandpassError):
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
    should see but that do not stop the task from running. ``unsupported`` names what Bandpass cannot run
    as the author meant (each line names its file and field): the audit reports such a task as
    *could not audit*. ``harbor_refusals`` is what Harbor 0.25's own loader would refuse in this task.
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
    network_mode: str = "no-network"  # Harbor's spelling: no-network | public | allowlist
    #: The task's working directory: ``[environment].workdir``, else the Dockerfile's last WORKDIR, else
    #: Docker's "/" — and, when the task did not declare it, the built image's WORKDIR once it exists.
    workdir: str = DEFAULT_WORKDIR
    workdir_declared: bool = False
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
    unsupported: list[str] = field(default_factory=list)
    harbor_refusals: list[str] = field(default_factory=list)
    steps: list[str] = field(default_factory=list)  # multi-step tasks: the step names, in order
    #: Each step's settings (engine/tasks/steps.py), in order; the task's reward from theirs by
    #: ``reward_strategy`` (Harbor's ``multi_step_reward_strategy``: mean | final).
    step_specs: list[step_spec.StepSpec] = field(default_factory=list)
    reward_strategy: str = step_spec.MEAN
    #: The task's compose services (engine/tasks/compose.py); None without environment/docker-compose.yaml.
    compose: compose_spec.ComposeInfo | None = None
    #: Harbor's ``[environment] env`` (the compose file is interpolated from it) and
    #: ``[environment.healthcheck]`` (run before the agent starts).
    environment_env: dict[str, str] = field(default_factory=dict)
    healthcheck: step_spec.Healthcheck | None = None
    #: Harbor's artifacts collected from a compose service ((service, absolute path): carried into the clean
    #: room at that path, and kept with the recordings) and ``[[verifier.collect]]`` hooks
    service_artifacts: list[tuple[str, str]] = field(default_factory=list)
    collect: list[step_spec.CollectHook] = field(default_factory=list)
    #: Set on the spec one step of a multi-step task runs with (``steps.for_step``): the step's name, its
    #: solution folder and its merged tests folder.
    current_step: str = ""
    solution_override: Path | None = None
    tests_override: Path | None = None
    has_solution: bool = True
    #: Declared artifact paths (Harbor's top-level ``artifacts``), carried into the clean room with the
    #: workdir; ``verify_mode`` is "" (Bandpass's default, the clean room), ``clean_room`` or ``service``
    #: from ``[verifier] environment_mode`` (or what ``[metadata.bandpass] verify_mode`` asks, ``in_place``
    #: included: engine/tasks/artifacts.py); ``verifier_network`` is the verifier's network (Harbor: the
    #: phase's ``network_mode`` override, else the environment's).
    artifacts: list[str] = field(default_factory=list)
    verify_mode: str = ""
    verifier_network: bool = False

    @property
    def artifact_roots(self) -> list[str]:
        """What the clean room carries: the workdir, ``/logs/artifacts`` and the declared paths."""
        return artifact_spec.roots(self.workdir, self.artifacts)

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
        return self.solution_override or self.path / "solution"

    @property
    def tests_dir(self) -> Path:
        return self.tests_override or self.path / "tests"

    @property
    def has_services(self) -> bool:
        return self.compose is not None and bool(self.compose.services)

    @property
    def multi_step(self) -> bool:
        return bool(self.steps)

    def version_hash(self) -> str:
        """Hash of the files as they are now (not cached: the directory may have been edited)."""
        return version_hash(self.path)

    def for_step(self, step: step_spec.StepSpec, tests_dir: Path) -> TaskSpec:
        """The spec one step of a multi-step task runs with: its instruction, timeouts, verifier env,
        artifacts (the task's and the step's), verifier mode, solution and tests. ``tests_dir`` is where
        :meth:`merge_step_tests` put the step's tests."""
        solution = step.dir(self.path) / "solution"
        return dataclasses.replace(
            self,
            instruction=step.instruction,
            agent_timeout_sec=step.agent_timeout_sec
            if step.agent_timeout_sec is not None
            else self.agent_timeout_sec,
            verifier_timeout_sec=step.verifier_timeout_sec,
            verifier_env={**self.verifier_env, **step.verifier_env},
            artifacts=[*self.artifacts, *(a for a in step.artifacts if a not in self.artifacts)],
            verify_mode=step.verify_mode or self.verify_mode,
            service_artifacts=[
                *self.service_artifacts,
                *(a for a in step.service_artifacts if a not in self.service_artifacts),
            ],
            collect=[*self.collect, *step.collect],
            solution_override=solution if (solution / "solve.sh").is_file() else None,
            tests_override=tests_dir,
            current_step=step.name,
        )

    def merge_step_tests(self, step: step_spec.StepSpec) -> Path:
        """A temporary folder holding the task's ``tests/`` with the step's ``tests/`` copied over it
        (Harbor uploads both into ``/tests``, the step's last). The caller removes it."""
        out = Path(tempfile.mkdtemp(prefix=f"bandpass-step-tests-{step.name[:20]}-"))
        for src in (self.path / "tests", step.dir(self.path) / "tests"):
            if src.is_dir():
                shutil.copytree(src, out, dirs_exist_ok=True, symlinks=False)
        return out


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
        self.unsupported: list[str] = []

    def problem(self, file: str, fld: str | None, message: str) -> None:
        self.problems.append(TaskProblem(file, fld, message))

    def warn(self, file: str, fld: str | None, message: str) -> None:
        self.warnings.append(str(TaskProblem(file, fld, message)))

    def positive_number(self, section: dict[str, Any], sec: str, key: str, default: float) -> float:
        if key not in section or section[key] is None:
            return default
        value = section[key]
        if not _is_number(value) or value <= 0:
            self.problem(CONFIG, f"[{sec}].{key}", f"expected a number > 0, got {_show(value)}")
            return default
        return float(value)

    def positive_int(self, section: dict[str, Any], sec: str, key: str, default: int | None) -> int | None:
        if key not in section or section[key] is None:
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
    """Harbor's deprecated ``memory = "2G"`` form, parsed exactly as its ``_parse_size_to_mb`` does (so
    ``"2GB"``, which Harbor refuses, is refused here too); None when it does not parse."""
    t = text.strip().upper()
    if not t or t[-1] not in _MEMORY_SUFFIXES:
        return None
    try:
        mb = int(float(t[:-1]) * _MEMORY_SUFFIXES[t[-1]])
    except ValueError:
        return None
    return mb if mb > 0 else None


def _legacy_size(env: dict[str, Any], key: str, current: int | None, chk: _Checker) -> int | None:
    """Harbor's deprecated ``memory``/``storage`` string, read as Harbor reads it: it fills ``<key>_mb``
    when that is unset, contradicting it is refused, and a value that is not a string is dropped
    (Harbor pops it and ignores it). No warning: Bandpass then does what Harbor does."""
    if key not in env or not isinstance(env[key], str):
        return current
    parsed = _parse_memory(env[key])
    fld = f"[environment].{key}"
    if parsed is None:
        chk.problem(CONFIG, fld, f'expected a size like "2G" or "512M", got {_show(env[key])}')
        return current
    if current is not None and current != parsed:
        chk.problem(CONFIG, fld, f"{_show(env[key])} ({parsed} MB) contradicts {key}_mb = {current}")
        return current
    return parsed


def dockerfile_workdir(text: str) -> str | None:
    """The working directory the Dockerfile's final stage leaves, when it can be read without building:
    its WORKDIR lines (relative ones join the previous), ``None`` when there is none or one uses a variable
    (then only the built image knows)."""
    workdir: str | None = None
    for line in text.splitlines():
        parts = line.strip().split(None, 1)
        if not parts:
            continue
        word = parts[0].upper()
        if word == "FROM":
            workdir = None  # a new stage starts from its base image's WORKDIR: unknown here
        elif word == "WORKDIR" and len(parts) == 2:
            candidate = parts[1].strip().strip("\"'")
            if "$" in candidate:
                workdir = None
                continue
            base = PurePosixPath(workdir or "/")
            workdir = str(base / candidate) if not candidate.startswith("/") else candidate
    return workdir


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


def _check_script(root: Path, rel: str, chk: _Checker, why: str, *, required: bool) -> bool:
    """True when the script is there to run. No exec bit is needed: Harbor and Bandpass run it with bash."""
    p = root / rel
    if not p.exists():
        if required:
            chk.problem(rel, None, f"missing ({why})")
        return False
    if not p.is_file():
        chk.problem(rel, None, "expected a file, found a directory" if p.is_dir() else "not a regular file")
        return False
    return True


def _table(doc: dict[str, Any], name: str, chk: _Checker) -> dict[str, Any]:
    value = doc.get(name, {})
    if not isinstance(value, dict):
        chk.problem(CONFIG, f"[{name}]", f"expected a table, got {_show(value)}")
        return {}
    return value


def _unknown_key(chk: _Checker, what: str, key: str, known: list[str]) -> None:
    """A key Harbor does not define: Harbor ignores it, and so does Bandpass — nothing differs, so a task's
    own extension data (``[task] format``, ``workstream``) is silent. Only a key that looks like a Harbor
    key gone wrong is a warning, because the author's setting is then lost in Harbor too: a likely typo
    (``timeout_secs``) or a Harbor key in the wrong table (a top-level ``network_mode``)."""
    hint = harbor_schema.suggest(key, known)
    if not hint:
        homes = [f"[{sec}]" for sec, notes in harbor_schema.SECTIONS.items() if key in notes]
        hint = f" (a key of {', '.join(homes)})" if homes else ""
    if hint:
        chk.warn(CONFIG, what, "not a Harbor key; kept, and ignored (Harbor ignores it too)" + hint)


def _check_keys(doc: dict[str, Any], chk: _Checker, *, compose: bool = False) -> None:
    """Harbor keys Bandpass does not act on are warnings saying what that changes, when their value asks
    for something; unknown keys are silent unless they look like a Harbor key gone wrong (_unknown_key).
    ``[environment] env`` of a compose task is silent: Harbor then only interpolates the compose file from
    it (its docker environment sets it in no container), and so does Bandpass (engine/sandbox/services.py)."""
    environment = doc.get("environment")
    for key, value in doc.items():
        if key in harbor_schema.SECTIONS:
            if not isinstance(value, dict) or key == "metadata":
                continue  # a non-table is reported by _table; metadata is free-form
            notes = harbor_schema.SECTIONS[key]
            for sub, subval in value.items():
                if sub in notes:
                    if compose and (key, sub) == ("environment", "env"):
                        continue
                    w = harbor_schema.ignored_key_warning(
                        f"[{key}]",
                        sub,
                        subval,
                        notes[sub],
                        environment=environment if isinstance(environment, dict) else {},
                    )
                    if w:
                        chk.warnings.append(w)
                else:
                    _unknown_key(chk, f"[{key}].{sub}", sub, list(notes))
        elif key in harbor_schema.TOP_LEVEL:
            note = harbor_schema.TOP_LEVEL[key]
            w = harbor_schema.ignored_key_warning("", key, value, note) if note else None
            if w:
                chk.warnings.append(w.replace("task.toml: .", "task.toml: "))
        else:
            what = f"[{key}]" if isinstance(value, dict) else key
            _unknown_key(chk, what, key, [*harbor_schema.SECTIONS, *harbor_schema.TOP_LEVEL])


def _resolve_network(
    env: dict[str, Any], chk: _Checker, *, relies_on_default: str | None
) -> tuple[bool, str]:
    """(network?, Harbor's spelling of the mode). ``relies_on_default`` names a download the task's own
    scripts run, when there is one: then a task that says nothing gets Harbor's default (public)."""
    mode = env.get("network_mode")
    allow = env.get("allow_internet")
    if allow is not None and not isinstance(allow, bool):
        chk.problem(CONFIG, "[environment].allow_internet", f"expected true or false, got {_show(allow)}")
        allow = None
    if mode is None:
        if allow is not None:
            return allow, ("public" if allow else "no-network")
        if relies_on_default:
            return True, "public"  # Harbor's default, which its scripts rely on: as Harbor runs it
        chk.warn(
            CONFIG,
            "[environment].network_mode",
            "not set; Harbor would give it a public network, Bandpass runs it offline "
            '(set network_mode = "public" if it needs one)',
        )
        return False, "no-network"
    if mode == _REFUSED_NETWORK:
        chk.problem(
            CONFIG,
            "[environment].network_mode",
            '"host" is not allowed (it shares the workstation\'s network with the agent); use "public"',
        )
        return False, "no-network"
    if not isinstance(mode, str) or (
        mode not in harbor_schema.NETWORK_MODES and mode not in harbor_schema.LEGACY_NETWORK_MODES
    ):
        chk.problem(
            CONFIG,
            "[environment].network_mode",
            f"expected one of {', '.join(map(json.dumps, harbor_schema.NETWORK_MODES))}, got {_show(mode)}",
        )
        return False, "no-network"
    harbor_mode = harbor_schema.LEGACY_NETWORK_MODES.get(mode, mode)
    if mode in harbor_schema.LEGACY_NETWORK_MODES:
        chk.warn(
            CONFIG,
            "[environment].network_mode",
            f"{json.dumps(mode)} is Docker's spelling, which Harbor refuses: write {json.dumps(harbor_mode)}",
        )
    wants = harbor_mode != "no-network"
    if harbor_mode == "allowlist":
        chk.warn(
            CONFIG,
            "[environment].network_mode",
            '"allowlist": no allowlist is enforced, the task gets the whole network (Harbor lets through '
            "only [environment].allowed_hosts)",
        )
    if allow is not None and allow != wants:
        chk.problem(
            CONFIG,
            "[environment].network_mode",
            f"{json.dumps(mode)} contradicts allow_internet = {_show(allow)}",
        )
    return wants, harbor_mode


def _read_task_table(task: dict[str, Any], root: Path, chk: _Checker) -> tuple[str, str, str | None]:
    """(name, description, version) from ``[task]``; the folder's name when it gives none."""
    name = root.resolve().name
    if task:
        given = task.get("name")
        if given is None:
            chk.warn(
                CONFIG,
                "[task].name",
                "missing (Harbor requires it when [task] is present); used the folder name",
            )
        elif not isinstance(given, str) or not given.strip():
            chk.problem(CONFIG, "[task].name", f"expected a non-empty string, got {_show(given)}")
        elif not _SAFE_NAME.match(given) or ".." in given:
            chk.problem(
                CONFIG,
                "[task].name",
                f"{_show(given)} is not 'org/name' (letters, digits, '.', '_', '-', one '/')",
            )
        else:
            name = given
            if not harbor_schema.ORG_NAME_RE.match(given):
                chk.warn(
                    CONFIG,
                    "[task].name",
                    f"{_show(given)}: Harbor's loader refuses names that are not 'org/name'",
                )
    description = chk.string(task, "task", "description") or ""
    version = chk.string(task, "task", "version", nonempty=True)
    chk.string_list(task, "task", "keywords")
    if "authors" in task and not (
        isinstance(task["authors"], list)
        and all(isinstance(a, dict) and isinstance(a.get("name"), str) for a in task["authors"])
    ):
        chk.problem(CONFIG, "[task].authors", "expected an array of tables each with a string name")
    return name, description, version


def _read_metadata(meta: dict[str, Any], chk: _Checker) -> tuple[str | None, str | None, list[str]]:
    """difficulty, category and tags when well-typed. Harbor's ``[metadata]`` is free-form and drives nothing
    it does, so no value there is a warning: one Bandpass cannot show (``difficulty = "unknown"``, Harbor's
    own ``Difficulty.UNKNOWN``, or a list where a string belongs) is shown as unset and kept in the file."""
    difficulty = meta.get("difficulty")
    if difficulty not in DIFFICULTIES:
        difficulty = None
    category = meta.get("category")
    if not isinstance(category, str) or not category.strip():
        category = None
    tags = meta.get("tags", [])
    if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
        tags = []
    for fld, problem in allowances.parse(meta)[1]:  # Bandpass's own table: malformed is a problem
        chk.problem(CONFIG, fld, problem)
    for fld, problem in rewards.declared(meta)[1]:
        chk.problem(CONFIG, fld, problem)
    return difficulty, category, list(tags)


def _read_steps(doc: dict[str, Any], root: Path, chk: _Checker) -> tuple[list[str], str]:
    """Multi-step tasks (``[[steps]]``): their names and instructions, checked as Harbor checks them (the
    settings of each are read by :func:`_read_step_specs` once the workdir is known)."""
    steps = doc.get("steps")
    if steps is None:
        return [], ""
    if not isinstance(steps, list) or not all(isinstance(s, dict) for s in steps):
        chk.problem(CONFIG, "[[steps]]", f"expected an array of tables, got {_show(steps)}")
        return [], ""
    if not steps:
        chk.problem(CONFIG, "[[steps]]", "is empty (Harbor needs at least one step)")
        return [], ""
    names: list[str] = []
    texts: list[str] = []
    for i, step in enumerate(steps):
        name = step.get("name")
        if not isinstance(name, str) or not _STEP_NAME.match(name):
            chk.problem(
                CONFIG, f"[[steps]][{i}].name", f"expected a folder name under steps/, got {_show(name)}"
            )
            continue
        if name.lower() in (n.lower() for n in names):
            chk.problem(CONFIG, f"[[steps]][{i}].name", f"{_show(name)} is used twice")
            continue
        names.append(name)
        ins = root / "steps" / name / INSTRUCTION
        if not ins.is_file():
            chk.problem(f"steps/{name}/{INSTRUCTION}", None, "missing (the step's prompt)")
        else:
            texts.append(
                f"## {name}\n\n{(_read_text(ins, f'steps/{name}/{INSTRUCTION}', chk) or '').strip()}"
            )
        if not (root / "steps" / name / TEST).is_file() and not (root / TEST).is_file():
            chk.problem(f"steps/{name}/{TEST}", None, f"missing, and there is no shared {TEST}")
    strategy = doc.get("multi_step_reward_strategy")
    if strategy is not None and strategy not in (step_spec.MEAN, step_spec.FINAL):
        chk.problem(
            CONFIG, "multi_step_reward_strategy", f'expected "mean" or "final", got {_show(strategy)}'
        )
    return names, "\n\n".join(texts)


def _read_step_specs(
    doc: dict[str, Any], names: list[str], root: Path, workdir: str, chk: _Checker
) -> list[step_spec.StepSpec]:
    """Each step's settings (engine/tasks/steps.py); what Bandpass does not act on is a warning, a separate
    verifier image is unsupported (as for the task)."""
    out: list[step_spec.StepSpec] = []
    by_name = {s.get("name"): (i, s) for i, s in enumerate(doc.get("steps") or []) if isinstance(s, dict)}
    for name in names:
        i, raw = by_name[name]
        step = step_spec.parse_step(raw, i, root, workdir, lambda f, m: chk.problem(CONFIG, f, m))
        if step is None:
            continue
        where = f"[[steps]][{i}]"
        for sec in ("agent", "verifier"):
            table = raw.get(sec)
            if isinstance(table, dict) and table.get("user") is not None:
                chk.warn(CONFIG, f"{where}.{sec}.user", f"the step's {sec} runs as the image's default user")
        verifier: dict[str, Any] = raw["verifier"] if isinstance(raw.get("verifier"), dict) else {}
        task_verifier: dict[str, Any] = doc["verifier"] if isinstance(doc.get("verifier"), dict) else {}
        mode = verifier.get("environment_mode") or (
            "separate" if verifier.get("environment") is not None else None
        )
        if mode is None:
            mode = task_verifier.get("environment_mode") or (
                "separate" if task_verifier.get("environment") is not None else "shared"
            )
        if mode == "separate":  # Harbor's separate verifier: its own image, when the step or task has one
            image = [
                f for f in (f"steps/{name}/tests/Dockerfile", "tests/Dockerfile") if (root / f).is_file()
            ]
            for where_env in (verifier.get("environment"), task_verifier.get("environment")):
                if isinstance(where_env, dict) and where_env.get("docker_image"):
                    image.append(f"docker_image = {_show(where_env['docker_image'])}")
            if image:
                chk.unsupported.append(
                    f"{CONFIG}: {where}.verifier: step {name!r} is verified in a separate image "
                    f"({', '.join(image)}), which is not built; Bandpass would run its tests in the task's "
                    "own image"
                )
        if not step_spec.has_solution_files(root, name):
            chk.warn(
                f"steps/{name}/{SOLVE}",
                None,
                "missing, and there is no shared solution/solve.sh: the audit cannot prove this step "
                "solvable",
            )
        out.append(step)
    return out


def _read_verifier_mode(verifier: dict[str, Any], root: Path, chk: _Checker) -> None:
    """A separate verifier with its *own image* (tests/Dockerfile, or [verifier.environment]) cannot be
    honoured: Bandpass verifies in the task's image, where that verifier's tools may be missing."""
    mode = verifier.get("environment_mode")
    if mode is not None and mode not in ("shared", "separate"):
        chk.problem(
            CONFIG, "[verifier].environment_mode", f'expected "shared" or "separate", got {_show(mode)}'
        )
        return
    own_env = verifier.get("environment")
    if mode == "shared" and own_env is not None:
        chk.problem(CONFIG, "[verifier].environment", 'conflicts with environment_mode = "shared"')
        return
    separate = mode == "separate" or (mode is None and own_env is not None)
    if not separate:
        return
    image = [f for f in ("tests/Dockerfile", "tests/docker-compose.yaml") if (root / f).is_file()]
    if isinstance(own_env, dict) and own_env.get("docker_image"):
        image.append(f"[verifier.environment].docker_image = {_show(own_env['docker_image'])}")
    if image:
        chk.unsupported.append(
            f"{CONFIG}: [verifier].environment_mode: a separate verifier image ({', '.join(image)}) is not "
            "built; Bandpass would run tests/test.sh in the task's own image"
        )


def _inspect(path: str | os.PathLike[str]) -> tuple[TaskSpec | None, list[TaskProblem]]:
    """Read everything, collecting problems; a spec comes back only when there were none."""
    root = Path(path)
    chk = _Checker()
    if not root.exists():
        return None, [TaskProblem(str(root), None, "task directory does not exist")]
    if not root.is_dir():
        return None, [TaskProblem(str(root), None, "not a directory")]

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

    steps, steps_text = _read_steps(doc, root, chk)

    # --- instruction (a multi-step task has one per step instead)
    instruction = steps_text
    ip = root / INSTRUCTION
    if not steps:
        if not ip.is_file():
            chk.problem(INSTRUCTION, None, "missing (the prompt the agent is given)")
        else:
            text = _read_text(ip, INSTRUCTION, chk)
            if text is not None and not text.strip():
                chk.warn(INSTRUCTION, None, "is empty: the agent is given no prompt")
            instruction = text or ""

    _check_keys(doc, chk, compose=(root / COMPOSE).is_file())
    task = _table(doc, "task", chk)
    meta = _table(doc, "metadata", chk)
    agent = _table(doc, "agent", chk)
    verifier = _table(doc, "verifier", chk)
    env = _table(doc, "environment", chk)
    solution = _table(doc, "solution", chk)
    for key in ("version", "schema_version", "source"):
        if key in doc and not isinstance(doc[key], str):
            chk.problem(CONFIG, key, f"expected a string, got {_show(doc[key])}")

    name, description, task_version = _read_task_table(task, root, chk)
    schema_version = doc.get("schema_version", doc.get("version"))
    if not isinstance(schema_version, str):
        schema_version = None
    difficulty, category, tags = _read_metadata(meta, chk)

    agent_timeout = chk.positive_number(agent, "agent", "timeout_sec", DEFAULT_AGENT_TIMEOUT_SEC)
    verifier_timeout = chk.positive_number(verifier, "verifier", "timeout_sec", DEFAULT_VERIFIER_TIMEOUT_SEC)
    verifier_env = chk.string_table(verifier, "verifier", "env")
    solution_env = chk.string_table(solution, "solution", "env")
    _read_verifier_mode(verifier, root, chk)

    build_timeout = chk.positive_number(env, "environment", "build_timeout_sec", DEFAULT_BUILD_TIMEOUT_SEC)
    cpus = chk.positive_number(env, "environment", "cpus", DEFAULT_CPUS)
    memory_mb = _legacy_size(env, "memory", chk.positive_int(env, "environment", "memory_mb", None), chk)
    storage_mb = _legacy_size(env, "storage", chk.positive_int(env, "environment", "storage_mb", None), chk)
    pids_limit = chk.positive_int(env, "environment", "pids_limit", None)
    os_name = env.get("os", "linux")
    if not isinstance(os_name, str) or os_name.lower() not in ("linux", "windows"):
        chk.problem(CONFIG, "[environment].os", f'expected "linux" or "windows", got {_show(os_name)}')
    elif os_name.lower() == "windows":
        chk.unsupported.append(f'{CONFIG}: [environment].os = "windows": Bandpass runs Linux containers only')
    for key in ("gpus",):
        if isinstance(env.get(key), int) and not isinstance(env.get(key), bool) and env[key] > 0:
            chk.unsupported.append(
                f"{CONFIG}: [environment].{key} = {env[key]}: no GPU is attached to the sandbox"
            )
    if env.get("tpu"):
        chk.unsupported.append(f"{CONFIG}: [environment].tpu: no TPU is attached to the sandbox")

    # --- files
    has_solution = _check_script(root, SOLVE, chk, "", required=False)
    download = script_refs.follow(
        root, [SOLVE, TEST, *(f"steps/{n}/{f}" for n in steps for f in (SOLVE, TEST))], TASK_MOUNTS
    ).first_download()
    network, network_mode = _resolve_network(env, chk, relies_on_default=download[1] if download else None)
    docker_image = chk.string(env, "environment", "docker_image", nonempty=True)
    declared_workdir = chk.string(env, "environment", "workdir", nonempty=True)
    if declared_workdir is not None and not PurePosixPath(declared_workdir).is_absolute():
        chk.problem(
            CONFIG, "[environment].workdir", f"expected an absolute path, got {_show(declared_workdir)}"
        )

    environment_env = chk.string_table(env, "environment", "env")
    healthcheck = step_spec.parse_healthcheck(
        env.get("healthcheck"), "[environment].healthcheck", lambda f, m: chk.problem(CONFIG, f, m)
    )
    df = root / DOCKERFILE
    compose_info: compose_spec.ComposeInfo | None = None
    if (root / COMPOSE).is_file():
        compose_info, c_problems, c_warnings, c_unsupported = compose_spec.read_compose(
            root / "environment", environment_env
        )
        for message in c_problems:
            chk.problems.append(TaskProblem(COMPOSE, None, message.removeprefix(f"{COMPOSE}: ")))
        chk.warnings += c_warnings
        chk.unsupported += c_unsupported
        if not df.is_file() and docker_image is None:
            chk.unsupported.append(
                f"{COMPOSE}: services.main: the agent's service has no environment/Dockerfile to build "
                "(and [environment].docker_image is not set)"
            )
    elif not df.is_file() and docker_image is None:
        chk.problem(DOCKERFILE, None, "missing (and [environment].docker_image is not set)")
    workdir = declared_workdir
    if workdir is None and df.is_file():
        with contextlib.suppress(OSError):
            workdir = dockerfile_workdir(df.read_text(encoding="utf-8", errors="replace"))
    workdir_from_compose = False
    if workdir is None and compose_info is not None and compose_info.main_working_dir:
        workdir, workdir_from_compose = compose_info.main_working_dir, True
    step_specs = _read_step_specs(doc, steps, root, workdir or DEFAULT_WORKDIR, chk) if steps else []
    windows = isinstance(os_name, str) and os_name.lower() == "windows"
    if windows and not has_solution:
        has_solution = (root / "solution" / "solve.bat").is_file()
    if not steps and windows and (root / "tests" / "test.bat").is_file():
        pass  # Harbor's verifier of a Windows task (imported as unsupported: nothing here runs it)
    elif not steps:
        _check_script(root, TEST, chk, "the verifier that writes /logs/verifier/reward.txt", required=True)
        if not has_solution and not chk.problems:
            chk.warn(
                SOLVE, None, "missing: no reference solution, so the audit cannot prove the task solvable"
            )

    declared, verify_mode, verifier_net, artifact_problems, artifact_warnings = artifact_spec.parse(
        doc, workdir or DEFAULT_WORKDIR
    )
    for fld, problem in artifact_problems:
        chk.problem(CONFIG, fld, problem)
    service_artifacts, service_problems = artifact_spec.service_entries(doc.get("artifacts", []))
    for fld, problem in service_problems:
        chk.problem(CONFIG, fld, problem)
    collect = step_spec.parse_collect(
        verifier.get("collect"), "[verifier].collect", lambda f, m: chk.problem(CONFIG, f, m)
    )
    known_services = {compose_spec.MAIN, *(compose_info.names if compose_info is not None else [])}
    for where, service in [
        *(("artifacts", s) for s, _ in service_artifacts),
        *(("[verifier].collect", h.service) for h in collect),
        *(
            (f"[[steps]] {st.name}", s)
            for st in step_specs
            for s in [*(a for a, _ in st.service_artifacts), *(h.service for h in st.collect)]
        ),
    ]:
        if service not in known_services:
            chk.warn(
                CONFIG,
                where,
                f"service {service!r} is not a service of {COMPOSE}: nothing is collected from it (Harbor "
                "refuses to start such a trial)",
            )
    for fld, warning in artifact_warnings:
        chk.warn(CONFIG, fld, warning)

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
        workdir=workdir or DEFAULT_WORKDIR,
        workdir_declared=declared_workdir is not None or workdir_from_compose,
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
        unsupported=chk.unsupported,
        harbor_refusals=[f"{CONFIG}: {f}: {m}" for f, m in harbor_schema.harbor_refusals(doc)],
        steps=steps,
        step_specs=step_specs,
        reward_strategy=str(doc.get("multi_step_reward_strategy") or step_spec.MEAN),
        compose=compose_info,
        environment_env=environment_env,
        healthcheck=healthcheck,
        service_artifacts=service_artifacts,
        collect=collect,
        has_solution=has_solution if not steps else all(step_spec.has_solution_files(root, n) for n in steps),
        artifacts=declared,
        verify_mode=verify_mode,
        verifier_network=network if verifier_net is None else verifier_net,
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
