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
- **outcome**: Harbor 0.25's own exception policy (``engine/tasks/harbor_errors.py``): an exception that
  keeps the reward valid (the agent ran out of time, context or output, or refused) is a valid sample —
  passed if the verifier still gave 1, else ``agent_error:<code>``; any other exception voids the reward
  (``infra_error:<code>``, out of n); an unknown type is ``infra_error:<Type>`` and listed. A multi-step
  trial (``step_results``) is valid only when every step's exception is; its reward is the trial's, else
  the steps' by the task's ``multi_step_reward_strategy``. Without an exception, the reward decides.
- **usage**: ``agent_result`` (input, cached and output tokens, cost; the steps' summed for a multi-step
  trial) is kept with the episode.
- **source** ``harbor:<job id>/<trial name>``: importing a job twice adds nothing.

A broken trial (unreadable ``result.json``, no task to attach to) is one clear error naming its file;
the other trials are imported. Secrets are masked in everything stored (errors, test output, casts).
"""

from __future__ import annotations

import contextlib
import json
import math
import shutil
from collections import Counter
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.models import pk
from ..core.errors import BandpassError
from ..core.redact import Redactor
from ..core.workspace import Workspace
from . import rewards
from .harbor_errors import outcome_for
from .importer import import_one
from .taskdir import TaskInvalid, find_task_dirs, load_task

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
    usage: dict[str, Any] = field(default_factory=dict)  # agent_result's tokens and cost

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


class TrialError(BandpassError, ValueError):
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


def _dict(value: Any) -> dict[str, Any]:
    """``value`` if it is a JSON object, else an empty one (a field missing or of the wrong shape)."""
    return value if isinstance(value, dict) else {}


#: Files Harbor 0.25 writes into a job and each trial folder (a trial just started holds only lock.json).
_MARKERS = ("result.json", "config.json", "lock.json")


def is_job_dir(path: Path) -> bool:
    """A Harbor job: ``config.json``, ``result.json`` or ``lock.json`` beside trial folders that hold one
    of their own (a trial still running may hold only its ``lock.json``)."""
    if not path.is_dir() or not any((path / m).is_file() for m in _MARKERS):
        return False
    return any(_is_trial_dir(p) for p in path.iterdir())


def _is_trial_dir(p: Path) -> bool:
    return p.is_dir() and any((p / m).exists() for m in _MARKERS)


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


def rewards_of(
    verifier_result: Any, verifier_dir: Path, primary: str = ""
) -> tuple[float | None, dict[str, float]]:
    """(scalar, components) of a trial: Harbor's ``verifier_result.rewards`` (every key kept), else the
    reward files it left; the scalar by Bandpass's one rule (engine/tasks/rewards.py: ``"reward"``, a
    single key, ``reward.txt`` beside several keys, a declared primary)."""
    txt_path = verifier_dir / rewards.REWARD_TXT
    txt: float | None = None
    with contextlib.suppress(OSError, rewards.RewardFileError):
        txt = rewards.parse_txt(txt_path.read_bytes()) if txt_path.is_file() else None
    comps = _get(verifier_result, "rewards")
    if isinstance(comps, dict) and comps:
        kept = {
            str(k): float(v)
            for k, v in comps.items()
            if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(float(v))
        }
        if kept:
            return rewards.scalar_of(kept, txt, primary)[0], kept
    files = {}
    for name in rewards.REWARD_FILES:
        with contextlib.suppress(OSError):
            if (verifier_dir / name).is_file():
                files[name] = (verifier_dir / name).read_bytes()
    reading = rewards.read(files.get(rewards.REWARD_JSON), files.get(rewards.REWARD_TXT), primary=primary)
    if reading.reward is None and rewards.REWARD_JSON in files and txt is not None and not reading.components:
        return txt, {"reward": txt}  # a reward.json Harbor would refuse beside a readable reward.txt
    return reading.reward, reading.components


def reward_of(verifier_result: Any, verifier_dir: Path) -> float | None:
    """The scalar of :func:`rewards_of`."""
    return rewards_of(verifier_result, verifier_dir)[0]


def _exception_types(res: dict[str, Any]) -> list[str]:
    """The exception names a trial recorded: its own, then each step's (``step_results``)."""
    names = []
    for info in [res.get("exception_info"), *(_get(st, "exception_info") for st in _steps(res))]:
        t = _get(info, "exception_type")
        if isinstance(t, str) and t:
            names.append(t)
    return names


