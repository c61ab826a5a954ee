"""The reference side of the differential test: run with the real Harbor 0.25 (``.venv-harbor/bin/python``),
never imported by Bandpass's own interpreter.

    harbor_ref.py load            task directories on stdin, one per line -> {dir: "ok" | "<Type>: <msg>"}
    harbor_ref.py reference TMP   the same, and a Terminal-Bench 1 directory (task.yaml) is first converted
                                  by Harbor's own ``harbor task migrate`` mapper (into TMP)
    harbor_ref.py shipped DEST    every task Harbor ships or its ``task init`` writes, laid out under DEST
                                  -> [dir, ...] (the packaged templates, and init's variants)
    harbor_ref.py traces JOB OUT  Harbor's own traces exporter over a job directory -> OUT (JSON rows)
    harbor_ref.py policy          Harbor's exception policy -> {name: {cause, reward_valid}}
    harbor_ref.py schema          Harbor's task model: keys per section, enum values, its default task.toml
    harbor_ref.py rewards         reward files on stdin ([{"json": B64|null, "txt": B64|null}]) -> what
                                  Harbor's verifier reads: {"rewards": {...}, "primary": x} | {"error": T}
    harbor_ref.py steps           multi-step reward cases on stdin (JSON) -> Harbor's trial reward and early
                                  stop for each

Everything Harbor prints goes to stderr; stdout carries only the JSON answer.
"""

from __future__ import annotations

import contextlib
import io
import json
import shutil
import subprocess
import sys
import warnings
from pathlib import Path
from typing import Any


def load(dirs: list[str]) -> dict[str, str]:
    from harbor.models.task.task import Task

    out: dict[str, str] = {}
    for d in dirs:
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                Task(d)
            out[d] = "ok"
        except Exception as exc:  # noqa: BLE001 - every refusal is an answer
            out[d] = f"{type(exc).__name__}: {exc}"
    return out


def reference(dirs: list[str], tmp: Path) -> dict[str, str]:
    """What Harbor accepts: Harbor-format directories as they are, TB1 ones after Harbor's own migrate."""
    from harbor.mappers.terminal_bench import TerminalBenchMapper

    mapper = TerminalBenchMapper()
    out: dict[str, str] = {}
    harbor_dirs = [d for d in dirs if (Path(d) / "task.toml").is_file()]
    out.update(load(harbor_dirs))
    for i, d in enumerate(x for x in dirs if x not in out):
        target = tmp / f"m{i}"
        try:
            with contextlib.redirect_stdout(io.StringIO()):
                mapper._map_task(Path(d), target)
        except Exception as exc:  # noqa: BLE001 - recorded per task, as Harbor's migrate reports it
            out[d] = f"migrate: {type(exc).__name__}: {str(exc).splitlines()[0][:300]}"
            continue
        out[d] = load([str(target)])[str(target)]
    return out


#: ``harbor task init`` variants: Harbor's defaults and each option that changes what it writes.
INIT_VARIANTS = {
    "task-default": [],
    "task-shared": ["--verifier-mode", "shared"],
    "task-steps": ["--steps", "2"],
    "task-nopytest": ["--no-pytest", "--include-canary-strings"],
    "task-nopackage": ["--no-package", "--no-solution"],
}
#: Task templates inside the package (relative to harbor/): some are prompts for LLM jobs, not tasks.
TEMPLATES = (
    "cli/template-task",
    "cli/template-adapter/task-template",
    "cli/annotator/annotate-task-template",
    "analyze/analyze-task-template",
    "analyze/check-task-template",
)


def shipped(dest: Path) -> list[str]:
    import harbor

    root = Path(harbor.__file__).parent
    harbor_cli = Path(sys.executable).with_name("harbor")
    out: list[str] = []
    for name, args in INIT_VARIANTS.items():
        subprocess.run(
            [str(harbor_cli), "task", "init", f"harbor-init/{name}", "-p", str(dest / "init"), *args],
            check=True,
            stdout=sys.stderr,
            stderr=sys.stderr,
        )
        out.append(str(dest / "init" / name))
    for rel in TEMPLATES:
        src = root / rel
        if (src / "task.toml").is_file():
            target = dest / "templates" / rel.replace("/", "_")
            shutil.copytree(src, target, ignore=shutil.ignore_patterns("__pycache__"))
            out.append(str(target))
    return out


def schema() -> dict[str, object]:
    """Harbor's task model as data: the keys each section defines, every enum value a task.toml can name,
    and the task.toml Harbor itself writes for a default ``TaskConfig``."""
    from harbor.models.difficulty import Difficulty
    from harbor.models.task import config as c

    sections = {
        "": c.TaskConfig,
        "task": c.PackageInfo,
        "agent": c.AgentConfig,
        "verifier": c.VerifierConfig,
        "environment": c.EnvironmentConfig,
        "solution": c.SolutionConfig,
    }
    fields = {name: sorted(model.model_fields) for name, model in sections.items()}
    fields["environment"] += ["memory", "storage"]  # read by its legacy migration (harbor lint knows them)
    fields[""] += ["version"]  # renamed to schema_version on load
    enums = {
        "network_mode": [m.value for m in c.NetworkMode],
        "os": [m.value for m in c.TaskOS],
        "environment_mode": [m.value for m in c.VerifierEnvironmentMode],
        "multi_step_reward_strategy": [m.value for m in c.MultiStepRewardStrategy],
        "difficulty": [m.value for m in Difficulty],
    }
    default = c.TaskConfig(task=c.PackageInfo(name="bandpass/defaults"))
    return {"fields": fields, "enums": enums, "defaults_toml": default.model_dump_toml()}


