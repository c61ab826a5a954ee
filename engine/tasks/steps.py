"""Multi-step tasks (Harbor 0.25's ``[[steps]]``, schema 1.1): what each step asks for, as Harbor reads it.

A multi-step task runs its steps in order against one environment (the agent's container and its
services live through every step)::

    steps/<name>/instruction.md       the step's prompt
    steps/<name>/tests/               merged over the task's tests/ for this step's verifier
    steps/<name>/solution/solve.sh    the oracle's step (else the task's solution/)
    steps/<name>/workdir/             copied into the workdir before the step's agent runs
    steps/<name>/workdir/setup.sh     then run from the workdir (Harbor's reserved name)

and in ``task.toml`` each ``[[steps]]`` table may set ``[steps.agent] timeout_sec`` (else the task's),
``[steps.verifier] timeout_sec`` (Harbor's default 600 s, *not* the task's: Harbor's ``VerifierConfig``
default is a number), ``env`` (over the task's ``[verifier] env``), ``environment_mode``,
``min_reward`` (a number gates the ``reward`` key, a table each named key: below it, or missing, the
remaining steps are skipped), ``[steps.healthcheck]`` (Docker HEALTHCHECK semantics, after setup.sh and
before the agent) and ``artifacts`` (added to the task's for that step). The task's reward is Harbor's
``multi_step_reward_strategy``: ``mean`` (the default: per key, the mean over the steps that have a
verifier result, a missing key counting 0) or ``final`` (the last step's). :func:`aggregate` is that rule.

``TaskSpec.for_step`` (engine/tasks/taskdir.py) turns the task's spec into the spec one step runs with, so
the episode's phases (agent, capture, verifier) run a step exactly as they run a single-step task.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import artifacts as artifact_spec

__all__ = [
    "DEFAULT_STEP_VERIFIER_TIMEOUT_SEC",
    "CollectHook",
    "Healthcheck",
    "StepSpec",
    "aggregate",
    "below_min_reward",
    "has_solution_files",
    "parse_collect",
    "parse_healthcheck",
    "parse_step",
]

#: Harbor's ``VerifierConfig.timeout_sec`` default, which a step without its own timeout gets.
DEFAULT_STEP_VERIFIER_TIMEOUT_SEC = 600.0
MEAN, FINAL = "mean", "final"


@dataclass(frozen=True)
class Healthcheck:
    """Harbor's ``HealthcheckConfig`` (its defaults): a command polled until it exits 0."""

    command: str
    interval_sec: float = 5.0
    timeout_sec: float = 30.0
    start_period_sec: float = 0.0
    start_interval_sec: float = 5.0
    retries: int = 3


@dataclass(frozen=True)
class CollectHook:
    """Harbor's ``[[verifier.collect]]``: a command run in a compose service after the agent phase (before
    the verifier), to snapshot state into files an artifact then collects. Best effort, as in Harbor."""

    command: str
    service: str = "main"
    timeout_sec: float = 60.0


def parse_collect(raw: Any, where: str, problem: Any) -> list[CollectHook]:
    """A ``collect`` array of tables; ``problem(field, message)`` for each bad entry."""
    out: list[CollectHook] = []
    if raw is None:
        return out
    if not isinstance(raw, list):
        problem(where, f"expected an array of tables, got {raw!r}")
        return out
    for i, entry in enumerate(raw):
        command = entry.get("command") if isinstance(entry, dict) else None
        if not isinstance(command, str) or not command.strip():
            problem(f"{where}[{i}].command", f"expected a shell command, got {command!r}")
            continue
        service = entry.get("service", "main")
        timeout = entry.get("timeout_sec", 60.0)
        if not isinstance(service, str) or not service.strip():
            problem(f"{where}[{i}].service", f"expected a service name, got {service!r}")
            continue
        if not _number(timeout) or timeout <= 0:
            problem(f"{where}[{i}].timeout_sec", f"expected a number > 0, got {timeout!r}")
            continue
        out.append(CollectHook(command, service, float(timeout)))
    return out


