"""A policy cannot turn its own failure into an infrastructure error (issue #22), in real Docker.

Ending the container from inside, exhausting its memory or ending the agent's shell are the policy's
failures: ``agent_error:<code>``, reward 0, never retried, counted in pass@k. The same death caused from
outside (``docker kill``), by a dead daemon or by the host stays infrastructure: retried, excluded. Each
verdict is kept on the episode with the engine's evidence and shown by ``bandpass queue``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.app.reads import episode_evidence
from bandpass.engine.audit.task_audit import audit_version
from bandpass.engine.core import outcomes
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.base import AgentContext, AgentResult
from bandpass.engine.run.agents.builtin import (
    SANDBOX_PROBES,
    ForkBombCheat,
    KillSandboxCheat,
    MemoryHogCheat,
    OracleAgent,
    _type,
)
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox import pool as sandbox_pool
from bandpass.engine.sandbox.attribution import Evidence, attribute
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.narrow import present
from tests.support.taskfactory import make_task


def _import(ws: Workspace, *dirs: Path) -> dict[str, int]:
    report = import_paths(ws, list(dirs))
    assert report.ok, [i.problems for i in report.items]
    with session(ws.engine) as s:
        return {r.name: r.version_id for r in queries.task_rows(s)}


@pytest.fixture
def tiny(workspace: Workspace, tmp_path: Path) -> tuple[Workspace, int]:
    return workspace, _import(workspace, make_task(tmp_path / "src", "answer-42"))["answer-42"]


def _stored(ws: Workspace, episode_id: int) -> tuple[str, float | None, int, dict[str, Any]]:
    with session(ws.engine) as s:
        ep = queries.get_episode(s, episode_id)
        assert ep is not None
        return ep.outcome, ep.reward, ep.retries, queries.episode_evidence(s, episode_id)


# --- the policy's doing: agent errors, reward 0, never retried ------------------------------------------


@pytest.mark.docker
def test_policy_killing_its_container_is_agent_error_not_retried(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, KillSandboxCheat, max_infra_retries=2, retry_backoff_s=0.1)
    assert (res.outcome, res.reward, res.retries, res.try_errors) == (
        "agent_error:sandbox_killed",
        0.0,
        0,
        [],
    )
    assert outcomes.is_valid_sample(res.outcome)  # it enters pass@k's n as a failure
    assert "ended from inside" in res.detail
    outcome, reward, retries, ev = _stored(ws, res.episode_id)
    assert (outcome, reward, retries) == ("agent_error:sandbox_killed", 0.0, 0)
    assert ev["verdict"]["by"] == "policy" and ev["daemon_healthy"] and ev["agent_started"]
    actions = [e["action"] for e in ev["events"]]
    assert "die" in actions and "kill" not in actions  # nobody outside signalled it
    assert ev["status"] == "exited" and ev["exit_code"] in (137, 143)
    shown = episode_evidence(ws, res.episode_id)
    assert shown["outcome"] == "agent_error:sandbox_killed" and shown["summary"].startswith("policy: ")
    json.dumps(shown)  # JSON-ready for `bandpass show`


@pytest.mark.docker
def test_policy_exhausting_its_memory_is_agent_error_oom(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, MemoryHogCheat, max_infra_retries=2, retry_backoff_s=0.1)
    assert (res.outcome, res.reward, res.retries) == ("agent_error:oom", 0.0, 0)
    assert "task's own limit of 256 MB" in res.detail
    _, _, _, ev = _stored(ws, res.episode_id)
    assert any(e["action"] == "oom" for e in ev["events"]) and ev["memory_limit_mb"] == 256
    assert ev["cgroup_oom_kills"] >= 1  # read on the host, from the container's own memory cgroup
    assert ev["verdict"] == {"outcome": "agent_error:oom", "by": "policy", "why": ev["verdict"]["why"]}
    assert outcomes.suggested_tag(res.outcome) == "agent.oom"  # not infra.oom: the policy did it
    assert outcomes.suggested_tag("infra_error:oom") == "infra.oom"


class _ExitShell:
    name = "exit-shell"

    def run(self, ctx: AgentContext) -> AgentResult:
        return _type(ctx, 0, "exit 3\n", self.name) or AgentResult()


@pytest.mark.docker
def test_policy_ending_its_shell_is_agent_error(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, _ExitShell, max_infra_retries=2, retry_backoff_s=0.1)
    assert (res.outcome, res.reward, res.retries) == ("agent_error:sandbox_killed", 0.0, 0)
    _, _, _, ev = _stored(ws, res.episode_id)
    assert ev["status"] == "running" and ev["shell_exit_code"] == 3 and not ev["terminal_alive"]
    assert "exit status 3" in res.detail


class _ForkUntilThePidLimit:
    name = "fork-loop"

    def run(self, ctx: AgentContext) -> AgentResult:
        return _type(ctx, 0, "exec sh -c 'while :; do sleep 1000 & done'\n", self.name) or AgentResult()


@pytest.mark.docker
def test_policy_exhausting_the_pid_limit_is_agent_error(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, _ForkUntilThePidLimit, max_infra_retries=2, retry_backoff_s=0.1)
    assert (res.outcome, res.reward, res.retries) == ("agent_error:pids_exhausted", 0.0, 0), res.try_errors
    _, _, _, ev = _stored(ws, res.episode_id)
    assert ev["pids_limit"] == 512 and ev["pids_limit_hits"] >= 1
    assert outcomes.suggested_tag(res.outcome) == "agent.pids_exhausted"


class _FillTheDisk:
    """Writes 64 MB in one go and returns: the last measurement, when the agent phase ends, sees it."""

    name = "disk-filler"

    def run(self, ctx: AgentContext) -> AgentResult:
        keys = "head -c 67108864 /dev/zero > /app/fill; echo written\n"
        return _type(ctx, 0, keys, self.name) or AgentResult()


class _KeepWriting:
    """Keeps appending until stopped: the watch's sampling must stop it long before the agent's timeout."""

    name = "disk-writer"

    def run(self, ctx: AgentContext) -> AgentResult:
        keys = "while :; do head -c 4194304 /dev/zero >> /app/fill; sleep 0.1; done\n"
        return _type(ctx, 0, keys, self.name) or AgentResult()


@pytest.fixture
def small_disk(workspace: Workspace, tmp_path: Path) -> tuple[Workspace, int]:
    d = make_task(tmp_path / "src", "small-disk", agent_timeout=300, environment="storage_mb = 32\n")
    return workspace, _import(workspace, d)["small-disk"]


@pytest.mark.docker
def test_policy_going_over_its_disk_allowance_is_agent_error_disk_full(
    small_disk: tuple[Workspace, int],
) -> None:
    ws, vid = small_disk
    res = run_episode(ws, vid, _FillTheDisk, max_infra_retries=2, retry_backoff_s=0.1)
    assert (res.outcome, res.reward, res.retries) == ("agent_error:disk_full", 0.0, 0), res.detail
    assert outcomes.is_valid_sample(res.outcome)
    assert "over the task's own disk allowance of 32 MB" in res.detail
    _, _, _, ev = _stored(ws, res.episode_id)
    assert ev["storage_limit_mb"] == 32 and ev["disk_over_limit"] and ev["disk_used_mb"] >= 64
    assert ev["disk_measured_by"] == "layer"  # the upper dir, walked on the host: not forgeable inside
    assert ev["verdict"]["by"] == "policy"
    assert outcomes.suggested_tag(res.outcome) == "agent.disk_full"
    assert outcomes.suggested_tag("infra_error:disk_full") == "infra.disk_full"


@pytest.mark.docker
def test_a_writer_over_its_disk_allowance_is_stopped_during_the_agent_phase(
    small_disk: tuple[Workspace, int],
) -> None:
    ws, vid = small_disk
    res = run_episode(ws, vid, _KeepWriting, max_infra_retries=2, retry_backoff_s=0.1)
    assert (res.outcome, res.reward, res.retries) == ("agent_error:disk_full", 0.0, 0), res.detail
    _, _, _, ev = _stored(ws, res.episode_id)
    # stopped by the watch (the agent's timeout is 300 s): its processes killed, its shell with them
    assert ev["disk_enforced"].startswith("Bandpass killed the agent's processes at "), ev
    assert not ev["terminal_alive"] and ev["disk_used_mb"] > 32


class _HonestWriter:
    name = "honest-writer"

    def run(self, ctx: AgentContext) -> AgentResult:
        keys = "head -c 8388608 /dev/zero > /app/scratch && rm /app/scratch && echo 42 > /app/answer.txt\n"
        return _type(ctx, 0, keys, self.name) or AgentResult()


@pytest.mark.docker
def test_work_within_the_disk_allowance_is_judged_by_the_verifier(small_disk: tuple[Workspace, int]) -> None:
    ws, vid = small_disk
    res = run_episode(ws, vid, _HonestWriter)
    assert (res.outcome, res.reward) == ("passed", 1.0), res.detail


@pytest.mark.docker
def test_a_fork_bomb_left_running_is_agent_error_pids_exhausted(workspace: Workspace, tmp_path: Path) -> None:
    d = make_task(tmp_path / "src", "few-pids", environment="pids_limit = 64\n")
    ws, vid = workspace, _import(workspace, d)["few-pids"]
    res = run_episode(ws, vid, ForkBombCheat, max_infra_retries=2, retry_backoff_s=0.1)
    assert (res.outcome, res.reward, res.retries) == ("agent_error:pids_exhausted", 0.0, 0), res.evidence
    _, _, _, ev = _stored(ws, res.episode_id)
    assert ev["pids_read_by"] == "host" and ev["pids_limit"] == 64 and ev["pids_limit_hits"] >= 1
    assert ev["terminal_alive"] and "fork bomb" in ev["verdict"]["why"]


# --- genuine infrastructure keeps its codes: retried, excluded --------------------------------------------


class _DockerKillFromOutside:
    """Someone on the host runs ``docker kill`` (or ``docker stop``) on the episode's container."""

    name = "outside-kill"
    signal = "KILL"

    def run(self, ctx: AgentContext) -> AgentResult:
        ctx.terminal.run("echo about to be killed", timeout=10)
        cid = ctx.terminal.container.id
        subprocess.run(["docker", "kill", "--signal", self.signal, cid], check=True, capture_output=True)
        return _type(ctx, 1, "echo after\n", self.name) or AgentResult()


