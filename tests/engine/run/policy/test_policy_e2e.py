"""Policy rollouts end to end: the episode runner, a real Docker sandbox and terminal, and the policy
over real HTTP (the scripted OpenAI-compatible server standing in for ``vllm serve``)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from bandpass.engine.core.config import PolicyModelConfig
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.policy import PolicyAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.run.policy.client import PolicyClient
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.narrow import present
from tests.support.servers.openai_server import OpenAIServer, running_server
from tests.support.taskfactory import make_task

pytestmark = pytest.mark.docker


def _reply(keys: list[str], complete: bool = False) -> str:
    return json.dumps(
        {
            "analysis": "",
            "plan": "",
            "commands": [{"keystrokes": k, "duration": 5} for k in keys],
            "task_complete": complete,
        }
    )


SOLVE_42 = [
    _reply(["echo 42 > /app/answer.txt\n", "cat /app/answer.txt\n"]),
    _reply([], True),
    _reply([], True),
]


@pytest.fixture
def server() -> Iterator[OpenAIServer]:
    with running_server() as s:
        s.script("script:solve-42", SOLVE_42)
        yield s


@pytest.fixture
def tiny(workspace: Workspace, tmp_path: Path) -> tuple[Workspace, int]:
    report = import_paths(workspace, [make_task(tmp_path / "src", "answer-42", agent_timeout=60)])
    assert report.ok
    with session(workspace.engine) as s:
        return workspace, {r.name: r.version_id for r in queries.task_rows(s)}["answer-42"]


def _agent(server: OpenAIServer, model: str) -> PolicyAgent:
    cfg = PolicyModelConfig(name=model, base_url=server.base_url, max_tokens=512)
    return PolicyAgent(PolicyClient(cfg, timeout=10, backoff_base=0.01), max_parse_errors=2)


def test_policy_solves_in_docker(tiny: tuple[Workspace, int], server: OpenAIServer) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, lambda: _agent(server, "script:solve-42"), max_infra_retries=0)
    assert (res.outcome, res.reward) == ("passed", 1.0), res.detail
    with session(ws.engine) as s:
        ep = present(queries.get_episode(s, res.episode_id))
        steps = queries.steps(s, res.episode_id)
    assert [st.index for st in steps] == [0, 1, 2]
    first = json.loads(steps[0].action_json)
    assert [r["exit_code"] for r in first["results"]] == [0, 0]  # shell markers, not sleeps
    assert all(r["completed"] and not r["timed_out"] for r in first["results"])  # before the duration cap
    assert "42" in steps[1].observation  # the policy saw cat's output
    assert steps[0].prompt_tokens > 0 and steps[0].raw_reply == SOLVE_42[0]
    cast = read_cast(ws.abs(ep.agent_cast))
    assert [label for _, label in cast.markers] == ["step 0", "step 1", "step 2"]
    assert [round(t, 6) for t, _ in cast.markers] == [round(st.marker_time, 6) for st in steps]


def test_policy_garbage_is_parse_error_with_reward_as_evidence(
    tiny: tuple[Workspace, int], server: OpenAIServer
) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, lambda: _agent(server, "script:garbage"), max_infra_retries=0)
    assert res.outcome == "agent_error:parse_error" and res.reward == 0.0
    with session(ws.engine) as s:
        steps = queries.steps(s, res.episode_id)
    assert len(steps) == 2 and json.loads(steps[0].action_json)["parse_error"] == "no JSON object found"


def test_policy_rate_limited_is_infra(tiny: tuple[Workspace, int], server: OpenAIServer) -> None:
    ws, vid = tiny
    res = run_episode(ws, vid, lambda: _agent(server, "script:rate-limited"), max_infra_retries=0)
    assert res.outcome == "infra_error:rate_limited" and res.reward is None


def test_every_request_attempt_is_stored(tiny: tuple[Workspace, int], server: OpenAIServer) -> None:
    ws, vid = tiny
    server.script("script:flaky-42", [{"status": 500}, {"status": 429, "retry_after": "0"}, *SOLVE_42])
    res = run_episode(ws, vid, lambda: _agent(server, "script:flaky-42"), max_infra_retries=0)
    assert res.outcome == "passed", res.detail
    with session(ws.engine) as s:
        steps = queries.steps(s, res.episode_id)
    first = json.loads(steps[0].attempts_json)
    assert [a.get("status") for a in first] == [500, 429, None]
    assert first[0]["error"] == "HTTP 500" and all(a["latency_s"] >= 0 for a in first)
    assert [len(json.loads(st.attempts_json)) for st in steps[1:]] == [1, 1]
    prompt_count = json.loads(steps[0].action_json)["prompt_count"]
    assert prompt_count["exact"] and prompt_count["tokens"] == steps[0].prompt_tokens