@dataclass
class StepSpec:
    """One ``[[steps]]`` entry, resolved against the task's own settings."""

    name: str
    instruction: str = ""
    agent_timeout_sec: float | None = None  # None: the task's
    verifier_timeout_sec: float = DEFAULT_STEP_VERIFIER_TIMEOUT_SEC
    verifier_env: dict[str, str] = field(default_factory=dict)
    verify_mode: str = ""  # "" (the task's), clean_room or service (Harbor's separate / shared)
    min_reward: float | dict[str, float] | None = None
    healthcheck: Healthcheck | None = None
    artifacts: list[str] = field(default_factory=list)
    service_artifacts: list[tuple[str, str]] = field(default_factory=list)  # (service, absolute path)
    collect: list[CollectHook] = field(default_factory=list)

    def dir(self, root: Path) -> Path:
        return root / "steps" / self.name


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def parse_healthcheck(raw: Any, where: str, problem: Any) -> Healthcheck | None:
    """A ``[...healthcheck]`` table; ``problem(field, message)`` for each bad value."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        problem(where, f"expected a table with a command, got {raw!r}")
        return None
    command = raw.get("command")
    if not isinstance(command, str) or not command.strip():
        problem(f"{where}.command", f"expected a shell command, got {command!r}")
        return None
    values: dict[str, Any] = {}
    for key in ("interval_sec", "timeout_sec", "start_period_sec", "start_interval_sec"):
        if key in raw:
            if not _number(raw[key]) or raw[key] < 0:
                problem(f"{where}.{key}", f"expected a number >= 0, got {raw[key]!r}")
                continue
            values[key] = float(raw[key])
    if "retries" in raw:
        r = raw["retries"]
        if not isinstance(r, int) or isinstance(r, bool) or r < 1:
            problem(f"{where}.retries", f"expected an integer >= 1, got {r!r}")
        else:
            values["retries"] = r
    return Healthcheck(command=command, **values)


def parse_step(raw: dict[str, Any], index: int, root: Path, workdir: str, problem: Any) -> StepSpec | None:
    """One ``[[steps]]`` table (its name was checked by the caller); ``problem(field, message)``."""
    name = str(raw.get("name"))
    where = f"[[steps]][{index}]"
    step = StepSpec(name=name)
    agent = raw.get("agent", {})
    verifier = raw.get("verifier", {})
    for sec, table in (("agent", agent), ("verifier", verifier)):
        if not isinstance(table, dict):
            problem(f"{where}.{sec}", f"expected a table, got {table!r}")
    agent = agent if isinstance(agent, dict) else {}
    verifier = verifier if isinstance(verifier, dict) else {}
    if agent.get("timeout_sec") is not None:
        if not _number(agent["timeout_sec"]) or agent["timeout_sec"] <= 0:
            problem(f"{where}.agent.timeout_sec", f"expected a number > 0, got {agent['timeout_sec']!r}")
        else:
            step.agent_timeout_sec = float(agent["timeout_sec"])
    if verifier.get("timeout_sec") is not None:
        if not _number(verifier["timeout_sec"]) or verifier["timeout_sec"] <= 0:
            problem(
                f"{where}.verifier.timeout_sec", f"expected a number > 0, got {verifier['timeout_sec']!r}"
            )
        else:
            step.verifier_timeout_sec = float(verifier["timeout_sec"])
    env = verifier.get("env", {})
    if not isinstance(env, dict) or not all(isinstance(v, str) for v in env.values()):
        problem(f"{where}.verifier.env", f"expected a table of strings, got {env!r}")
    else:
        step.verifier_env = dict(env)
    mode = verifier.get("environment_mode")
    if mode is not None:
        if mode not in ("shared", "separate"):
            problem(f"{where}.verifier.environment_mode", f'expected "shared" or "separate", got {mode!r}')
        else:
            # as the task's own field reads (engine/tasks/artifacts.py): shared is the service mode
            step.verify_mode = artifact_spec.SERVICE if mode == "shared" else artifact_spec.CLEAN_ROOM
    mr = raw.get("min_reward")
    if mr is not None:
        if _number(mr):
            step.min_reward = float(mr)
        elif isinstance(mr, dict) and all(_number(v) for v in mr.values()):
            step.min_reward = {str(k): float(v) for k, v in mr.items()}
        else:
            problem(f"{where}.min_reward", f"expected a number or a table of numbers, got {mr!r}")
    step.healthcheck = parse_healthcheck(raw.get("healthcheck"), f"{where}.healthcheck", problem)
    declared, _mode, _net, problems, _warnings = artifact_spec.parse(
        {"artifacts": raw.get("artifacts", [])}, workdir
    )
    for fld, message in problems:
        problem(f"{where}.{fld}", message)
    step.artifacts = declared
    step.service_artifacts, service_problems = artifact_spec.service_entries(raw.get("artifacts", []))
    for fld, message in service_problems:
        problem(f"{where}.{fld}", message)
    step.collect = parse_collect(verifier.get("collect"), f"{where}.verifier.collect", problem)
    ins = step.dir(root) / "instruction.md"
    if ins.is_file():
        step.instruction = ins.read_text(encoding="utf-8", errors="replace")
    return step


def has_solution_files(root: Path, name: str) -> bool:
    """Harbor's oracle for a step: the step's ``solution/solve.sh``, else the task's."""
    return (root / "steps" / name / "solution" / "solve.sh").is_file() or (
        root / "solution" / "solve.sh"
    ).is_file()


def below_min_reward(rewards: dict[str, float] | None, min_reward: float | dict[str, float] | None) -> str:
    """Harbor's early stop: why the step's rewards are below its ``min_reward`` ('' when they are not). A
    missing key, or no rewards at all, counts as minus infinity."""
    if min_reward is None:
        return ""
    thresholds = {"reward": min_reward} if isinstance(min_reward, float | int) else min_reward
    for key, threshold in thresholds.items():
        actual = (rewards or {}).get(key, -math.inf)
        if actual < threshold:
            return f"{key}={actual:g} below min_reward {threshold:g}"
    return ""


def aggregate(strategy: str, step_rewards: list[dict[str, float] | None]) -> dict[str, float] | None:
    """The task's rewards from its steps', Harbor's rule (``trial._select_multi_step_reward``): ``final``
    is the last step's; ``mean`` is, per key, the mean over the steps with a verifier result (a key a step
    did not write counts 0 for it). None when no step has one."""
    if not step_rewards:
        return None
    if strategy == FINAL:
        return step_rewards[-1]
    valid = [r or {} for r in step_rewards if r is not None]
    keys = {k for r in valid for k in r}
    if not valid or not keys:
        return None
    return {k: sum(r.get(k, 0.0) for r in valid) / len(valid) for k in sorted(keys)}
