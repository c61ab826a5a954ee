"""The audit blames the right party: three verdicts, static checks before the build, the build failure
split between the environment and the Dockerfile, the false alarms fixed and the missed classes found.

Checks that read files run without Docker here; the build split and the editable-grader probe run for
real (marker ``docker``).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bandpass.engine.audit import static_checks
from bandpass.engine.audit.task_audit import AuditReport, audit_version
from bandpass.engine.audit.verdict import decide
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import EditVerifierInputCheat
from bandpass.engine.tasks.artifacts import CLEAN_ROOM, IN_PLACE
from bandpass.engine.tasks.images import BuildResult, build_failure_blame
from bandpass.engine.tasks.importer import import_paths
from bandpass.engine.tasks.task_paths import verifier_inputs
from bandpass.engine.tasks.taskdir import load_task
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.taskfactory import make_task

HARBOR_STEPS_TOML = """schema_version = "1.4"
[task]
name = "demo/steps"
[[steps]]
name = "step-1"
[[steps]]
name = "step-2"
[environment]
network_mode = "no-network"
"""


def _report(spec_dir: Path) -> tuple[AuditReport, bool]:
    spec = load_task(spec_dir)
    report = AuditReport(0, spec.name, "")
    go_on = static_checks.before_build(spec, report, unsupported=spec.unsupported)
    return report, go_on


def _audit(ws: Workspace, d: Path) -> AuditReport:
    assert import_paths(ws, [d]).ok
    with session(ws.engine) as s:
        row = next(r for r in queries.task_rows(s) if r.source == str(d.resolve()))
    return audit_version(ws, row.version_id, reruns=1)


# --- verdicts ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("reasons", "verdict"),
    [
        ([], "accepted"),
        (["invalidity.instruction_untested"], "warning"),
        (["harness.sandbox_attribution"], "warning"),  # Bandpass's own fault, not the task's
        (["infra.image_build_failed"], "could_not_audit"),
        (["infra.container_died", "infra.reward_missing"], "could_not_audit"),
        (["infra.unsupported_task"], "could_not_audit"),
        (["invalidity.solution_leak", "infra.image_build_failed"], "rejected"),  # static evidence stands
        (["harness.guard_conflict"], "rejected"),
        (["invalidity.env_task_mismatch"], "rejected"),
    ],
)
def test_verdicts(reasons: list[str], verdict: str) -> None:
    assert decide(reasons) == verdict


def test_a_multi_step_task_without_a_step_solution_is_rejected_without_a_container(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Multi-step tasks are audited (the oracle runs each step's solve.sh); one with no oracle for a step
    is rejected by the static checks, before any build."""
    d = tmp_path / "steps"
    for step in ("step-1", "step-2"):
        (d / "steps" / step / "tests").mkdir(parents=True)
        (d / "steps" / step / "instruction.md").write_text(f"Do {step}.\n")
        (d / "steps" / step / "tests" / "test.sh").write_text("echo 1 > /logs/verifier/reward.txt\n")
    (d / "steps" / "step-1" / "solution").mkdir()
    (d / "steps" / "step-1" / "solution" / "solve.sh").write_text("true\n")
    (d / "environment").mkdir()
    (d / "environment" / "Dockerfile").write_text("FROM debian:bookworm-slim\n")
    (d / "task.toml").write_text(HARBOR_STEPS_TOML)
    report = _audit(workspace, d)  # returns before asking for a Docker client
    assert (report.verdict, report.reasons) == ("rejected", ["invalidity.oracle_fails"])
    assert "no solve.sh for step step-2 " in report.checks["findings"][0]["detail"]
    assert "episodes" not in report.checks