class _DockerStopFromOutside(_DockerKillFromOutside):
    name = "outside-term"
    signal = "TERM"


@pytest.mark.docker
@pytest.mark.parametrize("agent", [_DockerKillFromOutside, _DockerStopFromOutside])
def test_outside_docker_kill_stays_infra_and_is_retried(
    tiny: tuple[Workspace, int], agent: type[_DockerKillFromOutside]
) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, agent, max_infra_retries=1, retry_backoff_s=0.1)
    assert (res.outcome, res.reward, res.retries) == ("infra_error:container_died", None, 1)
    assert not outcomes.is_valid_sample(res.outcome)  # excluded from pass@k
    assert "killed from outside" in res.detail and "try 0: infra_error:container_died" in res.try_errors[0]
    _, _, _, ev = _stored(ws, res.episode_id)
    (kill,) = [e for e in ev["events"] if e["action"] == "kill"][:1]
    assert kill["signal"] == (9 if agent.signal == "KILL" else 15)
    assert ev["verdict"]["by"] == "outside"


@pytest.mark.docker
def test_outside_kill_during_the_verifier_stays_infra(workspace: Workspace, tmp_path: Path) -> None:
    """The control (the verifier on a fresh container) never blames the agent for an outside kill."""
    import threading

    import docker

    from bandpass.engine.core.events import EventBus, PtyOutput

    slow = "#!/bin/bash\necho verifier-waiting\nsleep 60\necho 1 > /logs/verifier/reward.txt\n"
    d = make_task(tmp_path / "src", "slow-test", test=slow, verifier_timeout=120)
    vid = _import(workspace, d)["slow-test"]
    bus, client, fired, seen = EventBus(), docker.from_env(), threading.Event(), []

    def kill_when_the_tests_run(ev: PtyOutput) -> None:
        if ev.stream != "verifier" or fired.is_set():
            return
        seen.append(ev.data)
        if "verifier-waiting\r\n" not in "".join(seen):  # the echo's output, not the typed command
            return
        fired.set()
        # the episode's clean room (bandpass.role=verifier, not the agent's paused container) in this
        # workspace (episode ids restart at 1 in every workspace), by episode label (cold start) or by the
        # warm pool's record of what it handed out (not the pool's next spare, which looks the same)
        (c,) = [
            c
            for c in client.containers.list(
                filters={"label": ["bandpass.role=verifier", f"bandpass.workspace={workspace.root}"]}
            )
            if c.labels.get("bandpass.episode") == str(ev.episode_id)
            or c.id in sandbox_pool.served(present(ev.episode_id))
        ]
        threading.Thread(target=c.kill, daemon=True).start()

    bus.subscribe(PtyOutput, kill_when_the_tests_run)
    res = run_episode(workspace, vid, OracleAgent(), bus=bus, max_infra_retries=0)
    assert fired.is_set()
    # container_died, or reward_missing when the verifier read back before the engine said "exited"
    assert outcomes.is_infra(res.outcome) and res.reward is None, res.detail
    assert "control" not in res.evidence and res.evidence.get("verdict", {}).get("by") != "policy"