def traces(job: Path, out: Path) -> None:
    from harbor.utils.traces_utils import export_traces

    with contextlib.redirect_stdout(io.StringIO()):
        ds = export_traces(job, episodes="last", to_sharegpt=False, verbose=False, use_rich_progress=False)
    rows = [dict(r) for r in ds] if ds is not None else []
    out.write_text(json.dumps({"columns": list(ds.column_names) if ds is not None else [], "rows": rows}))


def rewards(cases: list[dict[str, str | None]]) -> list[dict[str, object]]:
    """Harbor's own verifier code on each pair of reward files: ``Verifier``'s parsing (reward.json first,
    then reward.txt), the ``VerifierResult`` it would build, and the primary reward its CLI computes."""
    import base64
    import tempfile

    from harbor.cli.jobs import _primary_reward
    from harbor.models.trial.paths import TrialPaths
    from harbor.models.trial.result import TrialResult
    from harbor.models.verifier.result import VerifierResult
    from harbor.verifier.verifier import Verifier

    out: list[dict[str, object]] = []
    for case in cases:
        with tempfile.TemporaryDirectory() as tmp:
            paths = TrialPaths(Path(tmp))
            paths.verifier_dir.mkdir(parents=True, exist_ok=True)
            for key, target in (("json", paths.reward_json_path), ("txt", paths.reward_text_path)):
                if case.get(key) is not None:
                    target.write_bytes(base64.b64decode(case[key] or ""))
            verifier = Verifier.__new__(Verifier)
            verifier.trial_paths = paths
            try:
                if paths.reward_json_path.exists():
                    parsed = verifier._parse_reward_json()
                elif paths.reward_text_path.exists():
                    parsed = verifier._parse_reward_text()
                else:
                    out.append({"error": "RewardFileNotFoundError"})
                    continue
                result = VerifierResult(rewards=parsed)
            except Exception as exc:  # noqa: BLE001 - every refusal is an answer
                out.append({"error": type(exc).__name__})
                continue
            trial = TrialResult.model_construct(verifier_result=result)
            out.append({"rewards": result.rewards, "primary": _primary_reward(trial)})
    return out


def steps(cases: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Harbor's multi-step reward rules on each case ``{strategy, rewards: [dict | None], min_reward,
    step_rewards}``: the trial's rewards (``Trial._select_multi_step_reward`` over step results whose
    verifier result is None or has those rewards) and the early stop
    (``MultiStepTrial._min_reward_failure``)."""
    from types import SimpleNamespace

    from harbor.models.task.config import MultiStepRewardStrategy
    from harbor.models.trial.result import StepResult
    from harbor.models.verifier.result import VerifierResult
    from harbor.trial.multi_step import MultiStepTrial
    from harbor.trial.trial import Trial

    out = []
    for case in cases:
        results = [
            StepResult(step_name=f"s{i}", verifier_result=None if r is None else VerifierResult(rewards=r))
            for i, r in enumerate(case["rewards"])
        ]
        strategy = MultiStepRewardStrategy(case["strategy"]) if case["strategy"] else None
        fake = SimpleNamespace(
            result=SimpleNamespace(step_results=results),
            task=SimpleNamespace(config=SimpleNamespace(multi_step_reward_strategy=strategy)),
        )
        fake._aggregate_step_rewards = lambda f=fake: Trial._aggregate_step_rewards(f)
        total = Trial._select_multi_step_reward(fake)
        stop = MultiStepTrial._min_reward_failure(case["step_rewards"], case["min_reward"])
        out.append({"total": None if total is None else total.rewards, "stop": stop})
    return out


def main(argv: list[str]) -> int:
    if argv[:1] == ["load"]:
        dirs = [line.strip() for line in sys.stdin if line.strip()]
        print(json.dumps(load(dirs)))
    elif argv[:1] == ["reference"] and len(argv) == 2:
        dirs = [line.strip() for line in sys.stdin if line.strip()]
        print(json.dumps(reference(dirs, Path(argv[1]))))
    elif argv[:1] == ["schema"]:
        print(json.dumps(schema()))
    elif argv[:1] == ["policy"]:
        from harbor.models.trial.error_policy import ERROR_POLICIES

        pol = ERROR_POLICIES
        table = {n: {"cause": str(x.cause), "reward_valid": x.reward_valid} for n, x in pol.items()}
        print(json.dumps(table))
    elif argv[:1] == ["shipped"] and len(argv) == 2:
        print(json.dumps(shipped(Path(argv[1]))))
    elif argv[:1] == ["rewards"]:
        print(json.dumps(rewards(json.loads(sys.stdin.read()))))
    elif argv[:1] == ["steps"]:
        print(json.dumps(steps(json.loads(sys.stdin.read()))))
    elif argv[:1] == ["traces"] and len(argv) == 3:
        traces(Path(argv[1]), Path(argv[2]))
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