def test_a_compose_service_asking_for_privileges_could_not_be_audited_without_a_container(
    workspace: Workspace, tmp_path: Path
) -> None:
    """What this machine does not give a task's service (privileged mode, the Docker socket) is a clear
    could-not-audit reason, said before any build."""
    d = make_task(tmp_path, "privileged")
    (d / "environment" / "docker-compose.yaml").write_text(
        "services:\n  helper:\n    image: bandpass/base:bookworm\n    privileged: true\n"
        "    volumes: ['/var/run/docker.sock:/var/run/docker.sock']\n"
    )
    report = _audit(workspace, d)
    assert (report.verdict, report.reasons) == ("could_not_audit", ["infra.unsupported_task"])
    details = [f["detail"] for f in report.checks["findings"]]
    assert any("services.helper.privileged: privileged mode" in x for x in details), details
    assert any("mounts the Docker socket" in x for x in details), details
    assert "episodes" not in report.checks


def test_no_solution_is_rejected_no_oracle_proves_it_solvable(workspace: Workspace, tmp_path: Path) -> None:
    d = make_task(tmp_path, "no-oracle")
    (d / "solution" / "solve.sh").unlink()
    report = _audit(workspace, d)
    assert (report.verdict, report.reasons) == ("rejected", ["invalidity.oracle_fails"])
    assert "no oracle proves the task solvable" in report.checks["findings"][0]["detail"]
    assert any(w.startswith("solution/solve.sh: missing") for w in report.warnings)  # the import's warning


# --- leaks: only the final stage reaches the agent's image ----------------------------------------------


def test_builder_stage_copying_tests_is_no_leak(tmp_path: Path) -> None:
    """Terminal-Bench-DS tasks generate data from tests/generate_data.py in a builder stage: the false
    alarm the old check raised on any ``COPY tests/`` line."""
    d = make_task(
        tmp_path,
        "builder",
        dockerfile="FROM debian:bookworm-slim AS gen\nCOPY tests/gen.py /gen.py\nRUN python3 /gen.py\n"
        "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY --from=gen /data /app/data\n",
    )
    (d / "environment" / "tests").mkdir()
    (d / "environment" / "tests" / "gen.py").write_text("print('data')\n")
    report, go_on = _report(d)
    assert go_on and report.reasons == []


def test_final_stage_copy_of_the_tests_is_a_leak(tmp_path: Path) -> None:
    d = make_task(tmp_path, "leak", dockerfile="FROM debian:bookworm-slim\nCOPY . /app/\n")
    (d / "environment" / "tests").mkdir()
    (d / "environment" / "tests" / "test_outputs.py").write_text("assert True\n")
    report, _ = _report(d)
    assert report.reasons == ["invalidity.solution_leak"]
    assert (
        "line 2: COPY . /app/ puts environment/tests into the image" in report.checks["findings"][0]["detail"]
    )


def test_a_test_file_copied_then_deleted_in_the_final_stage_is_no_leak(tmp_path: Path) -> None:
    """tasks-pandas-sql-query copies tests/generate_data.py, runs it, and deletes it."""
    d = make_task(
        tmp_path,
        "gen-then-rm",
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\n"
        "COPY tests/generate_data.py /app/generate_data.py\n"
        "RUN python3 /app/generate_data.py\nRUN rm /app/generate_data.py\n",
    )
    (d / "environment" / "tests").mkdir()
    (d / "environment" / "tests" / "generate_data.py").write_text("print('data')\n")
    report, _ = _report(d)
    assert report.reasons == []


def test_an_expected_output_in_the_agents_image_is_a_leak(tmp_path: Path) -> None:
    answer = "\n".join(f"row {i}: {i * i}" for i in range(10)) + "\n"
    d = make_task(tmp_path, "baked", dockerfile="FROM debian:bookworm-slim\nCOPY ref.txt /opt/ref.txt\n")
    (d / "environment" / "ref.txt").write_text(answer)
    (d / "tests" / "expected_output.txt").write_text(answer)
    report, _ = _report(d)
    assert report.reasons == ["invalidity.solution_leak"]
    assert (
        "environment/ref.txt is a copy of tests/expected_output.txt" in report.checks["findings"][0]["detail"]
    )


