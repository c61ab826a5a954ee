"""Episodes end to end in real Docker: every path ends in exactly one outcome, recordings play."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import docker
import pytest

from bandpass.engine.core.events import (
    EpisodeFinished,
    EpisodeStarted,
    Event,
    EventBus,
    PtyOutput,
    StepStarted,
)
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.base import AgentContext, AgentResult
from bandpass.engine.run.agents.builtin import CHEATS, TAMPER_CHEATS, NopAgent, OracleAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox import pool as sandbox_pool
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.sandbox.emulator import Screen
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.narrow import present
from tests.support.paths import EXAMPLES
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_until

pytestmark = pytest.mark.docker


def _import(ws: Workspace, *dirs: Path) -> dict[str, int]:
    report = import_paths(ws, list(dirs))
    assert report.ok, [i.problems for i in report.items]
    with session(ws.engine) as s:
        return {r.name: r.version_id for r in queries.task_rows(s)}


@pytest.fixture
def tiny(workspace: Workspace, tmp_path: Path) -> tuple[Workspace, int]:
    ids = _import(workspace, make_task(tmp_path / "src", "answer-42"))
    return workspace, ids["answer-42"]


def test_oracle_passes_with_steps_casts_and_events(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    bus = EventBus()
    seen: list[Event] = []
    bus.subscribe(Event, seen.append)
    res = run_episode(ws, vid, OracleAgent(), bus=bus)
    assert (res.outcome, res.reward, res.retries) == ("passed", 1.0, 0)

    kinds = {type(e) for e in seen}
    assert {EpisodeStarted, StepStarted, PtyOutput, EpisodeFinished} <= kinds
    streams = {e.stream for e in seen if isinstance(e, PtyOutput)}
    assert streams == {"agent", "verifier"}
    assert isinstance(seen[-1], EpisodeFinished) and seen[-1].outcome == "passed"

    with session(ws.engine) as s:
        ep = present(queries.get_episode(s, res.episode_id))
        (step,) = queries.steps(s, res.episode_id)
    assert (ep.status, ep.outcome, ep.reward) == ("done", "passed", 1.0)
    agent_cast = read_cast(ws.abs(ep.agent_cast))
    assert agent_cast.markers and agent_cast.markers[0][1] == "step 0"
    assert abs(agent_cast.markers[0][0] - step.marker_time) < 1e-6
    verifier_cast = read_cast(ws.abs(ep.verifier_cast))
    assert "bash /tests/test.sh" in verifier_cast.output()


def test_recorded_casts_play_in_asciinema(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, OracleAgent())
    asciinema = Path(sys.executable).with_name("asciinema")
    for rel in (res.agent_cast, res.verifier_cast):
        proc = subprocess.run(
            [str(asciinema), "play", "-s", "50", str(ws.abs(rel))],
            stdin=subprocess.DEVNULL,
            capture_output=True,
            timeout=60,
        )
        assert proc.returncode == 0, proc.stderr
    out = subprocess.run(
        [str(asciinema), "cat", str(ws.abs(res.agent_cast))], capture_output=True, text=True, timeout=60
    ).stdout
    assert "echo 42 > /app/answer.txt" in out


def test_nop_fails_and_every_cheat_gets_reward_zero_on_a_sound_task(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    assert run_episode(ws, vid, NopAgent()).outcome == "failed"
    for cheat in CHEATS:
        if cheat in TAMPER_CHEATS:
            continue  # tests/engine/run/test_guard.py: they end agent_error:verifier_tamper
        res = run_episode(ws, vid, cheat())
        assert (res.outcome, res.reward) == ("failed", 0.0), cheat.name


def test_replaying_the_cast_rebuilds_the_live_screen(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    screens: list[str] = []

    class Probe:
        name = "probe"

        def run(self, ctx: AgentContext) -> AgentResult:
            ctx.begin_step(0)
            ctx.terminal.run("printf '\\033[1;31mred\\033[0m\\n'; seq 1 60; echo done", timeout=20)
            screens.append(ctx.terminal.screen_text())
            ctx.begin_step(1)  # marks the cast right after the live screen was read
            return AgentResult()

    res = run_episode(ws, vid, Probe())
    cast = read_cast(ws.abs(res.agent_cast))
    # The hang-up at the end (C-c, exit) is recorded too, so replay up to the marker, as a seek would.
    seen = next(t for t, label in cast.markers if label == "step 1")
    screen = Screen(cast.header["width"], cast.header["height"])
    screen.feed("".join(e.data for e in cast.events if e.code == "o" and e.time <= seen))
    assert screen.text() == screens[0]
    assert "done" in screens[0]


class _KillContainer:
    name = "killer"

    def run(self, ctx: AgentContext) -> AgentResult:
        ctx.terminal.run("echo about to die", timeout=10)
        ctx.terminal.container.kill()
        deadline = time.monotonic() + 30  # until the terminal has seen its container go
        while ctx.terminal.alive:
            assert time.monotonic() < deadline, "the terminal outlived its killed container"
            time.sleep(0.05)
        ctx.terminal.run("echo after", timeout=5)
        return AgentResult()


def test_container_killed_mid_episode_is_infra_error_and_retried(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, _KillContainer, max_infra_retries=1, retry_backoff_s=0.1)
    assert res.outcome == "infra_error:container_died"
    assert res.retries == 1 and len(res.try_errors) == 2
    with session(ws.engine) as s:
        ep = present(queries.get_episode(s, res.episode_id))
    assert ep.outcome == "infra_error:container_died" and ep.retries == 1
    assert "try 0: infra_error:container_died" in ep.error


def test_verifier_timeout(workspace: Workspace, tmp_path: Path) -> None:
    d = make_task(tmp_path, "slow-verifier", test="#!/bin/bash\nsleep 30\n", verifier_timeout=2)
    vid = _import(workspace, d)["slow-verifier"]
    res = run_episode(workspace, vid, OracleAgent())
    assert res.outcome == "infra_error:verifier_timeout"
    assert "2 s" in res.detail


def test_missing_and_garbled_reward(workspace: Workspace, tmp_path: Path) -> None:
    make_task(tmp_path, "no-reward", test="#!/bin/bash\necho checked\n")
    make_task(
        tmp_path,
        "bad-reward",
        test="#!/bin/bash\nmkdir -p /logs/verifier; echo yes > /logs/verifier/reward.txt\n",
    )
    ids = _import(workspace, tmp_path)
    res = run_episode(workspace, ids["no-reward"], OracleAgent())
    assert res.outcome == "infra_error:reward_missing" and "reward.txt" in res.detail
    res = run_episode(workspace, ids["bad-reward"], OracleAgent())
    assert res.outcome == "infra_error:reward_missing" and "expected a number, got 'yes'" in res.detail


def test_reward_json_is_read_before_reward_txt(workspace: Workspace, tmp_path: Path) -> None:
    """reward.json's "reward" is the scalar and every key is kept; a reward.txt that disagrees with it
    voids the reward (one of the two is not the verifier's: engine/tasks/rewards.py)."""
    test = (
        "#!/bin/bash\nmkdir -p /logs/verifier\necho $REWARD_TXT > /logs/verifier/reward.txt\n"
        'echo \'{"reward": 1.0, "speed": 0.25}\' > /logs/verifier/reward.json\n'
    )
    agree = test.replace("$REWARD_TXT", "1")
    res = run_episode(
        workspace,
        _import(workspace, make_task(tmp_path, "json-reward", test=agree))["json-reward"],
        NopAgent(),
    )
    assert (res.outcome, res.reward, res.rewards) == ("passed", 1.0, {"reward": 1.0, "speed": 0.25})
    with session(workspace.engine) as s:
        assert queries.episode_rewards(present(queries.get_episode(s, res.episode_id))) == res.rewards
    vids = _import(workspace, make_task(tmp_path, "json-reward-2", test=test.replace("$REWARD_TXT", "0")))
    res = run_episode(workspace, vids["json-reward-2"], NopAgent())
    assert res.outcome == "agent_error:reward_forged" and "disagree" in res.detail


def test_build_failure_keeps_the_log(workspace: Workspace, tmp_path: Path) -> None:
    d = make_task(
        tmp_path, "broken-build", dockerfile="FROM debian:bookworm-slim\nRUN echo boom-7 && exit 7\n"
    )
    vid = _import(workspace, d)["broken-build"]
    res = run_episode(workspace, vid, OracleAgent())
    assert res.outcome == "infra_error:image_build_failed" and res.retries == 0
    assert "boom-7" in res.detail
    with session(workspace.engine) as s:
        builds = queries.image_builds(s, vid)
    assert builds and not builds[0].ok and "boom-7" in builds[0].log


def test_agent_timeout(workspace: Workspace, tmp_path: Path) -> None:
    d = make_task(tmp_path, "slow-solution", solve="#!/bin/bash\nsleep 60\n", agent_timeout=2)
    vid = _import(workspace, d)["slow-solution"]
    res = run_episode(workspace, vid, OracleAgent())
    assert res.outcome == "agent_error:agent_timeout"
    assert res.reward == 0.0  # the verifier still ran: evidence for the curator


def test_dead_daemon_is_daemon_unavailable(
    tiny: tuple[Workspace, int], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, vid = tiny
    monkeypatch.setenv("DOCKER_HOST", "unix:///tmp/bandpass-no-such-docker.sock")
    res = run_episode(ws, vid, OracleAgent(), max_infra_retries=1, retry_backoff_s=0.01)
    assert res.outcome == "infra_error:daemon_unavailable" and res.retries == 1


def test_examples_oracle_passes_on_a_sound_example(workspace: Workspace) -> None:
    vid = _import(workspace, EXAMPLES / "fix-catalog-makefile")["fix-catalog-makefile"]
    assert run_episode(workspace, vid, OracleAgent()).outcome == "passed"


def test_this_suite_leaves_no_episode_container(tmp_path_factory: pytest.TempPathFactory) -> None:
    base = str(tmp_path_factory.getbasetemp())
    sandbox_pool.drain()  # spares and queued removals are this process's to finish (they would at exit)
    client = docker.from_env()

    def exists(container_id: str) -> bool:
        try:
            client.api.inspect_container(container_id)
        except docker.errors.NotFound:
            return False
        return True

    def ours() -> list[tuple[list[str], str]]:
        # the low-level list inspects nothing: another suite removing its own container meanwhile cannot
        # fail it; an entry the engine itself no longer knows (inspect: no such container) is a stale row
        # of its list, seen once left "Removal In Progress" for good after a removal that had succeeded
        return [
            (c.get("Names") or [], c.get("State", ""))
            for c in client.api.containers(all=True, filters={"label": "bandpass=1"})
            if (c.get("Labels") or {}).get("bandpass.workspace", "").startswith(base) and exists(c["Id"])
        ]

    # a removal the engine is still finishing is on its way out (on a loaded engine a request can time out
    # while the engine goes on, and the retry is told "already in progress"): wait for those, only those
    wait_until(
        lambda: all(state != "removing" for _, state in ours()), timeout=300, what="removals finishing"
    )
    assert ours() == []