# --- the rules, for evidence real Docker cannot safely produce on a shared machine ------------------------


def _ev(**kw: object) -> Evidence:
    base: dict[str, object] = {"memory_limit_mb": 512, "pids_limit": 64, "agent_started": True}
    return Evidence(**{**base, **kw})  # type: ignore[arg-type]


def test_rules_for_daemon_host_harness_and_pre_agent_deaths() -> None:
    died = {"action": "die", "exit_code": 137}
    assert attribute(_ev(daemon_healthy=False, daemon_error="refused")).outcome == (
        "infra_error:daemon_unavailable"
    )
    assert attribute(_ev(status="exited", harness_stops=["removed"], events=[died])).by == "harness"
    # the kernel OOM-killed in the container's own cgroup while its memory never reached the task's limit:
    # a global OOM, the host ran out, not the task
    host = attribute(
        _ev(status="exited", exit_code=137, events=[died], cgroup_oom_kills=2, cgroup_limit_reached=False)
    )
    assert (host.outcome, host.by) == ("infra_error:oom", "host")
    # the same kills with the cgroup at its limit are the policy's (the engine's oom event may lag)
    lagging = attribute(
        _ev(
            status="running",
            terminal_alive=False,
            shell_exit_code=137,
            cgroup_oom_kills=1,
            cgroup_limit_reached=True,
        )
    )
    assert (lagging.outcome, lagging.by) == ("agent_error:oom", "policy")
    assert "1 OOM kill in the container's memory cgroup" in lagging.why
    # the engine's oom event for the container's own limit is the policy's
    own = attribute(_ev(status="exited", exit_code=137, events=[{"action": "oom"}, died]))
    assert own.outcome == "agent_error:oom"
    # SIGKILLed with no OOM kill in its own cgroup (``kill -KILL -1``): the policy, whatever other
    # containers' memory did (a host-wide counter once read this as "the host ran out of memory")
    killed = attribute(_ev(status="exited", exit_code=137, events=[died], cgroup_oom_kills=0))
    assert (killed.outcome, killed.by) == ("agent_error:sandbox_killed", "policy")
    # before the agent's terminal was up no policy action had run: infra whatever the evidence
    early = attribute(_ev(status="exited", exit_code=137, events=[{"action": "oom"}], agent_started=False))
    assert early.outcome == "infra_error:oom" and early.by == "harness"
    pids = attribute(_ev(status="running", terminal_alive=False, pids_current=64))
    assert pids.outcome == "agent_error:pids_exhausted"