def _steps(res: dict[str, Any]) -> list[dict[str, Any]]:
    steps = res.get("step_results")
    return [st for st in steps if isinstance(st, dict)] if isinstance(steps, list) else []


def _step_reward(res: dict[str, Any], strategy: str) -> float | None:
    """A multi-step trial without a trial-level reward: its steps' by Harbor's strategy (``final``: the last
    step's; ``mean``: the mean over steps with a verifier result, a missing reward key counting 0)."""
    results = [_get(st, "verifier_result") for st in _steps(res)]
    results = [r for r in results if isinstance(r, dict)]
    if not results:
        return None
    vals = [reward_of(r, Path("/nonexistent")) or 0.0 for r in results]
    return vals[-1] if strategy == "final" else sum(vals) / len(vals)


def _job_stats_result(job_result: Any, trial_name: str) -> str | None:
    """The job-level verdict Harbor's traces exporter reads first: the exception type a trial is listed
    under in ``stats.evals.*.exception_stats``, else its reward bucket in ``reward_stats.reward``."""
    evals = _get(job_result, "stats", "evals")
    for data in evals.values() if isinstance(evals, dict) else []:
        if not isinstance(data, dict):
            continue
        for exc, entries in (data.get("exception_stats") or {}).items():
            if isinstance(entries, list) and trial_name in entries:
                return str(exc)
        for value, entries in (_get(data, "reward_stats", "reward") or {}).items():
            if isinstance(entries, list) and trial_name in entries:
                return str(_reward_text(value))  # a JSON object's key: text either way
    return None


def _reward_text(value: Any) -> object:
    """A reward as Harbor's exporter writes it: a number as its float's text, anything else as it is."""
    try:
        return str(float(value))
    except (TypeError, ValueError):
        return value


def trace_metadata(res: dict[str, Any], job_result: Any, trial_dir_name: str) -> dict[str, Any]:
    """What Harbor 0.25's traces exporter takes from a trial (``_normalize_run_metadata`` and
    ``_extract_trial_result_value``): agent, model, provider, run, date, task, trial and ``result`` — the
    exception type when there is one, else the reward as text."""
    config = _dict(res.get("config"))
    agent_cfg = _dict(config.get("agent"))
    info = _dict(res.get("agent_info"))
    model_info = _dict(info.get("model_info"))
    trial_name = res.get("trial_name") or config.get("trial_name") or "unknown-trial"
    result = _job_stats_result(job_result, trial_dir_name)
    if result is None:
        exc = _get(res, "exception_info", "exception_type")
        reward = _get(res, "verifier_result", "rewards", "reward")
        result = str(exc) if exc else (str(_reward_text(reward)) if reward is not None else None)
    return {
        "agent": agent_cfg.get("name") or info.get("name") or config.get("agent_name") or "unknown-agent",
        "model": model_info.get("name") or agent_cfg.get("model_name") or info.get("model_name")
        or config.get("engine") or "unknown-model",
        "model_provider": model_info.get("provider") or agent_cfg.get("provider") or info.get("provider")
        or config.get("engine") or "unknown-provider",
        "run_id": config.get("job_id") or config.get("job_name") or res.get("job_id") or res.get("run_id")
        or res.get("trial_name") or "unknown-run",
        "date": res.get("started_at") or res.get("startedAt") or "",
        "task": res.get("task_name") or config.get("task_name") or "unknown-task",
        "trial_name": trial_name,
        "result": result,
    }  # fmt: skip


