"""``bandpass import-jobs``: Harbor job directories in, as episodes calibration, replay and tagging use.

Most curators already ran their models with Harbor (``harbor run``). A job directory holds the job's
``config.json`` and ``result.json`` and one folder per *trial* (one attempt of one agent on one task)::

    <job>/config.json  result.json  job.log
    <job>/<task>__<id>/result.json  config.json  exception.txt  trial.log
                       agent/recording.cast  agent/trajectory.json  (when the agent wrote them)
                       verifier/reward.txt|reward.json  verifier/test-stdout.txt

Each trial becomes one finished episode:

- **task version**: the trial's task path (``config.task.path`` / ``task_id.path``), when it is a task
  directory (absolute, or relative to the job, its parent or grandparent — Harbor records the path it
  was run with), is imported by content hash, so the episode refers to exactly the files that ran. A path
  that is gone falls back to the task's latest version by ``task_name``, with a warning naming the trial.
- **agent**: ``agent_info.model_info.name`` (the model, which is what calibration is per), else the
  configured ``model_name``, else the agent's name (``oracle``, ``nop``).
- **outcome**: Harbor's ``exception_info.exception_type`` mapped to Bandpass codes (``EXCEPTION_CODES``);
  an unknown type is kept as ``infra_error:<Type>`` (not a sample: unknown is not evidence of failure) and
  listed, so the curator can see it and map it. Without an exception, the reward decides.
- **source** ``harbor:<job id>/<trial name>``: importing a job twice adds nothing.

A broken trial (unreadable ``result.json``, no task to attach to) is one clear error naming its file;
the other trials are imported. Secrets are masked in everything stored (errors, test output, casts).
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from engine.core.workspace import Workspace
from engine.generator.redact import Redactor
from engine.review import outcomes
from engine.tasks.importer import import_one
from engine.tasks.taskdir import find_task_dirs
from store import queries
from store.db import session

#: Harbor exception type -> Bandpass outcome. Agent timeouts and crashes are the policy's (valid failed
#: samples); environment, verifier and reward problems are infrastructure (no valid reward).
EXCEPTION_CODES: dict[str, str] = {
    "AgentTimeoutError": outcomes.agent_error("agent_timeout"),
    "NonZeroAgentExitCodeError": outcomes.agent_error("agent_crashed"),
    "ContextLengthExceededError": outcomes.agent_error("context_overflow"),
    "OutputLengthExceededError": outcomes.agent_error("parse_error"),
    "AgentSetupTimeoutError": outcomes.infra_error("env_start_timeout"),
    "EnvironmentStartTimeoutError": outcomes.infra_error("env_start_timeout"),
    "DockerStartupError": outcomes.infra_error("env_start_timeout"),
    "ImageBuildError": outcomes.infra_error("image_build_failed"),
    "BuildError": outcomes.infra_error("image_build_failed"),
    "VerifierTimeoutError": outcomes.infra_error("verifier_timeout"),
    "RewardFileNotFoundError": outcomes.infra_error("reward_missing"),
    "RewardFileEmptyError": outcomes.infra_error("reward_missing"),
    "VerifierOutputParseError": outcomes.infra_error("reward_missing"),
    "AddTestsDirError": outcomes.infra_error("orchestrator_failure"),
    "CopyTestsDirError": outcomes.infra_error("orchestrator_failure"),
    "DownloadVerifierDirError": outcomes.infra_error("orchestrator_failure"),
    "RateLimitError": outcomes.infra_error("rate_limited"),
    "CancelledError": outcomes.infra_error("cancelled"),
}
#: Stored text fields are capped: a verifier that prints megabytes must not bloat the database.
MAX_TEXT = 200_000


@dataclass
class TrialImport:
    trial: str  # <job dir name>/<trial dir name>
    status: str  # imported | unchanged | error
    episode_id: int | None = None
    task: str = ""
    agent: str = ""
    outcome: str = ""
    message: str = ""

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class JobsImport:
    jobs: list[str] = field(default_factory=list)
    trials: list[TrialImport] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unknown_exceptions: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)  # whole-directory problems (not a job at all)

    def count(self, status: str) -> int:
        return sum(1 for t in self.trials if t.status == status)

    @property
    def ok(self) -> bool:
        return not self.errors and self.count("error") == 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "jobs": self.jobs,
            "imported": self.count("imported"),
            "unchanged": self.count("unchanged"),
            "failed": self.count("error"),
            "trials": [t.as_dict() for t in self.trials],
            "warnings": self.warnings,
            "unknown_exceptions": self.unknown_exceptions,
            "errors": self.errors,
        }


class TrialError(ValueError):
    """One trial cannot be imported; the message names the file and what was expected."""


def _read_json(path: Path) -> Any:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise TrialError(f"{path}: missing") from None
    except json.JSONDecodeError as exc:
        raise TrialError(f"{path}: not valid JSON (line {exc.lineno}: {exc.msg})") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise TrialError(f"{path}: unreadable ({exc})") from None


def _get(d: Any, *keys: str) -> Any:
    for k in keys:
        if not isinstance(d, dict):
            return None
        d = d.get(k)
    return d


def is_job_dir(path: Path) -> bool:
    """A Harbor job: ``config.json`` or ``result.json`` beside trial folders that hold a ``result.json``
    or ``config.json`` of their own (a trial still running has only its config)."""
    if not path.is_dir() or not ((path / "config.json").is_file() or (path / "result.json").is_file()):
        return False
    return any(_is_trial_dir(p) for p in path.iterdir())


def _is_trial_dir(p: Path) -> bool:
    return p.is_dir() and ((p / "result.json").exists() or (p / "config.json").exists())


def find_job_dirs(root: Path) -> list[Path]:
    """``root`` itself when it is a job, else the jobs directly inside it (a ``jobs/`` folder)."""
    if is_job_dir(root):
        return [root]
    if not root.is_dir():
        return []
    return sorted(p for p in root.iterdir() if is_job_dir(p))


def _parse_time(value: Any) -> datetime | None:
    if not isinstance(value, str) or not value:
        return None
    try:
        t = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return t if t.tzinfo is not None else t.replace(tzinfo=UTC)  # Harbor writes naive local-less times


def reward_of(verifier_result: Any, verifier_dir: Path) -> float | None:
    """``verifier_result.rewards`` (``reward`` key, else a single value), else the reward files."""
    rewards = _get(verifier_result, "rewards")
    if isinstance(rewards, dict) and rewards:
        value = rewards.get("reward", next(iter(rewards.values())) if len(rewards) == 1 else None)
        if isinstance(value, int | float) and not isinstance(value, bool):
            return float(value)
    rj = verifier_dir / "reward.json"
    if rj.is_file():
        try:
            data = json.loads(rj.read_text())
            value = data.get("reward") if isinstance(data, dict) else data
            if isinstance(value, int | float) and not isinstance(value, bool):
                return float(value)
        except (json.JSONDecodeError, OSError):
            pass
    rt = verifier_dir / "reward.txt"
    if rt.is_file():
        try:
            return float(rt.read_text().strip())
        except (ValueError, OSError):
            pass
    return None


def outcome_of(exception_type: str | None, reward: float | None) -> tuple[str, bool]:
    """(outcome, known): ``known`` is False for an exception type without a mapping."""
    if exception_type:
        mapped = EXCEPTION_CODES.get(exception_type)
        if mapped is not None:
            return mapped, True
        return outcomes.infra_error(exception_type), False
    if reward is None:
        return outcomes.infra_error("reward_missing"), True
    return outcomes.from_reward(reward), True


def _steps_from_trajectory(path: Path, redact: Redactor) -> list[dict[str, Any]]:
    """ATIF ``trajectory.json`` agent steps as Bandpass step fields (reply, action, observation, tokens)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return []
    out: list[dict[str, Any]] = []
    for raw in data.get("steps", []) if isinstance(data, dict) else []:
        if not isinstance(raw, dict) or raw.get("source") != "agent":
            continue
        message = raw.get("message")
        reply = message if isinstance(message, str) else json.dumps(message, sort_keys=True)
        calls = raw.get("tool_calls") if isinstance(raw.get("tool_calls"), list) else []
        results = _get(raw, "observation", "results")
        obs = "\n".join(
            str(r.get("content", "")) for r in results if isinstance(r, dict)
        ) if isinstance(results, list) else ""  # fmt: skip
        metrics = raw.get("metrics") if isinstance(raw.get("metrics"), dict) else {}
        out.append(
            {
                "index": len(out),
                "raw_reply": redact.text(reply)[:MAX_TEXT],
                "action": {"tool_calls": calls, "reasoning": raw.get("reasoning_content") or ""},
                "observation": redact.text(obs)[:MAX_TEXT],
                "prompt_tokens": int(metrics.get("prompt_tokens") or 0),
                "completion_tokens": int(metrics.get("completion_tokens") or 0),
            }
        )
    return out


