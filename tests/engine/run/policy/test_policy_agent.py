"""The policy agent's loop: real HTTP server + real SDK for the policy, a fake terminal for the sandbox.

The real-Docker end to end run lives in tests/engine/run/policy/test_policy_e2e.py; here every outcome code is
driven deterministically by the scripted model the server serves.
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from bandpass.engine.core.config import PolicyModelConfig
from bandpass.engine.run.agents.base import AgentContext, AgentResult, StepRecord
from bandpass.engine.run.agents.policy import PolicyAgent
from bandpass.engine.run.policy.client import PolicyClient
from bandpass.engine.tasks.taskdir import TaskSpec
from tests.support.fake_terminal import FakeTerminal
from tests.support.servers.openai_server import OpenAIServer


def _run(
    server: OpenAIServer,
    model: str,
    *,
    terminal: FakeTerminal | None = None,
    deadline_s: float = 30.0,
    timeout: float = 5.0,
    markers: list[float] | None = None,
    **agent_kw: object,
) -> tuple[AgentResult, list[StepRecord], FakeTerminal]:
    cfg = PolicyModelConfig(name=model, base_url=server.base_url, max_tokens=512, context_window=32768)
    client = PolicyClient(cfg, timeout=timeout, max_retries=4, backoff_base=0.01)
    agent = PolicyAgent(client, **agent_kw)  # type: ignore[arg-type]
    term = terminal or FakeTerminal()
    steps: list[StepRecord] = []
    ctx = AgentContext(
        task=TaskSpec(name="hello", path=Path("."), instruction="Create hello.txt containing hello."),
        terminal=term,  # type: ignore[arg-type]
        episode_id=None,
        deadline=time.monotonic() + deadline_s,
        on_step=steps.append,
    )
    result = agent.run(ctx)
    client.close()
    json.dumps([s.__dict__ for s in steps])  # every step must be storable as JSON
    return result, steps, term


def _user_messages(server: OpenAIServer, model: str, n: int) -> list[str]:
    body = server.chat_requests(model)[n].body
    assert body is not None
    return [m["content"] for m in body["messages"] if m["role"] == "user"]


def test_solves_with_confirmation(server: OpenAIServer) -> None:
    result, steps, term = _run(server, "script:solve-hello")
    assert result.error_code is None and result.infra_code is None, result.detail
    assert [k for k, _ in term.sent] == ["echo hello > hello.txt\n", "cat hello.txt\n"]
    assert len(steps) == 3 and [s.index for s in steps] == [0, 1, 2]
    first = steps[0]
    assert first.action["commands"][0]["keystrokes"] == "echo hello > hello.txt\n"
    assert first.action["results"][0]["exit_code"] == 0
    assert first.prompt_tokens > 0 and first.completion_tokens > 0 and first.latency_s > 0
    assert first.raw_reply.startswith("Let me start.") and "Terminal screen:" in first.observation
    assert steps[1].action["task_complete"] and steps[2].action["task_complete"]
    # The system prompt is the versioned file; the task is in the first user message.
    body = server.chat_requests()[0].body
    assert body is not None
    assert body["messages"][0]["role"] == "system" and '"keystrokes"' in body["messages"][0]["content"]
    assert "Create hello.txt containing hello." in body["messages"][1]["content"]
    # Step 3's prompt asked for confirmation and carried step 2's output.
    last_user = _user_messages(server, "script:solve-hello", 2)[-1]
    assert "confirm" in last_user and "cat hello.txt" in last_user


def test_key_names_translated_and_durations_capped(server: OpenAIServer) -> None:
    reply = json.dumps(
        {
            "analysis": "",
            "plan": "",
            "commands": [
                {"keystrokes": "C-c", "duration": 0.1},
                {"keystrokes": "sleep 1000\n", "duration": 500},
            ],
            "task_complete": True,
        }
    )
    server.script("script:keys", [reply])
    _, steps, term = _run(server, "script:keys", max_steps=2)
    assert term.sent[0] == ("\x03", 0.1)
    assert term.sent[1][0] == "sleep 1000\n" and term.sent[1][1] <= 120  # clamped, and capped by deadline
    assert steps[0].action["notes"] == ["commands[1].duration 500 clamped to 120"]


def test_always_garbage_is_parse_error_after_n(server: OpenAIServer) -> None:
    result, steps, term = _run(server, "script:garbage", max_parse_errors=3)
    assert result.error_code == "parse_error" and "no JSON object found" in result.detail
    assert len(steps) == 3 and term.sent == []
    assert [s.action["consecutive"] for s in steps] == [1, 2, 3]
    assert all(s.action["parse_error"] == "no JSON object found" for s in steps)
    assert len(server.chat_requests()) == 3


def test_garbage_then_recover_feeds_error_back(server: OpenAIServer) -> None:
    result, steps, _ = _run(server, "script:garbage-then-recover")
    assert result.error_code is None, result.detail
    assert steps[0].action["parse_error"] == "no JSON object found"
    assert len(steps) == 4
    second = server.chat_requests()[1].body
    assert second is not None
    msgs = second["messages"]
    assert msgs[-2] == {
        "role": "assistant",
        "content": "I would run `ls` and then probably write the file, but I am not sure how.",
    }
    assert msgs[-1]["role"] == "user" and "could not be used: no JSON object found" in msgs[-1]["content"]


def test_turn_limit(server: OpenAIServer) -> None:
    result, steps, term = _run(server, "script:loop", max_steps=4)
    assert result.error_code == "turn_limit" and "4 steps" in result.detail
    assert len(steps) == 4 and len(term.sent) == 4


def test_sleep_past_timeout_is_agent_timeout(server: OpenAIServer) -> None:
    start = time.monotonic()
    result, steps, _ = _run(server, "script:sleep", timeout=0.4, deadline_s=1.2)
    assert result.error_code == "agent_timeout" and result.infra_code is None
    assert time.monotonic() - start < 20  # cut at the deadline, not after the reply's 30 s sleep
    assert steps[-1].action["error"] == "agent_timeout"


def test_flaky_then_success_counts_retries(server: OpenAIServer) -> None:
    result, steps, _ = _run(server, "script:flaky")
    assert result.error_code is None and result.infra_code is None, result.detail
    assert steps[0].action["retries"] == 2 and steps[1].action["retries"] == 0


def test_rate_limited_forever_is_infra(server: OpenAIServer) -> None:
    result, steps, term = _run(server, "script:rate-limited")
    assert result.infra_code == "rate_limited" and result.error_code is None
    assert "429" in result.detail and term.sent == []
    assert len(server.chat_requests()) == 5  # first try + 4 retries
    assert steps[0].action == {"error": "rate_limited", "retries": 4}


def test_policy_down_is_infra_unavailable(server: OpenAIServer) -> None:
    result, _, _ = _run(server, "script:down")
    assert result.infra_code == "policy_unavailable"


def test_observation_cut_recorded_on_step(server: OpenAIServer) -> None:
    big = "line\n" * 20_000
    term = FakeTerminal({"echo hello > hello.txt\n": big})
    result, steps, _ = _run(server, "script:solve-hello", terminal=term, observation_bytes=3000)
    assert result.error_code is None
    cut = [c for c in steps[1].cuts if c["kind"] == "observation"]
    assert cut and cut[0]["part"] == "output" and cut[0]["bytes_cut"] > 90_000
    assert f"[… {cut[0]['bytes_cut']} bytes cut]" in steps[1].observation
    assert len(steps[1].observation.encode()) <= 3000
    assert steps[0].cuts == []


def test_truncated_reply_recorded_as_evidence(server: OpenAIServer) -> None:
    result, steps, _ = _run(server, "script:truncated", max_parse_errors=2)
    assert result.error_code == "parse_error"
    assert steps[0].completion_tokens == 512
    assert steps[0].cuts == [
        {
            "kind": "reply_truncated",
            "cause": "max_tokens",
            "max_tokens": 512,
            "completion_tokens": 512,
            "prompt_tokens": steps[0].prompt_tokens,
            "window": 32768,
        }
    ]
    assert steps[0].action["finish_reason"] == "length"
    retry_prompt = _user_messages(server, "script:truncated", 1)[-1]
    assert "cut off at max_tokens=512" in retry_prompt and "context window" not in retry_prompt


def test_history_trimmed_and_recorded(server: OpenAIServer) -> None:
    term = FakeTerminal({"ls\n": "f\n" * 1500})  # ~3 KB per step: a 4k-token window fills in a few steps
    cfg_window = 4096
    cfg = PolicyModelConfig(
        name="script:loop", base_url=server.base_url, max_tokens=256, context_window=cfg_window
    )
    client = PolicyClient(cfg, timeout=5)
    steps: list[StepRecord] = []
    ctx = AgentContext(
        task=TaskSpec(name="t", path=Path("."), instruction="loop"),
        terminal=term,  # type: ignore[arg-type]
        episode_id=None,
        deadline=time.monotonic() + 30,
        on_step=steps.append,
    )
    result = PolicyAgent(client, max_steps=8).run(ctx)
    assert result.error_code == "turn_limit"
    history = [c for s in steps for c in s.cuts if c["kind"] == "history"]
    assert history and all(c["tokens_after"] <= c["budget"] for c in history)
    last = server.chat_requests()[-1].body
    assert last is not None and "earlier turns cut" in last["messages"][1]["content"]


def test_context_overflow_when_even_the_task_does_not_fit(server: OpenAIServer) -> None:
    cfg = PolicyModelConfig(name="script:loop", base_url=server.base_url, max_tokens=256, context_window=600)
    client = PolicyClient(cfg, timeout=5)
    steps: list[StepRecord] = []
    ctx = AgentContext(
        task=TaskSpec(name="t", path=Path("."), instruction="x"),
        terminal=FakeTerminal(),  # type: ignore[arg-type]
        episode_id=None,
        deadline=time.monotonic() + 30,
        on_step=steps.append,
    )
    result = PolicyAgent(client).run(ctx)
    assert result.error_code == "context_overflow"
    assert steps[0].cuts[-1]["kind"] == "context_overflow"
    assert server.chat_requests() == []  # nothing sent that could not fit


def test_server_side_context_overflow(server: OpenAIServer) -> None:
    # The server's 400 states a 4096-token window although 32768 is configured (and listed): the request
    # is refitted to what the server said and resent; when it still refuses, the two windows that
    # disagree are the diagnosis, not the policy.
    result, steps, _ = _run(server, "script:context-overflow")
    assert result.error_code == "config_mismatch" and "maximum context length" in result.detail
    assert "32768" in result.detail and "4096" in result.detail
    # The first try, then one refit to the stated window and prompt length; the same answer again
    # teaches nothing new, so it stops there.
    requests = server.chat_requests()
    assert len(requests) == 2 and requests[1].body is not None and requests[1].body["max_tokens"] == 96
    assert {"kind": "config_mismatch", "configured": 32768, "served": 4096, "using": 4096} in steps[0].cuts


def test_command_running_past_deadline_is_agent_timeout(server: OpenAIServer) -> None:
    term = FakeTerminal(delay=5.0)
    result, steps, _ = _run(server, "script:solve-hello", terminal=term, deadline_s=1.0)
    assert result.error_code == "agent_timeout"
    assert steps[0].action["results"][0]["timed_out"] is True


def test_api_key_never_reaches_steps(server: OpenAIServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("VLLM_API_KEY", "sk-very-secret")
    result, steps, _ = _run(server, "script:solve-hello")
    assert server.chat_requests()[0].headers["authorization"] == "Bearer sk-very-secret"
    assert "sk-very-secret" not in json.dumps([s.__dict__ for s in steps]) + result.detail