def usage_of(res: dict[str, Any]) -> dict[str, Any]:
    """``agent_result``'s tokens and cost (Harbor's ``n_input_tokens`` includes the cached ones), summed
    over the steps of a multi-step trial, whose trial-level ``agent_result`` is null."""
    parts: list[dict[str, Any]] = [res["agent_result"]] if isinstance(res.get("agent_result"), dict) else []
    parts += [st["agent_result"] for st in _steps(res) if isinstance(st.get("agent_result"), dict)]
    if not parts:
        return {}
    out: dict[str, Any] = {"n_input_tokens": 0, "n_cache_tokens": 0, "n_output_tokens": 0, "cost_usd": None}
    for part in parts:
        for key in ("n_input_tokens", "n_cache_tokens", "n_output_tokens"):
            v = part.get(key)
            if isinstance(v, int | float) and not isinstance(v, bool):
                out[key] += int(v)
        c = part.get("cost_usd")
        if isinstance(c, int | float) and not isinstance(c, bool):
            out["cost_usd"] = (out["cost_usd"] or 0.0) + float(c)
        if isinstance(part.get("model_usage"), dict):
            out.setdefault("model_usage", {}).update(part["model_usage"])
    if len(parts) > 1:
        out["steps"] = len(parts)
    return out


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
        metrics = _dict(raw.get("metrics"))
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
        self._primaries: dict[int, str] = {}  # version id -> declared primary reward key
        self.ws = ws
        self.result = result
        self.redact = Redactor()
        self.unknown: Counter[str] = Counter()
        self.version_cache: dict[Path, int] = {}

    def keep_trajectories(self, trial: Path, episode_id: int) -> list[str]:
        """The trial's ATIF trajectory and its continuations, copied (secrets masked) beside the episode's
        recording: Harbor's traces exporter reads them, and so does ``export --format traces``."""
        agent_dir = trial / "agent"
        chain: list[Path] = []
        current = agent_dir / "trajectory.json"
        while current.is_file() and current not in chain and len(chain) < 100:
            chain.append(current)
            try:
                ref = json.loads(current.read_text(encoding="utf-8")).get("continued_trajectory_ref")
            except (OSError, UnicodeDecodeError, json.JSONDecodeError, AttributeError):
                break
            if not isinstance(ref, str) or not ref:
                break
            current = agent_dir / ref
        kept = []
        for i, src in enumerate(chain):
            dest = self.ws.recordings_dir / f"episode-{episode_id}" / f"trajectory-{i}.json"
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_text(self.redact.text(src.read_text(encoding="utf-8", errors="replace")))
            kept.append(self.ws.rel(dest))
        return kept

    def primary_of(self, version_id: int) -> str:
        """The reward key the task (``[metadata.bandpass] primary_reward``) or the curator declared."""
        if version_id not in self._primaries:
            self._primaries[version_id] = self._primary(version_id)
        return self._primaries[version_id]

    def _primary(self, version_id: int) -> str:
        with session(self.ws.engine) as s:
            v = queries.get_version(s, version_id)
        try:
            spec = load_task(self.ws.abs(v.path)) if v is not None else None
        except TaskInvalid:
            spec = None
        own = rewards.declared(spec.metadata)[0].primary if spec is not None else ""
        return own or (self.ws.config.rewards.primary.get(spec.name, "") if spec is not None else "")

    def strategy_of(self, version_id: int) -> str:
        """The task's ``multi_step_reward_strategy`` (Harbor's default on a multi-step task: mean)."""
        with session(self.ws.engine) as s:
            v = queries.get_version(s, version_id)
        try:
            raw = load_task(self.ws.abs(v.path)).raw if v is not None else {}
        except TaskInvalid:
            raw = {}
        return "final" if raw.get("multi_step_reward_strategy") == "final" else "mean"

    def version_for(self, trial: Path, job_dir: Path, res: dict[str, Any]) -> tuple[int, str]:
        task_path = _get(res, "config", "task", "path") or _get(res, "task_id", "path")
        task_name = res.get("task_name") or ""
        if isinstance(task_path, str) and task_path:
            for cand in _task_dir_candidates(task_path, job_dir):
                if (cand / "task.toml").is_file() or (cand / "task.yaml").is_file():
                    cand = cand.resolve()
                    if cand not in self.version_cache:
                        # the trial ran this task: a known name is this task's (next) version
                        item = import_one(self.ws, cand, new_version=True)
                        if item.status in ("invalid", "conflict"):
                            raise TrialError(
                                f"{trial.name}: task directory {cand} is invalid: {'; '.join(item.problems)}"
                            )
                        with session(self.ws.engine) as s:
                            v = queries.version_by_hash(s, item.version_hash)
                            assert v is not None
                            self.version_cache[cand] = pk(v)
                    vid = self.version_cache[cand]
                    with session(self.ws.engine) as s:
                        return vid, queries.task_name_of_version(s, vid) or task_name
        name = task_name or (Path(task_path).name if isinstance(task_path, str) else "")
        with session(self.ws.engine) as s:
            task = queries.get_task(s, name) if name else None
            v = queries.latest_version(s, pk(task)) if task else None
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
            return pk(v), name

    def trial(
        self, job_dir: Path, job_id: str, trial: Path, attempt: int, job_result: Any = None
    ) -> TrialImport:
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
        exc_types = _exception_types(res)
        reward, components = rewards_of(res.get("verifier_result"), trial / "verifier", self.primary_of(vid))
        if reward is None and _steps(res):
            reward = _step_reward(res, self.strategy_of(vid))
        outcome, unknown = outcome_for(exc_types, reward)
        for name in unknown:
            self.unknown[name] += 1
        error = ""
        for info in [res.get("exception_info"), *(_get(st, "exception_info") for st in _steps(res))]:
            if isinstance(_get(info, "exception_type"), str):
                error += f"harbor: {info['exception_type']}: {_get(info, 'exception_message') or ''}\n"
        if error:
            tb = trial / "exception.txt"
            if tb.is_file():
                error += tb.read_text(errors="replace")
        usage = usage_of(res)
        verifier_out = ""
        so = trial / "verifier" / "test-stdout.txt"
        if so.is_file():
            verifier_out = so.read_text(errors="replace")
        steps: list[dict[str, Any]] = []
        trajectories = [trial / "agent" / "trajectory.json"]
        trajectories += sorted((trial / "steps").glob("*/agent/trajectory.json"))
        for traj in trajectories:
            if traj.is_file():
                for st in _steps_from_trajectory(traj, self.redact):
                    steps.append({**st, "index": len(steps)})
        with session(self.ws.engine) as s:
            ep = queries.create_episode(s, vid, agent, attempt=attempt)
            ep.source = source
            ep.started_at = _parse_time(res.get("started_at"))
            eid = pk(ep)
            harbor = trace_metadata(res, job_result, trial.name)
            harbor["trajectories"] = self.keep_trajectories(trial, eid)
            ep.imported_json = json.dumps({"usage": usage, "harbor": harbor}, sort_keys=True)
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
            queries.set_episode_rewards(s, eid, components, None)
            ep.ended_at = _parse_time(res.get("finished_at")) or ep.ended_at
            s.add(ep)
            for st in steps:
                queries.add_step(s, eid, st.pop("index"), **st)
        return TrialImport(label, "imported", eid, task_name, agent, outcome, usage=usage)

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
            if not (trial / "result.json").exists():  # running, or never started: its lock.json alone
                self.result.trials.append(
                    TrialImport(
                        label, "error", message=f"{trial / 'result.json'}: missing (trial unfinished?)"
                    )
                )
                continue
            try:
                item = self.trial(job_dir, job_id, trial, attempt, job_result)
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
