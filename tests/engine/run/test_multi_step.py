"""Multi-step tasks (issue 41, item 3): ``[[steps]]`` (Harbor's schema 1.1) run as Harbor runs them.

A two-step task in the cookbook's shape (tests/taskfactory.py ``make_steps_task``): step ``write`` asks for
/app/greet.txt (``min_reward = 1``); step ``extend`` gets a ``workdir/`` file and a ``setup.sh`` (which
tidies the file and deletes itself), a healthcheck, a verifier env and a test that sources the task's
shared ``tests/helpers.sh`` and reads a step-local fixture.

* the oracle (each step's solve.sh) passes, every step's reward and recording kept, one marker per task
  step in the agent's cast beside the policy's step markers, whose numbering goes on across steps;
* a first step below its ``min_reward`` stops the task (Harbor's early stop): the rest are ``skipped``;
* the task's reward is Harbor's ``multi_step_reward_strategy``: ``mean`` over the steps, ``final`` the last;
* a later step that cannot be set up on what the policy left counts 0 (Harbor would leave it out);
* the audit runs the oracle per step and accepts the task;
* the cookbook's multi-step recipe imports with every step-level setting read.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bandpass.engine.audit.task_audit import audit_version
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.diagnoser import diagnose_one
from bandpass.engine.review.replay import load_source
from bandpass.engine.run.agents.builtin import NopAgent, OracleAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.tasks import steps as steps_mod
from bandpass.engine.tasks.importer import import_paths
from bandpass.engine.tasks.taskdir import load_task
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.queries import task_steps as task_steps_store
from tests.support.narrow import present
from tests.support.paths import REPO
from tests.support.taskfactory import IN_PLACE, make_steps_task

COOKBOOK = REPO / "tests" / "fixtures" / "harbor_cookbook"


def _version(ws: Workspace, task: Path) -> int:
    report = import_paths(ws, [task])
    assert report.ok, [i.problems for i in report.items]
    assert report.items[0].unsupported == []
    with session(ws.engine) as s:
        return next(r.version_id for r in queries.task_rows(s) if r.source == str(task.resolve()))


def _steps(ws: Workspace, episode_id: int) -> list[tuple[str, str, float | None, bool]]:
    with session(ws.engine) as s:
        return [(r.name, r.outcome, r.reward, r.counted) for r in task_steps_store.task_steps(s, episode_id)]


@pytest.mark.docker
def test_the_oracle_runs_each_step_and_every_steps_reward_and_recording_is_kept(
    workspace: Workspace, tmp_path: Path
) -> None:
    version_id = _version(workspace, make_steps_task(tmp_path / "src", "two-steps"))
    res = run_episode(workspace, version_id, OracleAgent, max_infra_retries=0)
    assert (res.outcome, res.reward) == ("passed", 1.0), res.detail
    assert res.detail == "mean of 2 steps: write 1.0, extend 1.0 = 1"
    assert _steps(workspace, res.episode_id) == [
        ("write", "passed", 1.0, True),
        ("extend", "passed", 1.0, True),
    ]
    with session(workspace.engine) as s:
        rows = task_steps_store.task_steps(s, res.episode_id)
        policy_steps = [(st.index, st.marker_time) for st in queries.steps(s, res.episode_id)]
    # each step verified in a clean room of its own, with its own recording
    assert [r.verify_mode for r in rows] == ["clean_room", "clean_room"]
    assert [Path(r.verifier_cast).name for r in rows] == ["verifier.step1.cast", "verifier.step2.cast"]
    assert all((workspace.root / r.verifier_cast).is_file() for r in rows)
    # one agent cast: a marker per task step beside the policy's step markers, numbered on across steps
    markers = [label for _, label in read_cast(workspace.root / res.agent_cast).markers]
    assert markers == ["task step 1/2: write", "step 0", "task step 2/2: extend", "step 1"]
    assert [i for i, _ in policy_steps] == [0, 1]
    assert rows[0].marker_time < policy_steps[0][1] < rows[1].marker_time < policy_steps[1][1]
    # Replay says which task step the playhead is in, with that step's own result
    source = load_source(workspace, res.episode_id)
    assert [ts.name for ts in source.task_steps] == ["write", "extend"]
    at = source.task_step_at(policy_steps[1][1])
    assert at is not None and at.label(2) == "task step 2/2 extend: passed 1"
    assert at.verifier_cast is not None and at.verifier_cast.name == "verifier.step2.cast"


@pytest.mark.docker
@pytest.mark.parametrize(
    ("mode", "verifier"), [("service", 'environment_mode = "shared"'), ("in_place", IN_PLACE)]
)
def test_each_step_is_verified_where_the_task_says(
    workspace: Workspace, tmp_path: Path, mode: str, verifier: str
) -> None:
    """Harbor's ``shared`` is the service mode for every step (a fresh verifier joined to the agent
    container's network, one per step); Bandpass's in-place opt-in verifies each step in the agent's
    container. Either way the oracle passes both steps and a nop stops at the first."""
    task = make_steps_task(tmp_path / "src", f"steps-{mode.replace('_', '-')}", verifier=verifier)
    version_id = _version(workspace, task)
    res = run_episode(workspace, version_id, OracleAgent, max_infra_retries=0)
    assert (res.outcome, res.reward) == ("passed", 1.0), res.detail
    with session(workspace.engine) as s:
        rows = task_steps_store.task_steps(s, res.episode_id)
    assert [(r.name, r.outcome, r.verify_mode) for r in rows] == [
        ("write", "passed", mode),
        ("extend", "passed", mode),
    ]
    nop = run_episode(workspace, version_id, NopAgent, max_infra_retries=0)
    assert (nop.outcome, nop.reward) == ("failed", 0.0), nop.detail
    assert _steps(workspace, nop.episode_id) == [
        ("write", "failed", 0.0, True),
        ("extend", "skipped", None, False),
    ]


@pytest.mark.docker
def test_in_place_a_service_the_first_step_started_still_answers_in_the_next(
    workspace: Workspace, tmp_path: Path
) -> None:
    """In place the verifier's wrapper stops every process when test.sh exits; a server the first step's
    agent started (kept by the capture: it listens) must run again for the next step, as in Harbor."""
    task = make_steps_task(
        tmp_path / "src",
        "served",
        verifier=IN_PLACE,
        first_solve="#!/bin/bash\nprintf 'hello\\n' > /app/greet.txt\n"
        "nohup python3 -m http.server 8765 --directory /app >/dev/null 2>&1 &\n"
        "for _ in $(seq 50); do "
        "python3 -c 'import socket; socket.create_connection((\"127.0.0.1\", 8765), 1)' 2>/dev/null "
        "&& break; sleep 0.1; done\n",
    )
    test = task / "steps" / "extend" / "tests" / "test.sh"
    served = (
        "python3 -c \"import urllib.request as u; u.urlopen('http://127.0.0.1:8765/greet.txt', timeout=5)\" "
        "|| fail\n"
    )
    test.write_text(
        test.read_text().replace("source /tests/helpers.sh\n", "source /tests/helpers.sh\n" + served)
    )
    res = run_episode(workspace, _version(workspace, task), OracleAgent, max_infra_retries=0)
    assert (res.outcome, res.reward) == ("passed", 1.0), (res.detail, res.verifier_output[-800:])


@pytest.mark.docker
def test_a_first_step_below_its_min_reward_stops_the_task_early(workspace: Workspace, tmp_path: Path) -> None:
    version_id = _version(workspace, make_steps_task(tmp_path / "src", "stops-early"))
    res = run_episode(workspace, version_id, NopAgent, max_infra_retries=0)
    assert (res.outcome, res.reward) == ("failed", 0.0), res.detail
    assert _steps(workspace, res.episode_id) == [
        ("write", "failed", 0.0, True),
        ("extend", "skipped", None, False),
    ]
    with session(workspace.engine) as s:
        skipped = task_steps_store.task_steps(s, res.episode_id)[1]
    assert skipped.detail == "step write: reward=0 below min_reward 1 (Harbor's early stop)"
    assert skipped.verifier_cast == ""
    # the diagnosis names the step that cost the reward, at its marker in the agent's cast
    diag = present(diagnose_one(workspace, res.episode_id))
    assert diag.summary.startswith("task step 1/2 write (failed, reward 0): "), diag.summary
    assert (
        diag.evidence[0].what == "task step 1/2 write (failed, reward 0) began"
        and diag.evidence[0].cast == "agent"
    )


@pytest.mark.docker
@pytest.mark.parametrize(
    ("strategy", "outcome", "reward"), [("mean", "failed", 0.5), ("final", "passed", 1.0)]
)
def test_the_tasks_reward_is_harbors_multi_step_reward_strategy(
    workspace: Workspace, tmp_path: Path, strategy: str, outcome: str, reward: float
) -> None:
    """A wrong first step with no min_reward: the second still runs and passes."""
    task = make_steps_task(
        tmp_path / "src",
        f"strategy-{strategy}",
        first_solve="#!/bin/bash\nprintf 'bye\\n' > /app/greet.txt\n",
        first_min_reward=None,
        strategy=strategy,
    )
    res = run_episode(workspace, _version(workspace, task), OracleAgent, max_infra_retries=0)
    assert (res.outcome, res.reward) == (outcome, reward), res.detail
    assert _steps(workspace, res.episode_id) == [
        ("write", "failed", 0.0, True),
        ("extend", "passed", 1.0, True),
    ]


@pytest.mark.docker
def test_a_later_steps_setup_failing_on_what_the_policy_left_counts_zero(
    workspace: Workspace, tmp_path: Path
) -> None:
    """The first step is solved but leaves ``tr`` unusable, which the next step's ``setup.sh`` needs: that
    step cannot be set up, does not run and counts 0 (Harbor would average the first step alone: 1)."""
    task = make_steps_task(
        tmp_path / "src",
        "setup-broken",
        first_solve="#!/bin/bash\nprintf 'hello\\n' > /app/greet.txt\nchmod 0 /usr/bin/tr\n",
    )
    res = run_episode(workspace, _version(workspace, task), OracleAgent, max_infra_retries=0)
    assert (res.outcome, res.reward) == ("failed", 0.5), res.detail
    assert _steps(workspace, res.episode_id) == [
        ("write", "passed", 1.0, True),
        ("extend", "not_run", 0.0, True),
    ]
    with session(workspace.engine) as s:
        detail = task_steps_store.task_steps(s, res.episode_id)[1].detail
    assert detail.startswith("steps/extend/workdir/setup.sh exited 126"), detail


@pytest.mark.docker
def test_the_audit_runs_the_oracle_of_each_step_and_accepts_the_task(
    workspace: Workspace, tmp_path: Path
) -> None:
    version_id = _version(workspace, make_steps_task(tmp_path / "src", "audited"))
    report = audit_version(workspace, version_id, reruns=1)
    assert report.verdict == "accepted", report.checks.get("findings")
    (oracle,) = report.checks["episodes"]["oracle"]
    assert _steps(workspace, oracle["episode"]) == [
        ("write", "passed", 1.0, True),
        ("extend", "passed", 1.0, True),
    ]
    # the hostile twins replay one end state; each step's verifier judged its own: said, not run
    assert "multi-step" in report.checks["hostile_twins"]["skipped"], report.checks["hostile_twins"]


@pytest.mark.docker
def test_every_key_of_each_steps_reward_file_is_kept_and_a_min_reward_table_gates_on_it(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Each step's reward.json is read by the one reward module (engine/tasks/rewards.py): every key kept
    per step, the task's keys Harbor's mean of the steps', the scalar its "reward"; a ``min_reward`` table
    gates on the key it names (Harbor's early stop), here ``style`` below 1 after a passing first step."""
    task = make_steps_task(tmp_path / "src", "keyed", first_min_reward=None)
    for step, style in (("write", "0.5"), ("extend", "1")):
        # the step's pass/fail write reward.json with a second key instead of the shared helpers' reward.txt
        writers = (
            f'pass() {{ echo \'{{"reward": 1, "style": {style}}}\' > /logs/verifier/reward.json; exit 0; }}\n'
            'fail() { echo \'{"reward": 0, "style": 0}\' > /logs/verifier/reward.json; exit 0; }'
        )
        test = task / "steps" / step / "tests" / "test.sh"
        test.write_text(test.read_text().replace("source /tests/helpers.sh", writers))
    version_id = _version(workspace, task)
    res = run_episode(workspace, version_id, OracleAgent, max_infra_retries=0)
    assert (res.outcome, res.reward, res.rewards) == ("passed", 1.0, {"reward": 1.0, "style": 0.75}), (
        res.detail
    )
    with session(workspace.engine) as s:
        rows = task_steps_store.task_steps(s, res.episode_id)
    assert [json.loads(r.rewards_json) for r in rows] == [
        {"reward": 1.0, "style": 0.5},
        {"reward": 1.0, "style": 1.0},
    ]
    assert all(json.loads(r.verifier_evidence_json)["reading"]["source"] for r in rows)
    # the same task with min_reward = { style = 1 } on its first step stops there (Harbor's rule)
    toml = task / "task.toml"
    toml.write_text(
        toml.read_text().replace('name = "write"\n', 'name = "write"\nmin_reward = { style = 1.0 }\n')
    )
    stopped = run_episode(workspace, _version(workspace, task), OracleAgent, max_infra_retries=0)
    assert _steps(workspace, stopped.episode_id) == [
        ("write", "passed", 1.0, True),
        ("extend", "skipped", None, False),
    ]
    assert stopped.rewards == {"reward": 1.0, "style": 0.5}


