"""The differential test: Harbor 0.25's own loader is the reference, run for real from ``.venv-harbor``.

Every task Bandpass writes — the examples it ships, what its generator is told to write, what its
Terminal-Bench converter writes, what ``export`` writes — must load in Harbor; every task Harbor ships or
``harbor task init`` writes must import into Bandpass; and for a table of hand-made task.toml variants, a
task Harbor accepts imports into Bandpass while a task Harbor refuses is refused by Bandpass or flagged as
one it must never write (``TaskSpec.harbor_refusals``).

``scripts/test`` creates ``.venv-harbor`` (``scripts/setup-harbor.sh``); without it these tests fail with
the command to run, they are never skipped.
"""

from __future__ import annotations

import ast
import json
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import bandpass.tui.commands.export  # noqa: F401 - registers `export` on tui.cli.app
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.tasks.importer import import_paths
from bandpass.engine.tasks.taskdir import find_task_dirs, load_task
from bandpass.engine.tasks.tb1 import convert_tb1
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.tui.cli import app
from tests.support.calib_data import add_episodes, outcomes
from tests.support.generated_task import TASK_TOML as GENERATOR_TEST_TOML
from tests.support.paths import FIXTURES, REPO

# Slow (Harbor in .venv-harbor, a process per check): the full suite runs it, `scripts/test --fast` does not.
pytestmark = pytest.mark.slow

HARBOR_PY = REPO / ".venv-harbor" / "bin" / "python"
HARBOR_REF = REPO / "tests" / "support" / "harbor_ref.py"
EXAMPLES = REPO / "examples" / "tasks"
TB1_FIXTURE = FIXTURES / "tb1" / "hello-world"
SAMPLE_TASKS = sorted((REPO / "recordings" / "samples" / "generations").glob("*/task"))


def _harbor(*args: str, stdin: str = "") -> str:
    if not HARBOR_PY.is_file():
        pytest.fail(f"{HARBOR_PY} is missing: run `bash scripts/setup-harbor.sh` (scripts/test does)")
    res = subprocess.run(
        [str(HARBOR_PY), str(HARBOR_REF), *args], input=stdin, capture_output=True, text=True, timeout=600
    )
    assert res.returncode == 0, res.stderr[-3000:]
    return res.stdout


def harbor_load(dirs: list[Path]) -> dict[Path, str]:
    """Harbor's verdict on each directory: "ok" or its exception."""
    out = json.loads(_harbor("load", stdin="\n".join(str(d) for d in dirs)))
    return {Path(k): v for k, v in out.items()}


def assert_harbor_loads(dirs: list[Path]) -> None:
    assert dirs
    refused = {str(d): why for d, why in harbor_load(dirs).items() if why != "ok"}
    assert refused == {}