def _task_dir_candidates(task_path: str, job_dir: Path) -> list[Path]:
    p = Path(task_path)
    if p.is_absolute():
        return [p]
    return [job_dir / p, job_dir.parent / p, job_dir.parent.parent / p, Path.cwd() / p]


class _Importer:
    def __init__(self, ws: Workspace, result: JobsImport) -> None:
        self.ws = ws
        self.result = result
        self.redact = Redactor()
        self.unknown: Counter[str] = Counter()
        self.version_cache: dict[Path, int] = {}

    def version_for(self, trial: Path, job_dir: Path, res: dict[str, Any]) -> tuple[int, str]:
        task_path = _get(res, "config", "task", "path") or _get(res, "task_id", "path")
        task_name = res.get("task_name") or ""
        if isinstance(task_path, str) and task_path:
            for cand in _task_dir_candidates(task_path, job_dir):
                if (cand / "task.toml").is_file() or (cand / "task.yaml").is_file():
                    cand = cand.resolve()
                    if cand not in self.version_cache:
                        item = import_one(self.ws, cand)
                        if item.status == "invalid":
                            raise TrialError(
                                f"{trial.name}: task directory {cand} is invalid: {'; '.join(item.problems)}"
                            )
                        with session(self.ws.engine) as s:
                            v = queries.version_by_hash(s, item.version_hash)
                            assert v is not None
                            self.version_cache[cand] = int(v.id)  # type: ignore[arg-type]
                    vid = self.version_cache[cand]
                    with session(self.ws.engine) as s:
                        return vid, queries.task_name_of_version(s, vid) or task_name
        name = task_name or (Path(task_path).name if isinstance(task_path, str) else "")
        with session(self.ws.engine) as s:
            task = queries.get_task(s, name) if name else None
            v = queries.latest_version(s, int(task.id)) if task else None  # type: ignore[arg-type]
            if v is None:
                where = f" (task path {task_path!r} is not a task directory here)" if task_path else ""
                raise TrialError(
                    f"{trial.name}: task {name or '(unnamed)'!r} is not in the workspace{where}; "
                    "import the task first (bandpass import DIR)"
                )
            self.result.warnings.append(
                f"{job_dir.name}/{trial.name}: task directory {task_path or '(none)'} not found; attached "
                f"to the latest version of task {name!r} ({v.hash[:12]})"
            )
            return int(v.id), name  # type: ignore[arg-type]

    def trial(self, job_dir: Path, job_id: str, trial: Path, attempt: int) -> TrialImport:
        label = f"{job_dir.name}/{trial.name}"
        res = _read_json(trial / "result.json")
        if not isinstance(res, dict):
            raise TrialError(f"{trial / 'result.json'}: expected a JSON object (a Harbor trial result)")
        trial_name = str(res.get("trial_name") or trial.name)
        source = f"harbor:{job_id}/{trial_name}"
        with session(self.ws.engine) as s:
            existing = queries.episode_by_source(s, source)
        if existing is not None:
            return TrialImport(
                label, "unchanged", existing.id, outcome=existing.outcome, agent=existing.agent
            )
        agent = (
            _get(res, "agent_info", "model_info", "name")
            or _get(res, "config", "agent", "model_name")
            or _get(res, "agent_info", "name")
            or _get(res, "config", "agent", "name")
        )
        if not isinstance(agent, str) or not agent:
            raise TrialError(f"{trial / 'result.json'}: no agent_info.model_info.name nor agent name")
        vid, task_name = self.version_for(trial, job_dir, res)
        exc_type = _get(res, "exception_info", "exception_type")
        exc_msg = _get(res, "exception_info", "exception_message") or ""
        reward = reward_of(res.get("verifier_result"), trial / "verifier")
        outcome, known = outcome_of(exc_type if isinstance(exc_type, str) else None, reward)
        if not known:
            self.unknown[str(exc_type)] += 1
        error = ""
        if exc_type:
            error = f"harbor: {exc_type}: {exc_msg}"
            tb = trial / "exception.txt"
            if tb.is_file():
                error += "\n" + tb.read_text(errors="replace")
        verifier_out = ""
        so = trial / "verifier" / "test-stdout.txt"
        if so.is_file():
            verifier_out = so.read_text(errors="replace")
        steps = []
        traj = trial / "agent" / "trajectory.json"
        if traj.is_file():
            steps = _steps_from_trajectory(traj, self.redact)
        with session(self.ws.engine) as s:
            ep = queries.create_episode(s, vid, agent, attempt=attempt)
            ep.source = source
            ep.started_at = _parse_time(res.get("started_at"))
            eid = int(ep.id)  # type: ignore[arg-type]
            cast_rel = ""
            cast = trial / "agent" / "recording.cast"
            if cast.is_file():
                dest = self.ws.recordings_dir / f"episode-{eid}" / "agent.cast"
                dest.parent.mkdir(parents=True, exist_ok=True)
                text = cast.read_text(errors="replace")
                red = self.redact.text(text)
                if red == text:
                    shutil.copyfile(cast, dest)
                else:
                    dest.write_text(red)
                cast_rel = self.ws.rel(dest)
            queries.finish_episode(
                s,
                eid,
                outcome=outcome,
                reward=reward,
                error=self.redact.text(error)[:MAX_TEXT],
                agent_cast=cast_rel,
                verifier_output=self.redact.text(verifier_out)[:MAX_TEXT],
            )
            ep.ended_at = _parse_time(res.get("finished_at")) or ep.ended_at
            s.add(ep)
            for st in steps:
                queries.add_step(s, eid, st.pop("index"), **st)
        return TrialImport(label, "imported", eid, task_name, agent, outcome)

    def job(self, job_dir: Path) -> None:
        job_result: Any = {}
        if (job_dir / "result.json").is_file():
            try:
                job_result = _read_json(job_dir / "result.json")
            except TrialError as exc:
                self.result.warnings.append(f"{exc} (trials are read anyway)")
        job_id = str(_get(job_result, "id") or job_dir.name)
        self.result.jobs.append(str(job_dir))
        trials = sorted(p for p in job_dir.iterdir() if _is_trial_dir(p))
        for attempt, trial in enumerate(trials):
            label = f"{job_dir.name}/{trial.name}"
            if not (trial / "result.json").exists():
                self.result.trials.append(
                    TrialImport(
                        label, "error", message=f"{trial / 'result.json'}: missing (trial unfinished?)"
                    )
                )
                continue
            try:
                item = self.trial(job_dir, job_id, trial, attempt)
            except TrialError as exc:
                item = TrialImport(label, "error", message=str(exc))
            except Exception as exc:  # noqa: BLE001 - one odd trial must not stop the job's import
                item = TrialImport(label, "error", message=f"{trial}: {type(exc).__name__}: {exc}")
            self.result.trials.append(item)


def import_jobs(ws: Workspace, paths: list[Path]) -> JobsImport:
    """Imports every Harbor job found at ``paths`` (a job directory, or a folder of jobs)."""
    result = JobsImport()
    imp = _Importer(ws, result)
    for root in paths:
        root = Path(root)
        if not root.exists():
            result.errors.append(f"{root}: no such path")
            continue
        jobs = find_job_dirs(root)
        if not jobs:
            hint = " (it holds task directories: bandpass import)" if find_task_dirs(root) else ""
            result.errors.append(
                f"{root}: not a Harbor job directory (expected config.json or result.json beside trial "
                f"folders with result.json){hint}"
            )
            continue
        for job in jobs:
            imp.job(job)
    result.unknown_exceptions = dict(sorted(imp.unknown.items()))
    return result
