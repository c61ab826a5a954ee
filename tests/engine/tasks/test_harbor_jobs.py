"""`bandpass import-jobs`: Harbor job directories (job config/result, trial folders with result.json,
agent/recording.cast, agent/trajectory.json, verifier/reward.*, exception.txt) become episodes.

The trees are written here in Harbor's layout, broken trials included; nothing is mocked.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

import bandpass.tui.commands.jobs  # registers `import-jobs`
import bandpass.tui.commands.replay
import bandpass.tui.commands.report  # registers `report`
import bandpass.tui.commands.tagging  # noqa: F401 - registers `tag`
from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.tui.cli import app
from tests.support.calib_data import add_task, instruction_for, write_task_dir

MODEL = "qwen3-8b"
SECRET = "sk-ant-api03-" + "Z" * 40
JOB_ID = "6f1c0d2e-0000-4000-8000-00000000a001"


def _cli(ws: Workspace, *args: str) -> Result:
    return CliRunner().invoke(app, ["--workspace", str(ws.root), *args])


def _trial(
    job: Path,
    name: str,
    task: str,
    task_path: str,
    *,
    reward: float | None = None,
    exception: str | None = None,
    cast: str | None = None,
    trajectory: dict[str, Any] | None = None,
    stdout: str | None = None,
    traceback: str = "",
    model: str | None = MODEL,
) -> Path:
    d = job / name
    (d / "agent").mkdir(parents=True)
    (d / "verifier").mkdir()
    agent = {"name": "terminus-2", "model_name": f"hosted_vllm/{model}"} if model else {"name": "oracle"}
    config = {"task": {"path": task_path}, "trial_name": name, "agent": agent}
    (d / "config.json").write_text(json.dumps(config))
    result: dict[str, Any] = {
        "id": f"00000000-0000-4000-8000-{abs(hash(name)) % 10**12:012d}",
        "task_name": task,
        "trial_name": name,
        "trial_uri": f"file://{d}",
        "task_id": {"path": task_path},
        "task_checksum": "0" * 64,
        "config": config,
        "agent_info": {
            "name": agent["name"],
            "version": "2.0.0",
            "model_info": {"name": model, "provider": "hosted_vllm"} if model else None,
        },
        "agent_result": {"n_input_tokens": 1200, "n_output_tokens": 300},
        "verifier_result": {"rewards": {"reward": reward}} if reward is not None else None,
        "exception_info": (
            {
                "exception_type": exception,
                "exception_message": f"{exception} happened",
                "exception_traceback": "Traceback ...",
                "occurred_at": "2025-11-02T10:00:05",
            }
            if exception
            else None
        ),
        "started_at": "2025-11-02T10:00:00",
        "finished_at": "2025-11-02T10:00:30",
    }
    (d / "result.json").write_text(json.dumps(result, indent=4))
    if reward is not None:
        (d / "verifier" / "reward.txt").write_text(f"{reward}\n")
    if exception:
        (d / "exception.txt").write_text(traceback or f"Traceback (most recent call last):\n{exception}\n")
    if cast is not None:
        (d / "agent" / "recording.cast").write_text(cast)
    if trajectory is not None:
        (d / "agent" / "trajectory.json").write_text(json.dumps(trajectory))
    if stdout is not None:
        (d / "verifier" / "test-stdout.txt").write_text(stdout)
    return d


CAST = (
    json.dumps({"version": 2, "width": 80, "height": 24, "timestamp": 1762077600})
    + "\n"
    + json.dumps([0.5, "o", "$ echo hello from harbor\r\nhello from harbor\r\n"])
    + "\n"
    + json.dumps([2.0, "o", "$ "])
    + "\n"
)
TRAJECTORY = {
    "schema_version": "ATIF-v1.4",
    "session_id": "s1",
    "agent": {"name": "terminus-2", "version": "2.0.0", "model_name": MODEL},
    "steps": [
        {"step_id": 1, "source": "system", "message": "You are an agent."},
        {"step_id": 2, "source": "user", "message": "Create alpha.txt"},
        {
            "step_id": 3,
            "source": "agent",
            "message": "I will write the file.",
            "tool_calls": [
                {"tool_call_id": "c1", "function_name": "bash", "arguments": {"keystrokes": "echo alpha\n"}}
            ],
            "observation": {"results": [{"source_call_id": "c1", "content": "alpha"}]},
            "metrics": {"prompt_tokens": 900, "completion_tokens": 40},
        },
        {"step_id": 4, "source": "agent", "message": "Done.", "metrics": {"prompt_tokens": 950}},
    ],
}


@pytest.fixture
def harbor_root(tmp_path: Path, workspace: Workspace) -> Path:
    """A Harbor working folder: tasks/ and jobs/<job>/ with good and broken trials."""
    root = tmp_path / "harbor-work"
    write_task_dir(root / "tasks" / "alpha", "alpha", instruction_for("alpha"))
    add_task(workspace, "beta")  # known to the workspace by name only
    job = root / "jobs" / "2025-11-02__10-00-00"
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": job.name, "n_attempts": 1}))
    (job / "result.json").write_text(json.dumps({"id": JOB_ID, "n_total_trials": 10, "stats": {}}))
    a = "tasks/alpha"
    _trial(job, "alpha__pass001", "alpha", a, reward=1.0, cast=CAST, trajectory=TRAJECTORY,
           stdout="1 passed in 0.01s\n")  # fmt: skip
    _trial(job, "alpha__fail002", "alpha", a, reward=0.0, stdout="1 failed\n")
    _trial(job, "alpha__tout003", "alpha", a, reward=0.0, exception="AgentTimeoutError")
    _trial(job, "alpha__rwd0004", "alpha", a, exception="RewardFileNotFoundError",
           traceback=f"FileNotFoundError: reward.txt (api key {SECRET})\n")  # fmt: skip
    _trial(job, "alpha__envs005", "alpha", a, exception="EnvironmentStartTimeoutError")
    _trial(job, "alpha__weird06", "alpha", a, exception="WeirdHarborError")
    _trial(job, "beta__byname07", "beta", "/gone/datasets/beta", reward=1.0)
    _trial(job, "oracle__run0008", "alpha", a, reward=1.0, model=None)
    bad = _trial(job, "alpha__badjs09", "alpha", a, reward=1.0)
    (bad / "result.json").write_text('{"task_name": "alpha", "trial_name": ')
    _trial(job, "gamma__notask10", "gamma", "/gone/gamma", reward=1.0)
    running = job / "alpha__running11"
    running.mkdir()
    (running / "config.json").write_text("{}")
    return root


def test_import_jobs_maps_trials_to_episodes(workspace: Workspace, harbor_root: Path) -> None:
    ws = workspace
    r = _cli(ws, "import-jobs", str(harbor_root / "jobs"), "--json")
    assert r.exit_code == 1, r.output  # broken trials: reported, the rest imported
    assert r.exception is None or isinstance(r.exception, SystemExit), repr(r.exception)
    d = json.loads(r.stdout)
    by = {t["trial"].split("/", 1)[1]: t for t in d["trials"]}
    assert {k: v["outcome"] for k, v in by.items() if v["status"] == "imported"} == {
        "alpha__pass001": "passed",
        "alpha__fail002": "failed",
        "alpha__tout003": "agent_error:agent_timeout",
        "alpha__rwd0004": "infra_error:reward_missing",
        "alpha__envs005": "infra_error:env_start_timeout",
        "alpha__weird06": "infra_error:WeirdHarborError",
        "beta__byname07": "passed",
        "oracle__run0008": "passed",
    }
    assert by["oracle__run0008"]["agent"] == "oracle"  # no model: the agent's name
    assert by["alpha__pass001"]["agent"] == MODEL
    errors = {k: v["message"] for k, v in by.items() if v["status"] == "error"}
    assert set(errors) == {"alpha__badjs09", "gamma__notask10", "alpha__running11"}
    assert errors["alpha__badjs09"].endswith(
        "alpha__badjs09/result.json: not valid JSON (line 1: Expecting value)"
    )
    assert "task 'gamma' is not in the workspace" in errors["gamma__notask10"]
    assert "/gone/gamma" in errors["gamma__notask10"]
    assert errors["alpha__running11"].endswith("result.json: missing (trial unfinished?)")
    assert d["unknown_exceptions"] == {"WeirdHarborError": 1}
    (warning,) = d["warnings"]
    assert "beta__byname07" in warning and "latest version of task 'beta'" in warning

    with session(ws.engine) as s:
        rows = {r.name: r for r in queries.task_rows(s)}
        assert set(rows) == {"alpha", "beta"}  # alpha imported from the trial's task path
        eps = {e.source.rsplit("/", 1)[1]: e for e in queries.episodes(s) if e.source}
        p = eps["alpha__pass001"]
        assert p.source == f"harbor:{JOB_ID}/alpha__pass001" and p.reward == 1.0
        assert p.verifier_output == "1 passed in 0.01s\n"
        steps = queries.steps(s, p.id)  # type: ignore[arg-type]
        assert [st.raw_reply for st in steps] == ["I will write the file.", "Done."]
        assert steps[0].observation == "alpha" and steps[0].prompt_tokens == 900
        assert eps["alpha__tout003"].reward == 0.0  # evidence kept; the outcome says agent_error
        rwd = eps["alpha__rwd0004"]
        assert (
            "RewardFileNotFoundError" in rwd.error and SECRET not in rwd.error and "[REDACTED]" in rwd.error
        )
    assert (ws.root / p.agent_cast).read_text() == CAST
    for f in ws.root.glob("bandpass.db*"):
        assert SECRET.encode() not in f.read_bytes()

    # Replay and calibration work on imported episodes.
    rp = _cli(ws, "replay", str(p.id), "--print-at", "1")
    assert rp.exit_code == 0 and "hello from harbor" in rp.output
    rep = json.loads(_cli(ws, "report", "--model", MODEL, "--json").stdout)
    alpha = {row["task"]: row for row in rep["per_task"]}["alpha"]
    # passed, failed, agent timeout = 3 samples; reward_missing, env start, unknown = 3 infra errors
    assert (alpha["n"], alpha["c"], alpha["infra_errors"]) == (3, 1, 3)

    # Tagging works too: a blocking tag on an imported episode keeps its task out of exports.
    tout = eps["alpha__tout003"]
    tg = _cli(ws, "tag", str(tout.id), "invalidity.underspecified_instruction")
    assert tg.exit_code == 0, tg.output
    rep = json.loads(_cli(ws, "report", "--model", MODEL, "--json").stdout)
    gates = {row["task"]: row["failed_gates"] for row in rep["task_estimates"]}
    assert "blocking_tag:1" in gates["alpha"]

    # Importing the same job again adds nothing.
    with session(ws.engine) as s:
        before = len(queries.episodes(s))
    again = json.loads(
        _cli(ws, "import-jobs", str(harbor_root / "jobs" / "2025-11-02__10-00-00"), "--json").stdout
    )
    assert again["imported"] == 0 and again["unchanged"] == 8
    with session(ws.engine) as s:
        assert len(queries.episodes(s)) == before


def test_import_jobs_text_output_and_not_a_job(
    workspace: Workspace, harbor_root: Path, tmp_path: Path
) -> None:
    r = _cli(workspace, "import-jobs", str(harbor_root / "jobs"))
    assert "1 job: 8 trials imported, 0 already there, 3 failed" in r.stdout
    assert (
        "unknown Harbor exception types kept as infra_error:<Type> (not samples): WeirdHarborError ×1"
        in r.output
    )
    r = _cli(workspace, "import-jobs", str(harbor_root / "tasks"))
    assert r.exit_code == 1
    assert "not a Harbor job directory" in r.output and "bandpass import" in r.output
    r = _cli(workspace, "import-jobs", str(tmp_path / "nope"))
    assert r.exit_code == 1 and "no such path" in r.output


# --- Harbor 0.25's exception policy, agent_result, step_results, a job just started --------------------


def _job(root: Path, name: str = "2025-11-03__09-00-00") -> Path:
    write_task_dir(root / "tasks" / "alpha", "alpha", instruction_for("alpha"))
    job = root / "jobs" / name
    job.mkdir(parents=True)
    (job / "config.json").write_text(json.dumps({"job_name": job.name}))
    return job


def test_reward_valid_exceptions_stay_in_n(workspace: Workspace, tmp_path: Path) -> None:
    """Harbor keeps the reward of a trial whose agent ran out of budget or refused; every other exception
    voids it (NonZeroAgentExitCodeError too, whatever the verifier said)."""
    job = _job(tmp_path / "h")
    a = "tasks/alpha"
    _trial(job, "alpha__ctxw001", "alpha", a, reward=0.0, exception="ContextWindowExceededError")
    _trial(job, "alpha__tout002", "alpha", a, reward=1.0, exception="AgentTimeoutError")
    _trial(job, "alpha__refu003", "alpha", a, exception="AgentSafetyRefusalError")
    _trial(job, "alpha__otok004", "alpha", a, reward=0.0, exception="OutputTokenExceededError")
    _trial(job, "alpha__crsh005", "alpha", a, reward=1.0, exception="NonZeroAgentExitCodeError")
    _trial(job, "alpha__sbld006", "alpha", a, exception="SandboxBuildFailedError")
    _trial(job, "alpha__rate007", "alpha", a, exception="ApiRateLimitError")
    r = _cli(workspace, "import-jobs", str(job), "--json")
    assert r.exit_code == 0, r.output
    by = {t["trial"].split("/", 1)[1]: t["outcome"] for t in json.loads(r.stdout)["trials"]}
    assert by == {
        "alpha__ctxw001": "agent_error:context_overflow",
        "alpha__tout002": "passed",  # the verifier gave 1 after the timeout: Harbor's reward stands
        "alpha__refu003": "agent_error:refused",
        "alpha__otok004": "agent_error:output_limit",
        "alpha__crsh005": "infra_error:agent_crashed",
        "alpha__sbld006": "infra_error:image_build_failed",
        "alpha__rate007": "infra_error:rate_limited",
    }
    r = _cli(workspace, "report", "--model", MODEL, "--json")
    (task,) = json.loads(r.stdout)["per_task"]
    assert (task["n"], task["c"], task["infra_errors"]) == (4, 1, 3)  # the four reward-valid trials are n


def test_step_results_usage_and_a_job_just_started(workspace: Workspace, tmp_path: Path) -> None:
    job = _job(tmp_path / "h")
    (job / "config.json").unlink()
    (job / "lock.json").write_text(json.dumps({"schema_version": 3, "trials": []}))
    d = _trial(job, "alpha__multi01", "alpha", "tasks/alpha")
    res = json.loads((d / "result.json").read_text())
    res["agent_result"] = None
    res["verifier_result"] = None
    res["step_results"] = [
        {
            "step_name": "one",
            "agent_result": {
                "n_input_tokens": 100,
                "n_cache_tokens": 40,
                "n_output_tokens": 10,
                "cost_usd": 0.01,
            },
            "verifier_result": {"rewards": {"reward": 1.0}},
            "exception_info": None,
        },
        {
            "step_name": "two",
            "agent_result": {"n_input_tokens": 200, "n_output_tokens": 20, "cost_usd": 0.02},
            "verifier_result": {"rewards": {"reward": 0.0}},
            "exception_info": {"exception_type": "AgentTimeoutError", "exception_message": "step two"},
        },
    ]
    (d / "result.json").write_text(json.dumps(res))
    started = job / "alpha__start02"
    started.mkdir()
    (started / "lock.json").write_text(json.dumps({"task": {"name": "alpha"}}))
    r = _cli(workspace, "import-jobs", str(job), "--json")
    assert r.exit_code == 1  # the trial that has only its lock.json is reported, the other imported
    trials = {t["trial"].split("/", 1)[1]: t for t in json.loads(r.stdout)["trials"]}
    multi = trials["alpha__multi01"]
    # mean over the steps (Harbor's default strategy); the step's timeout keeps the reward valid
    assert multi["outcome"] == "agent_error:agent_timeout"
    assert multi["usage"] == {
        "n_input_tokens": 300,
        "n_cache_tokens": 40,
        "n_output_tokens": 30,
        "cost_usd": pytest.approx(0.03),
        "steps": 2,
    }
    assert trials["alpha__start02"]["message"].endswith(
        "alpha__start02/result.json: missing (trial unfinished?)"
    )
    with session(workspace.engine) as s:
        ep = queries.get_episode(s, multi["episode_id"])
        assert ep is not None and ep.reward == 0.5
        assert json.loads(ep.imported_json)["usage"]["n_output_tokens"] == 30
        assert "harbor: AgentTimeoutError: step two" in ep.error