def write_task(root: Path, toml: str, **files: str | None) -> Path:
    content: dict[str, str | None] = {
        "instruction.md": "Write 42 into /app/answer.txt.\n",
        "task.toml": toml,
        "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /app\n",
        "solution/solve.sh": "#!/bin/bash\necho 42 > /app/answer.txt\n",
        "tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    }
    content.update({k.replace("__", "/"): v for k, v in files.items()})
    for rel, text in content.items():
        if text is not None:
            p = root / rel
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(text)
    return root


# --- what Bandpass writes loads in Harbor --------------------------------------------------------------


def test_shipped_examples_load_in_harbor() -> None:
    assert_harbor_loads(find_task_dirs(EXAMPLES))


def test_shipped_generation_samples_load_in_harbor() -> None:
    assert_harbor_loads(SAMPLE_TASKS)


def _generator_prompt_tomls() -> list[str]:
    """The task.toml every generator prompt version tells the model to write, as written there."""
    out = []
    for system in sorted((REPO / "engine" / "prompts" / "generator").glob("*/system.md")):
        m = re.search(r"```toml\n(.*?)```", system.read_text(), re.S)
        assert m, system
        out.append("\n".join(line[2:] for line in m.group(1).splitlines()))
    return out


def _record_samples_toml() -> str:
    tree = ast.parse((REPO / "scripts" / "record_samples.py").read_text())
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") == "GEN_TOML" for t in node.targets):
            toml: str = ast.literal_eval(node.value)
            return toml
    raise AssertionError("GEN_TOML not found in scripts/record_samples.py")


def test_what_the_generator_writes_loads_in_harbor(tmp_path: Path) -> None:
    tomls = [*_generator_prompt_tomls(), _record_samples_toml(), GENERATOR_TEST_TOML]
    assert len(tomls) >= 4
    dirs = [write_task(tmp_path / f"t{i}", toml) for i, toml in enumerate(tomls)]
    for d in dirs:
        assert load_task(d).harbor_refusals == [], d
    assert_harbor_loads(dirs)


def test_converted_terminal_bench_tasks_load_in_harbor(tmp_path: Path) -> None:
    srcs = []
    for variant in ("plain", "network", "compose", "no-solution", "swebench", "copy-tests"):
        src = tmp_path / "src" / variant
        shutil.copytree(TB1_FIXTURE, src)
        srcs.append(src)
    (tmp_path / "src/network/run-tests.sh").write_text("#!/bin/bash\npip install pytest\npytest -rA\n")
    (tmp_path / "src/compose/docker-compose.yaml").write_text(
        "services:\n  client:\n    build: {dockerfile: Dockerfile}\n    working_dir: /srv\n"
        "    environment: [A=1]\n  db: {image: 'postgres:16'}\n"
    )
    (tmp_path / "src/no-solution/solution.sh").unlink()
    yaml_text = (tmp_path / "src/swebench/task.yaml").read_text()
    (tmp_path / "src/swebench/task.yaml").write_text(yaml_text.replace("pytest", "swebench"))
    (tmp_path / "src/copy-tests/Dockerfile").write_text(
        "FROM debian:bookworm-slim\nCOPY tests/ /app/tests/\n"
    )
    dirs = [convert_tb1(src, tmp_path / "out" / src.name).path for src in srcs]
    assert_harbor_loads(dirs)


def _accept_everything(ws: Workspace, model: str) -> None:
    """Accepted audits and 4 episodes (2 passed) per task: every export gate but Harbor's own passes."""
    with session(ws.engine) as s:
        vids = [r.version_id for r in queries.task_rows(s)]
        for vid in vids:
            queries.record_audit(s, vid, verdict="accepted", reasons=[], details={})
    for vid in vids:
        add_episodes(ws, vid, model, outcomes(2, 2))


def _export(ws: Workspace, out: Path) -> str:
    args = [
        "-w",
        str(ws.root),
        "export",
        "--model",
        "m",
        "--band",
        "0:1",
        "--format",
        "harbor",
        "--out",
        str(out),
    ]
    r = CliRunner().invoke(app, args)
    assert r.exit_code == 0, r.output
    return r.output


def test_what_export_writes_loads_in_harbor(workspace: Workspace, tmp_path: Path) -> None:
    assert import_paths(workspace, [EXAMPLES]).ok
    _accept_everything(workspace, "m")
    _export(workspace, tmp_path / "export")
    exported = find_task_dirs(tmp_path / "export" / "harbor")
    assert len(exported) == 8
    assert_harbor_loads(exported)


def test_export_leaves_out_a_version_harbor_would_refuse(workspace: Workspace, tmp_path: Path) -> None:
    """A version stored before parity (network_mode = "none") is kept out, never exported unloadable."""
    legacy = write_task(tmp_path / "legacy", '[environment]\nnetwork_mode = "none"\n')
    current = write_task(tmp_path / "current", '[environment]\nnetwork_mode = "no-network"\n')
    (current / "instruction.md").write_text("Count the lines of /etc/passwd into /app/n.txt.\n")
    assert import_paths(workspace, [legacy, current]).ok
    _accept_everything(workspace, "m")
    output = _export(workspace, tmp_path / "export")
    assert "harbor_invalid:task.toml: [environment].network_mode" in output
    assert [d.name for d in find_task_dirs(tmp_path / "export" / "harbor")] == ["current"]


# --- what Harbor ships imports into Bandpass -----------------------------------------------------------


def test_every_task_harbor_ships_imports(workspace: Workspace, tmp_path: Path) -> None:
    dirs = [Path(d) for d in json.loads(_harbor("shipped", str(tmp_path / "shipped")))]
    verdicts = harbor_load(dirs)
    accepted = [d for d, v in verdicts.items() if v == "ok"]
    assert len(accepted) >= 6  # init's five variants and the CLI's task template
    report = import_paths(workspace, accepted)
    by_source = {Path(i.source): i for i in report.items}
    assert {str(d): by_source[d].problems for d in accepted if by_source[d].status != "new"} == {}
    # what Bandpass cannot run as written is said, never silently dropped
    steps = by_source[tmp_path / "shipped" / "init" / "task-steps"]
    # multi-step tasks run (issue 41); what stays unsupported is each step's separate verifier image
    assert [u.split(" is verified in")[0] for u in steps.unsupported] == [
        "task.toml: [[steps]][0].verifier: step 'step-1'",
        "task.toml: [[steps]][1].verifier: step 'step-2'",
    ]
    default = by_source[tmp_path / "shipped" / "init" / "task-default"]
    assert any("tests/Dockerfile" in u for u in default.unsupported)
    # and what Harbor refuses, Bandpass refuses too or knows it must never write
    for d, why in verdicts.items():
        if why == "ok":
            continue
        if not (d / "task.toml").is_file() or not (d / "instruction.md").is_file():
            continue  # Harbor's LLM-job prompt templates: not tasks for either
        spec_problems = import_paths(workspace, [d]).items[0]
        assert spec_problems.status == "invalid" or load_task(d).harbor_refusals, (d, why)


# --- hand-made variants: Harbor accepts => Bandpass imports; Harbor refuses => Bandpass refuses or flags --

VARIANTS = {
    "plain": "",
    "org-name": '[task]\nname = "acme/log-report"\nversion = "1.0.0"\n',
    "bad-name": '[task]\nname = "log-report"\n',
    "no-name": '[task]\ndescription = "x"\n',
    "unknown-keys": '[task]\nname = "a/b"\nformat = "x"\n[agent]\ntimeout_secs = 5\n[x]\ny = 1\n',
    "metadata-free": '[metadata]\ndifficulty = "unknown"\ntags = "x"\nanything = {a = 1}\n',
    "network-public": '[environment]\nnetwork_mode = "public"\n',
    "network-none": '[environment]\nnetwork_mode = "none"\n',
    "network-bridge": '[environment]\nnetwork_mode = "bridge"\n',
    "network-host": '[environment]\nnetwork_mode = "host"\n',
    "allow-internet": "[environment]\nallow_internet = true\n",
    "verifier-modes": '[verifier]\nenvironment_mode = "separate"\ncollect = []\n[agent]\nuser = "x"\n',
    "verifier-shared-env": '[verifier]\nenvironment_mode = "shared"\n[verifier.environment]\ncpus = 1\n',
    "tpu-gpu": '[environment]\ngpus = 1\ntpu = {type = "v6e", topology = "2x2"}\n',
    "deprecated-sizes": '[environment]\nmemory = "1G"\nstorage = "2G"\n',
    "bad-type": '[agent]\ntimeout_sec = "fast"\n',
    "artifacts": 'artifacts = ["/app/out.json", {source = "/app/x", destination = "x"}]\n',
}


def test_variants_agree_with_harbor(workspace: Workspace, tmp_path: Path) -> None:
    dirs = {name: write_task(tmp_path / name, toml) for name, toml in VARIANTS.items()}
    dirs["no-exec-bit"] = write_task(tmp_path / "no-exec-bit", "")  # written 0644, as harbor init does
    dirs["no-solution"] = write_task(tmp_path / "no-solution", "", solution__solve_sh=None)
    verdicts = harbor_load(list(dirs.values()))
    disagreements = {}
    for name, d in dirs.items():
        item = import_paths(workspace, [d], namespace=None).items[0]
        bandpass_ok = item.status in ("new", "new_version", "unchanged")
        if verdicts[d] == "ok" and not bandpass_ok:
            disagreements[name] = f"Harbor loads it, Bandpass refused: {item.problems}"
        if verdicts[d] != "ok" and bandpass_ok and not load_task(d).harbor_refusals:
            disagreements[name] = (
                f"Harbor refused ({verdicts[d][:200]}), Bandpass neither refused nor flagged it"
            )
    assert disagreements == {}
    assert verdicts[dirs["plain"]] == "ok" and verdicts[dirs["network-none"]] != "ok"


# --- Harbor-valid values from Harbor's own schema import without a warning -----------------------------

#: The warnings a Harbor-valid value *should* get: only where Bandpass behaves differently from Harbor.
_DIFFERENCES = {
    "environment.network_mode=allowlist": [
        'task.toml: [environment].network_mode: "allowlist": no allowlist is enforced, the task gets the '
        "whole network (Harbor lets through only [environment].allowed_hosts)"
    ],
    "agent.network_mode=no-network": [
        "task.toml: [agent].network_mode: the agent gets the [environment] network setting"
    ],
    "agent.network_mode=allowlist": [
        "task.toml: [agent].network_mode: the agent gets the [environment] network setting"
    ],
}


def test_harbor_valid_values_import_without_warnings(workspace: Workspace, tmp_path: Path) -> None:
    """Harbor's own model (harbor.models.task.config, run in .venv-harbor) is the reference: every key it
    defines is one Bandpass knows (never "not a Harbor key"), the task.toml Harbor writes for a default
    TaskConfig imports without a warning, and so does every enum value in its place — except the few
    where Bandpass behaves differently (_DIFFERENCES, each saying what differs)."""
    schema = json.loads(_harbor("schema"))
    from bandpass.engine.tasks import harbor_schema

    known = {"": set(harbor_schema.TOP_LEVEL) | set(harbor_schema.SECTIONS)}
    known.update({sec: set(notes) for sec, notes in harbor_schema.SECTIONS.items()})
    unknown = {sec: sorted(set(keys) - known[sec]) for sec, keys in schema["fields"].items()}
    assert {sec: keys for sec, keys in unknown.items() if keys} == {}

    enums = schema["enums"]
    variants: dict[str, str] = {"harbor-defaults": schema["defaults_toml"]}
    for value in enums["network_mode"]:
        variants[f"environment.network_mode={value}"] = f'[environment]\nnetwork_mode = "{value}"\n'
        variants[f"agent.network_mode={value}"] = (
            f'[agent]\nnetwork_mode = "{value}"\n[environment]\nnetwork_mode = "public"\n'
        )
        variants[f"verifier.network_mode={value}"] = (
            f'[verifier]\nnetwork_mode = "{value}"\n[environment]\nnetwork_mode = "public"\n'
        )
    for value in enums["os"]:
        variants[f"environment.os={value}"] = f'[environment]\nos = "{value}"\nnetwork_mode = "public"\n'
    for value in enums["environment_mode"]:
        variants[f"verifier.environment_mode={value}"] = (
            f'[verifier]\nenvironment_mode = "{value}"\n[environment]\nnetwork_mode = "public"\n'
        )
    for value in enums["multi_step_reward_strategy"]:
        variants[f"multi_step_reward_strategy={value}"] = (
            f'multi_step_reward_strategy = "{value}"\n[environment]\nnetwork_mode = "public"\n'
        )
    for value in enums["difficulty"]:
        variants[f"metadata.difficulty={value}"] = (
            f'[metadata]\ndifficulty = "{value}"\n[environment]\nnetwork_mode = "public"\n'
        )
    dirs = {name: write_task(tmp_path / f"v{i}", toml) for i, (name, toml) in enumerate(variants.items())}
    windows = dirs["environment.os=windows"]  # Harbor wants a Windows task's own scripts
    (windows / "tests" / "test.sh").rename(windows / "tests" / "test.bat")
    (windows / "solution" / "solve.sh").rename(windows / "solution" / "solve.bat")
    assert {
        n: v for n, v in zip(dirs, harbor_load(list(dirs.values())).values(), strict=True) if v != "ok"
    } == {}
    got = {}
    for name, d in dirs.items():
        item = import_paths(workspace, [d]).items[0]
        assert item.status == "new", (name, item.problems)
        got[name] = item.warnings
    assert got == {name: _DIFFERENCES.get(name, []) for name in dirs}
    # what Bandpass cannot run is said as unsupported, never as a refusal
    assert load_task(dirs["environment.os=windows"]).unsupported == [
        'task.toml: [environment].os = "windows": Bandpass runs Linux containers only'
    ]


# --- Harbor jobs in: the exception policy is Harbor's own ----------------------------------------------


def test_multi_step_rewards_and_early_stop_are_harbors() -> None:
    """The task's reward from its steps' (``multi_step_reward_strategy``) and ``min_reward``'s early stop,
    against Harbor's own ``Trial._select_multi_step_reward`` and ``MultiStepTrial._min_reward_failure``."""
    import itertools
    import random

    from bandpass.engine.tasks import steps as steps_mod

    rng = random.Random(41)
    values = [0, 0.25, 0.5, 1, 1.0]

    def rewards() -> dict[str, float] | None:
        if rng.random() < 0.15:
            return None
        keys = rng.sample(["reward", "style", "speed"], rng.randint(0, 3))
        return {k: rng.choice(values) for k in keys}

    cases: list[dict[str, Any]] = [
        {
            "strategy": strategy,
            "rewards": [rewards() for _ in range(rng.randint(0, 4))],
            "min_reward": rng.choice([0.5, 1.0, {"reward": 0.5}, {"style": 1.0, "reward": 0.25}]),
            "step_rewards": rewards(),
        }
        for strategy, _ in itertools.product([None, "mean", "final"], range(60))
    ]
    harbor = json.loads(_harbor("steps", stdin=json.dumps(cases)))
    for case, ref in zip(cases, harbor, strict=True):
        ours = steps_mod.aggregate(case["strategy"] or "mean", case["rewards"])
        assert ours == ref["total"], case
        stop = steps_mod.below_min_reward(case["step_rewards"], case["min_reward"])
        assert bool(stop) == bool(ref["stop"]), case
        if stop:  # the same key named first
            assert stop.split("=", 1)[0] == ref["stop"].split("=", 1)[0], (stop, ref["stop"])


def test_exception_policy_is_harbors() -> None:
    """Every exception name Harbor 0.25 classifies, with the same cause and reward validity, and no name
    Harbor does not know (three of the old mapping's names were not in 0.25 at all)."""
    from bandpass.engine.tasks.harbor_errors import POLICY

    harbor = json.loads(_harbor("policy"))
    ours = {n: {"cause": c.cause, "reward_valid": c.reward_valid} for n, c in POLICY.items()}
    assert ours == harbor


# --- traces out: Harbor's own exporter and Bandpass's agree row for row --------------------------------

MODEL = "qwen3-8b"


def _atif(n_agent: int, *, tools: bool = False) -> dict[str, Any]:
    steps = [
        {"step_id": 1, "source": "system", "message": "You are a terminal agent."},
        {"step_id": 2, "source": "user", "message": "Create /app/alpha.txt"},
    ]
    for i in range(n_agent):
        steps.append(
            {
                "step_id": 3 + i,
                "source": "agent",
                "message": f"step {i}: I will run a command." if i % 2 == 0 else f"</think>done {i}",
                "reasoning_content": "think first" if i == 0 else None,
                "tool_calls": [
                    {
                        "tool_call_id": f"c{i}",
                        "function_name": "bash",
                        "arguments": {"keystrokes": f"ls {i}\n"},
                    }
                ],
                "observation": {"results": [{"source_call_id": f"c{i}", "content": f"out {i}"}]},
            }
        )
    agent: dict[str, Any] = {"name": "terminus-2", "version": "2.0.0", "model_name": f"hosted_vllm/{MODEL}"}
    if tools:
        agent["tool_definitions"] = [{"type": "function", "function": {"name": "bash"}}]
    return {"schema_version": "ATIF-v1.4", "session_id": "s", "agent": agent, "steps": steps}


def _harbor_job(root: Path) -> Path:
    from tests.support.calib_data import instruction_for, write_task_dir

    write_task_dir(root / "tasks" / "alpha", "alpha", instruction_for("alpha"))
    job = root / "jobs" / "2025-11-04__12-00-00"
    trials = {
        "alpha__pass0001": (1.0, None, _atif(2)),
        "alpha__fail0002": (0.0, None, _atif(1, tools=True)),
        "alpha__tout0003": (0.0, "AgentTimeoutError", _atif(3)),
        "alpha__crsh0004": (1.0, "NonZeroAgentExitCodeError", _atif(1)),
    }
    for name, (reward, exc, traj) in trials.items():
        d = job / name
        (d / "agent").mkdir(parents=True)
        (d / "verifier").mkdir()
        config = {
            "task": {"path": "tasks/alpha"},
            "trial_name": name,
            "job_id": "job-7",
            "agent": {"name": "terminus-2", "model_name": f"hosted_vllm/{MODEL}"},
        }
        result = {
            "task_name": "alpha",
            "trial_name": name,
            "config": config,
            "agent_info": {"name": "terminus-2", "model_info": {"name": MODEL, "provider": "hosted_vllm"}},
            "verifier_result": {"rewards": {"reward": reward}},
            "exception_info": {"exception_type": exc, "exception_message": "x"} if exc else None,
            "started_at": "2025-11-04T12:00:00",
            "finished_at": "2025-11-04T12:01:00",
        }
        (d / "config.json").write_text(json.dumps(config))
        (d / "result.json").write_text(json.dumps(result))
        (d / "agent" / "trajectory.json").write_text(json.dumps(traj))
    (job / "config.json").write_text(json.dumps({"job_name": job.name}))
    # Harbor reads the job's stats first: the crashed trial's reward bucket is overridden by its exception
    stats = {
        "evals": {
            "terminus-2__qwen3-8b__x": {
                "exception_stats": {"NonZeroAgentExitCodeError": ["alpha__crsh0004"]},
                "reward_stats": {"reward": {"1.0": ["alpha__pass0001"], "0.0": ["alpha__fail0002"]}},
            }
        }
    }
    (job / "result.json").write_text(json.dumps({"id": "job-7", "stats": stats}))  # fmt: skip
    return job


def test_traces_in_harbors_schema_match_harbors_exporter(workspace: Workspace, tmp_path: Path) -> None:
    job = _harbor_job(tmp_path / "h")
    _harbor("traces", str(job), str(tmp_path / "harbor-traces.json"))
    theirs = json.loads((tmp_path / "harbor-traces.json").read_text())
    import bandpass.tui.commands.jobs  # noqa: F401 - registers import-jobs

    r = CliRunner().invoke(app, ["-w", str(workspace.root), "import-jobs", str(job)])
    assert r.exit_code == 0, r.output
    out = tmp_path / "export"
    args = ["-w", str(workspace.root), "export", "--model", MODEL, "--format", "traces", "--out", str(out)]
    r = CliRunner().invoke(app, [*args, "--traces-schema", "harbor"])
    assert r.exit_code == 0, r.output
    ours = [json.loads(line) for line in (out / "traces" / "traces.jsonl").read_text().splitlines()]
    assert sorted(ours[0]) == sorted(theirs["columns"])  # the same columns (JSONL keys are sorted)
    key = lambda row: row["trial_name"]  # noqa: E731 - a one-line helper
    assert sorted(ours, key=key) == sorted(theirs["rows"], key=key)
    import pyarrow.parquet as pq

    # ...in the same order where a file has one
    assert pq.read_table(out / "traces" / "traces.parquet").column_names == theirs["columns"]