# --- shown with the outcome ------------------------------------------------------------------------------


@pytest.mark.docker
def test_queue_cli_shows_who_ended_the_sandbox(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, KillSandboxCheat)
    env = {**os.environ, "BANDPASS_AUTHOR": "cli-user"}
    cmd = [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(ws.root), "queue"]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, env=env)
    assert out.returncode == 0, out.stderr
    assert "agent_error:sandbox_killed" in out.stdout and "(agent.sandbox_killed?)" in out.stdout
    assert "why: policy: the container exited with status" in out.stdout
    data = json.loads(subprocess.run([*cmd, "--json"], capture_output=True, text=True, env=env).stdout)
    (item,) = [i for i in data if i["episode_id"] == res.episode_id]
    assert item["attribution"].startswith("policy: ")
    show = [
        sys.executable,
        "-m",
        "bandpass.tui.cli",
        "--workspace",
        str(ws.root),
        "show",
        str(res.episode_id),
    ]
    out = subprocess.run(show, capture_output=True, text=True, timeout=60, env=env)
    assert "who ended the sandbox: policy: the container exited with status" in out.stdout, out.stderr
    assert "  evidence: container exited 1" in out.stdout and "engine: die(exit 1" in out.stdout
    from bandpass.engine.review.replay import load_source

    src = load_source(ws, res.episode_id)  # the Replay screen's header
    assert src.title.endswith("agent_error:sandbox_killed (by policy)") and src.attribution.startswith(
        "policy: "
    )