def test_the_reward_rules_are_harbors() -> None:
    """``steps.aggregate`` is Harbor's ``_select_multi_step_reward``, ``below_min_reward`` its early stop."""
    assert steps_mod.aggregate("mean", [{"reward": 1.0}, {"reward": 0.0, "style": 1.0}]) == {
        "reward": 0.5,
        "style": 0.5,  # a key one step did not write counts 0 for it
    }
    assert steps_mod.aggregate("mean", [None, {"reward": 1.0}]) == {"reward": 1.0}  # no verifier result
    assert steps_mod.aggregate("final", [{"reward": 1.0}, {"reward": 0.25}]) == {"reward": 0.25}
    assert steps_mod.aggregate("mean", []) is None
    assert steps_mod.below_min_reward({"reward": 0.4}, 0.5) == "reward=0.4 below min_reward 0.5"
    assert steps_mod.below_min_reward({"reward": 0.5}, 0.5) == ""
    assert steps_mod.below_min_reward({"reward": 1.0}, {"style": 0.5}) == "style=-inf below min_reward 0.5"
    assert steps_mod.below_min_reward(None, None) == ""


def test_the_cookbook_multi_step_recipe_imports_with_every_step_setting(workspace: Workspace) -> None:
    """Harbor's own example exercises every step-level feature; its image runs ``apt-get install`` (the
    internet) and it is not run here."""
    task = COOKBOOK / "multi-step"
    spec = load_task(task)
    assert spec.steps == ["scaffold", "implement", "document"] and spec.reward_strategy == "mean"
    scaffold, implement, document = spec.step_specs
    assert (scaffold.agent_timeout_sec, scaffold.verifier_timeout_sec, scaffold.min_reward) == (
        60.0,
        30.0,
        1.0,
    )
    assert implement.min_reward == 0.5 and implement.verifier_env == {
        "EXPECTED_NAME": "Harbor",
        "EXPECTED_GREETING": "Hello, Harbor!",
    }
    assert implement.healthcheck is not None and implement.healthcheck.command == "test -x /app/greet.sh"
    assert (implement.healthcheck.interval_sec, implement.healthcheck.retries) == (1.0, 3)
    assert document.artifacts == ["/app/README.md"] and spec.artifacts == ["/app/greet.sh"]
    assert spec.has_solution
    (item,) = import_paths(workspace, [task]).items
    assert (item.status, item.problems, item.unsupported) == ("new", [], [])
    with session(workspace.engine) as s:
        (row,) = queries.task_rows(s)
        version = queries.get_version(s, row.version_id)
    assert version is not None and json.loads(version.unsupported_json) == []