def test_the_oracle_reading_the_verifiers_files(tmp_path: Path) -> None:
    d = make_task(tmp_path, "peeks", solve="#!/bin/bash\ncp /tests/expected_answer.txt /app/answer.txt\n")
    (d / "tests" / "expected_answer.txt").write_text("42\n")
    report, _ = _report(d)
    assert report.reasons == ["invalidity.oracle_fails"]
    assert "reads the verifier's files (/tests/expected_answer.txt" in report.checks["findings"][0]["detail"]


# --- coverage: no false alarm on starter files or outputs built from a pattern ----------------------------


def test_coverage_ignores_starter_files_and_follows_patterns(tmp_path: Path) -> None:
    d = make_task(
        tmp_path,
        "cover",
        instruction="Fix /srv/tool/broken.py, then write one JSON per region into /app/out/ "
        "(/app/out/north.json, /app/out/south.json) and a total into /app/total.txt.",
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\nCOPY broken.py /srv/tool/broken.py\n",
        test="#!/bin/bash\nfor r in north south; do test -s /app/out/$r.json || exit 1; done\n",
    )
    (d / "environment" / "broken.py").write_text("print(\n")
    spec = load_task(d)
    report = AuditReport(0, spec.name, "")
    outputs = static_checks.coverage_check(spec, report, present_at_start={})
    assert "/srv/tool/broken.py" not in outputs  # shipped in the build context: a starter file
    assert report.checks["findings"] == [
        {
            "code": "invalidity.instruction_untested",
            "detail": "named in instruction.md, never checked: /app/total.txt",
        }
    ]


# --- the build failure split --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("log", "error", "blame"),
    [
        ("Step 1/3 : FROM ghcr.io/x/y:1\n[error] pull access denied for ghcr.io/x/y", "error", "environment"),
        ("[bandpass] FROM acme:1: not in the engine and no alias; no registry is reachable here", "error",
         "environment"),
        ("E: Failed to fetch http://deb.debian.org/...\n[error] The command '/bin/sh -c apt-get install jq' "
         "returned a non-zero code: 100", "error", "environment"),
        ("[error] The command '/bin/sh -c make' returned a non-zero code: 2", "error", "task"),
        ("[error] COPY failed: file not found in build context: data.csv", "error", "task"),
        ("[bandpass] build timed out after 600 s", "timeout", "environment"),
        ("", "no Dockerfile", "task"),
    ],
)  # fmt: skip
def test_build_failure_blame(log: str, error: str, blame: str) -> None:
    assert build_failure_blame(BuildResult(tag="t", ok=False, log=log, error=error))[0] == blame


def test_a_step_failing_on_an_image_alias_is_not_blamed_on_the_task() -> None:
    """pip refusing a system install on the Debian stand-in for python:3.12-slim is not the task's fault."""
    log = (
        "error: externally-managed-environment\n"
        "[error] The command '/bin/sh -c pip install numpy' returned a non-zero code: 1"
    )
    build = BuildResult(tag="t", ok=False, log=log, error="error", aliases_used=[("python:3.12-slim", "b:1")])
    blame, why = build_failure_blame(build)
    assert blame == "environment" and why.endswith("(built on an image alias: b:1 for python:3.12-slim)")


@pytest.mark.docker
def test_a_broken_dockerfile_is_the_tasks_fault(workspace: Workspace, tmp_path: Path) -> None:
    d = make_task(tmp_path, "broken-build", dockerfile="FROM debian:bookworm-slim\nRUN exit 3\n")
    report = _audit(workspace, d)
    assert (report.verdict, report.reasons) == ("rejected", ["invalidity.env_task_mismatch"])
    assert report.checks["image"]["blame"] == "task"