# --- the audit --------------------------------------------------------------------------------------------


@pytest.mark.docker
def test_audit_sandbox_probes_end_as_agent_errors_on_a_sound_task(tiny: tuple[Workspace, int]) -> None:
    ws, vid = tiny
    report = audit_version(ws, vid, reruns=1)
    assert report.verdict == "accepted", report.checks.get("findings")
    probes = report.checks["sandbox_probes"]
    assert {k: (v["outcome"], v["ok"], v["by"]) for k, v in probes.items()} == {
        p.name: (p.expected, True, "policy") for p in SANDBOX_PROBES
    }
    assert "oracle_memory" not in report.checks


@pytest.mark.docker
def test_audit_oracle_over_the_memory_limit_is_env_task_mismatch(
    workspace: Workspace, tmp_path: Path
) -> None:
    hungry = "#!/bin/bash\nx=$(head -c 150000000 /dev/zero | tr '\\0' x)\necho 42 > /app/answer.txt\n"
    d = make_task(tmp_path / "src", "hungry", solve=hungry, memory_mb=64)
    vid = _import(workspace, d)["hungry"]
    report = audit_version(workspace, vid, reruns=1)
    assert report.verdict == "rejected"
    assert "invalidity.env_task_mismatch" in report.reasons
    (finding,) = [f for f in report.checks["findings"] if f["code"] == "invalidity.env_task_mismatch"]
    assert "memory_mb = 64" in finding["detail"] and "OOM kill" in finding["detail"]
    (fig,) = report.checks["oracle_memory"]
    assert fig["memory_mb"] == 64 and fig["oom_kills"] >= 1


@pytest.mark.docker
def test_audit_oracle_over_the_disk_allowance_is_env_task_mismatch(
    workspace: Workspace, tmp_path: Path
) -> None:
    greedy = "#!/bin/bash\nhead -c 67108864 /dev/zero > /app/cache.bin\necho 42 > /app/answer.txt\n"
    d = make_task(tmp_path / "src", "greedy", solve=greedy, environment="storage_mb = 32\n")
    report = audit_version(workspace, _import(workspace, d)["greedy"], reruns=1)
    assert report.verdict == "rejected"
    (finding,) = [f for f in report.checks["findings"] if f["code"] == "invalidity.env_task_mismatch"]
    assert "storage_mb = 32" in finding["detail"] and "disk allowance" in finding["detail"]
    (fig,) = report.checks["oracle_disk"]
    assert fig["storage_mb"] == 32 and fig["used_mb"] >= 64