@pytest.mark.docker
def test_an_unreachable_image_could_not_be_audited_but_a_static_leak_still_rejects(
    workspace: Workspace, tmp_path: Path
) -> None:
    d = make_task(tmp_path, "offline", dockerfile="FROM registry.invalid/nothing/here:1\nWORKDIR /app\n")
    report = _audit(workspace, d)
    assert (report.verdict, report.reasons) == ("could_not_audit", ["infra.image_build_failed"])
    assert report.checks["image"]["blame"] == "environment"
    leaky = make_task(
        tmp_path,
        "offline-leaky",
        dockerfile="FROM registry.invalid/nothing/here:1\nCOPY tests/ /app/tests/\n",
    )
    (leaky / "environment" / "tests").mkdir()
    (leaky / "environment" / "tests" / "t.py").write_text("assert True\n")
    report = _audit(workspace, leaky)
    assert report.verdict == "rejected"
    assert report.reasons == ["invalidity.solution_leak", "infra.image_build_failed"]


# --- the missed class: a grader in the agent's image ------------------------------------------------------


GRADED = """#!/bin/bash
mkdir -p /logs/verifier
if python3 /opt/grader/check.py; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
CHECK_PY = "import sys\nsys.exit(0 if open('/app/answer.txt').read().strip() == '42' else 1)\n"


def test_verifier_inputs_are_what_the_tests_read_and_the_instruction_does_not_name(tmp_path: Path) -> None:
    d = make_task(tmp_path, "graded", test=GRADED)
    assert verifier_inputs(load_task(d)) == ["/opt/grader/check.py"]


@pytest.mark.docker
def test_a_grader_the_agent_can_edit_is_found(workspace: Workspace, tmp_path: Path) -> None:
    from bandpass.engine.run.episode import run_episode

    d = make_task(
        tmp_path,
        "graded",
        test=GRADED,
        dockerfile="FROM debian:bookworm-slim\nWORKDIR /app\nCOPY check.py /opt/grader/check.py\n",
    )
    (d / "environment" / "check.py").write_text(CHECK_PY)
    assert import_paths(workspace, [d]).ok
    with session(workspace.engine) as s:
        (row,) = queries.task_rows(s)
    # in the clean room the verifier runs the image's own grader: the agent's edit never reaches it
    res = run_episode(workspace, row.version_id, EditVerifierInputCheat)
    assert (res.outcome, res.reward, res.verify_mode) == ("failed", 0.0, CLEAN_ROOM), res.detail
    # verified in place (a service task), the same edit is what the verifier runs: the probe finds it
    res = run_episode(workspace, row.version_id, EditVerifierInputCheat, verify_mode=IN_PLACE)
    assert (res.outcome, res.reward, res.verify_mode) == ("passed", 1.0, IN_PLACE), res.detail


@pytest.mark.docker
def test_the_oracle_finds_its_solution_folder_at_slash_solution(workspace: Workspace, tmp_path: Path) -> None:
    """Harbor uploads solution/ to /solution for the oracle: a solve.sh that runs /solution/solve.py (most
    of purple29th-tbench-2) must pass here too, and [solution].env must reach it."""
    from bandpass.engine.run.agents.builtin import OracleAgent
    from bandpass.engine.run.episode import run_episode

    d = make_task(
        tmp_path,
        "helper",
        solve='#!/bin/bash\nset -e\ncp /solution/solve.py /app/solve.py\npython3 /app/solve.py "$ANSWER"\n',
        environment='[solution]\nenv = { ANSWER = "42" }\n'.replace("[solution]", "\n[solution]"),
    )
    (d / "solution" / "solve.py").write_text(
        "import sys\nopen('/app/answer.txt', 'w').write(sys.argv[1] + '\\n')\n"
    )
    assert import_paths(workspace, [d]).ok
    with session(workspace.engine) as s:
        (row,) = queries.task_rows(s)
    res = run_episode(workspace, row.version_id, OracleAgent)
    assert (res.outcome, res.reward) == ("passed", 1.0), res.detail