@pytest.mark.docker
def test_a_batch_of_sandbox_killers_counts_as_failures_in_pass_at_k(tiny: tuple[Workspace, int]) -> None:
    """The issue's story: a policy whose only action kills the container. Its episodes are valid samples
    (n = 3, c = 0, no infra), so they neither vanish from pass@k nor push the task over the infra gate."""
    from bandpass.engine.calibration.calibrate import estimates
    from bandpass.engine.run.rollouts import plan_batch, run_planned

    ws, vid = tiny
    bid = plan_batch(ws, KillSandboxCheat.name, [vid], 3, kind="builtin")
    sm = run_planned(ws, bid, concurrency=1)
    assert sm.finished and sm.outcomes == {"agent_error:sandbox_killed": 3}, sm.outcomes
    (est,) = estimates(ws, KillSandboxCheat.name)
    assert (est.n, est.c, est.infra_errors, est.infra_rate) == (3, 0, 0, 0.0)
    assert est.pass_at[1] == 0.0


@pytest.mark.docker
def test_scripted_policy_over_http_killing_its_sandbox(tiny: tuple[Workspace, int]) -> None:
    """The issue's reproduction: a policy served over the OpenAI wire protocol whose only action is
    ``kill -TERM 1; kill -KILL -1`` (it then keeps asking to continue). Before: container_died, retried
    twice, excluded. Now: one try, a valid failure."""
    from bandpass.engine.core.config import PolicyModelConfig
    from bandpass.engine.run.agents.policy import PolicyAgent
    from bandpass.engine.run.policy.client import PolicyClient
    from tests.support.servers.openai_server import running_server

    kill = {"analysis": "", "plan": "", "commands": [{"keystrokes": "kill -TERM 1; kill -KILL -1\n"}]}
    more = {"analysis": "", "plan": "", "commands": [{"keystrokes": "echo still here\n", "duration": 2}]}
    ws, vid = tiny
    with running_server() as server:
        server.script("script:killer", [json.dumps(kill), json.dumps(more), json.dumps(more)])
        cfg = PolicyModelConfig(name="script:killer", base_url=server.base_url, max_tokens=256)

        def agent() -> PolicyAgent:
            return PolicyAgent(PolicyClient(cfg, timeout=10, backoff_base=0.01), max_parse_errors=2)

        res = run_episode(ws, vid, agent, max_infra_retries=2, retry_backoff_s=0.1)
    assert (res.outcome, res.reward, res.retries) == ("agent_error:sandbox_killed", 0.0, 0), res.detail
    _, _, _, ev = _stored(ws, res.episode_id)
    assert ev["verdict"]["by"] == "policy" and not [e for e in ev["events"] if e["action"] == "kill"]


def test_a_ray_node_result_carries_its_evidence_to_the_head(workspace: Workspace) -> None:
    """Ray nodes never open the head's store: the evidence travels in the result row like the outcome."""
    from bandpass.engine.run.executors.ray_executor import commit_result
    from tests.support.replay_data import make_episode

    eid = make_episode(workspace, outcome="agent_error:sandbox_killed", with_casts=False)
    with session(workspace.engine) as s:
        vid = present(queries.get_episode(s, eid)).task_version_id
    verdict = {"outcome": "agent_error:sandbox_killed", "by": "policy", "why": "ended from inside"}
    row = {
        "status": "done",
        "outcome": "agent_error:sandbox_killed",
        "reward": 0.0,
        "error": "",
        "agent_cast": "",
        "verifier_cast": "",
        "verifier_output": "",
        "retries": 0,
        "evidence_json": json.dumps({"events": [{"action": "die", "exit_code": 143}], "verdict": verdict}),
    }
    commit_result(workspace, eid, vid, {"files": {}, "row": row, "steps": [], "builds": []})
    shown = episode_evidence(workspace, eid)
    assert shown["evidence"]["verdict"] == verdict and shown["summary"] == "policy: ended from inside"
