"""The generator against a server that fails the way real ones do — through the real ``anthropic`` SDK
over real HTTP: a connection closed mid-stream, a stream stalled past the timeout, a stream ending with no
stop reason, nothing listening, tool use refused with a 400 (vLLM without its tool-call flags). Each is
classified, retried within bounds, never taken as a turn, explained in one line with the URL and the
server's words, kept readable (`bandpass generations`, `generations show`) and reported apart from
Bandpass's own errors. No Docker needed: these models never reach a tool that builds.
"""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from typing import Any

import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.generator import (
    BatchResult,
    Budget,
    GeneratorUnreachable,
    RetryPolicy,
    generate_batch,
    generation_report,
)
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import Generation
from tests.support.paths import REPO
from tests.support.servers.anthropic_server import (
    VLLM_TOOLS_REFUSAL,
    AnthropicServer,
    Cut,
    Reply,
    text,
    tool,
)

HAIKU = "claude-haiku-4-5"
FAST_RETRY = RetryPolicy(max_retries=2, backoff_base_s=0.01, backoff_max_s=0.02)


def run(ws: Workspace, url: str, key: str, model: str, **kw: Any) -> BatchResult:
    kw.setdefault("retry", FAST_RETRY)
    return generate_batch(ws, kw.pop("n", 1), model, "v1-plain", api_key=key, base_url=url, seed=3, **kw)


def stored(ws: Workspace, gid: int) -> Generation:
    with session(ws.engine) as s:
        g = queries.get_generation(s, gid)
        assert g is not None
        s.expunge(g)
        return g


def entries(g: Generation, kind: str) -> list[dict[str, Any]]:
    return [e for e in json.loads(g.transcript_json) if e["type"] == kind]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli(ws: Workspace, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full_env = {**os.environ, "PYTHONPATH": str(REPO), **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(ws.root), *args],
        capture_output=True,
        text=True,
        env=full_env,
        timeout=180,
    )


def test_stream_closed_mid_reply_is_retried_and_never_a_turn(
    workspace: Workspace, server: AnthropicServer
) -> None:
    model = f"{HAIKU}-cut"
    server.script(
        model,
        [
            [Cut("close", partial="Let me write"), Reply([text("Writing."), tool("list_files")])],
            Reply([text("I stop here.")]),
        ],
    )
    res = run(workspace, server.base_url, server.api_key, model, budget=Budget(max_no_tool_turns=1)).results[
        0
    ]

    assert (res.outcome, res.reason) == ("rejected", "generator.no_tool_use")
    assert res.turns == 2 and res.api_retries == 1
    g = stored(workspace, res.generation_id)
    (retry,) = entries(g, "api_retry")
    assert retry["code"] == "infra.generator_unavailable"
    assert f"{server.base_url}/v1/messages closed the connection mid-reply" in retry["detail"]
    assert "incomplete chunked read" in retry["detail"]  # the HTTP layer's own words
    assert retry["message_id"].startswith("msg_")
    # The broken stream's tokens are kept apart; billed totals are the two real replies only.
    assert g.lost_tokens_in > 0 and g.turns == 2
    billed = [u for u in server.usage_sent if u[0] == model]
    assert g.tokens_in == sum(u[1] for u in billed) and g.tokens_out == sum(u[2] for u in billed)
    # The retried request carried the same conversation: the partial text never became a turn.
    reqs = server.message_requests(model)
    assert len(reqs[0].body["messages"]) == len(reqs[1].body["messages"]) == 1  # type: ignore[index]
    msgs = [e for e in entries(g, "message") if e["role"] == "assistant"]
    assert all(m["message_id"].startswith("msg_") for m in msgs) and len(msgs) == 2


def test_stream_without_stop_reason_is_retried_not_nudged(
    workspace: Workspace, server: AnthropicServer
) -> None:
    model = f"{HAIKU}-nostop"
    server.script(
        model,
        [
            [Reply([text("Half a thought that never")], no_stop=True), Reply([tool("list_files")])],
            Reply([text("Done talking.")]),
        ],
    )
    res = run(workspace, server.base_url, server.api_key, model, budget=Budget(max_no_tool_turns=1)).results[
        0
    ]

    assert res.turns == 2 and res.api_retries == 1
    g = stored(workspace, res.generation_id)
    (retry,) = entries(g, "api_retry")
    assert retry["code"] == "infra.generator_incomplete_stream"
    assert "without a stop reason" in retry["detail"] and server.base_url in retry["detail"]
    assert g.lost_tokens_out > 0  # the unfinished reply's output tokens, reported apart
    # Never answered with the "not submitted yet" nudge: the second request is the first one again.
    second = server.message_requests(model)[1].body
    assert second is not None and len(second["messages"]) == 1
    assert "not submitted" not in g.transcript_json.split('"role": "assistant"')[0]


def test_stalled_stream_times_out_and_ends_as_unavailable(
    workspace: Workspace, server: AnthropicServer
) -> None:
    model = f"{HAIKU}-stall"
    server.script(model, [[Cut("stall", stall_s=30)]])
    retry = RetryPolicy(max_retries=1, backoff_base_s=0.01, backoff_max_s=0.02)
    res = run(workspace, server.base_url, server.api_key, model, retry=retry, api_timeout_s=0.5).results[0]

    assert (res.outcome, res.reason, res.turns, res.api_retries) == (
        "error",
        "infra.generator_unavailable",
        0,
        1,
    )
    assert res.detail.startswith(f"the stream from {server.base_url}/v1/messages stalled")
    assert "gave up after 1 retries" in res.detail
    g = stored(workspace, res.generation_id)
    assert g.detail == res.detail and g.lost_tokens_in > 0 and g.tokens_in == 0 and g.cost_usd == 0
    assert len(server.message_requests(model)) == 2


@pytest.mark.slow
def test_nothing_listening_exits_3_with_the_reason_and_the_url(workspace: Workspace) -> None:
    url = f"http://127.0.0.1:{free_port()}"
    # Before anything starts, one model-list request (no tokens): nothing listening is one line, at once,
    # as `bandpass run` refuses a dead policy endpoint; no attempt is stored.
    with pytest.raises(GeneratorUnreachable, match=r"cannot connect to .*Connection refused.*no attempt"):
        run(workspace, url, "sk-ant-test-0123456789", HAIKU, n=6)
    with session(workspace.engine) as s:
        assert queries.recent_generations(s) == []
    # A server that dies during a batch: it halts after a few attempts in a row instead of retrying all
    # night (the check is skipped here to reach that path).
    batch = run(
        workspace, url, "sk-ant-test-0123456789", HAIKU, n=6, halt_after_api_failures=2, check_endpoint=False
    )
    assert [r.reason for r in batch.results] == ["infra.generator_unavailable"] * 2
    assert batch.skipped == 4 and "2 attempts in a row failed for the API" in batch.halted
    assert "Connection refused" in batch.halted

    env = {"ANTHROPIC_API_KEY": "sk-ant-test-0123456789", "ANTHROPIC_BASE_URL": url}
    args = ["--n", "1", "--model", HAIKU, "--prompt", "v1-plain"]  # the default 8 retries: not reached
    proc = cli(workspace, "generate", *args, env=env)
    assert proc.returncode == 3, proc.stdout + proc.stderr
    line = f"cannot connect to {url}/v1/messages: [Errno 111] Connection refused"
    assert line in proc.stderr and proc.stderr.count("\n") == 1 and "is the server running" in proc.stderr
    assert "Traceback" not in proc.stderr and "retry" not in proc.stdout  # no attempt, no retries

    proc = cli(workspace, "generate", "--check", "--model", HAIKU, env=env)
    assert proc.returncode == 3
    assert "FAIL endpoint" in proc.stdout and "Connection refused" in proc.stdout + proc.stderr
    assert "is the server running" in proc.stderr


@pytest.mark.slow
def test_tool_use_refused_is_not_retried_and_check_explains_it(
    workspace: Workspace, server: AnthropicServer
) -> None:
    model = f"{HAIKU}-notools"
    server.script(model, [Reply([text("ok")])])
    server.refuse_tools = VLLM_TOOLS_REFUSAL
    res = run(workspace, server.base_url, server.api_key, model).results[0]
    assert (res.outcome, res.reason) == ("error", "infra.generator_rejected")
    assert res.detail == f"HTTP 400 from {server.base_url}/v1/messages: {VLLM_TOOLS_REFUSAL}"
    assert len(server.message_requests(model)) == 1  # a 400 is not retried

    env = {"ANTHROPIC_API_KEY": server.api_key, "ANTHROPIC_BASE_URL": server.base_url}
    proc = cli(workspace, "generate", "--check", "--model", model, env=env)
    assert proc.returncode == 3
    assert "ok   endpoint" in proc.stdout and "FAIL tools" in proc.stdout
    assert VLLM_TOOLS_REFUSAL in proc.stdout and "--enable-auto-tool-choice" in proc.stderr

    server.refuse_tools = None
    proc = cli(workspace, "generate", "--check", "--model", model, "--json", env=env)
    report = json.loads(proc.stdout)
    assert proc.returncode == 0 and report["ok"]
    assert [s["name"] for s in report["steps"]] == ["endpoint", "auth", "model", "tools", "stream", "price"]
    assert "message msg_" in report["steps"][4]["detail"]
    ping = server.message_requests(model)[-1].body
    assert ping is not None and ping["max_tokens"] == 1 and ping["tools"][0]["name"] == "ping"

    proc = cli(workspace, "generate", "--check", "--model", f"{HAIKU}-unserved", env=env)
    assert proc.returncode == 3 and "FAIL model" in proc.stdout
    assert f"it serves: {model}" in proc.stderr  # from GET /v1/models


def test_a_model_that_never_calls_a_tool_is_stopped_early(
    workspace: Workspace, server: AnthropicServer
) -> None:
    model = f"{HAIKU}-chatty"
    # Every reply is cut at max_tokens with no tool call: these count toward the limit too.
    server.script(
        model, [Reply([text("Let me explain at length what I would do. " * 20)], stop_reason="max_tokens")]
    )
    res = run(workspace, server.base_url, server.api_key, model).results[0]
    assert (res.outcome, res.reason, res.turns) == ("rejected", "generator.no_tool_use", 3)
    assert len(server.message_requests(model)) == 3  # not --max-turns (40)
    assert "3 replies without a tool call" in stored(workspace, res.generation_id).detail


@pytest.mark.slow
def test_generations_list_show_and_report_separate_api_failures(
    workspace: Workspace, server: AnthropicServer
) -> None:
    model = f"{HAIKU}-read"
    server.script(
        model,
        [
            [
                Cut("close"),
                Reply([text("Writing the instruction."), tool("write_file", path="a.txt", content="hi")]),
            ],
            Reply([text("Enough.")]),
        ],
    )
    ok = run(workspace, server.base_url, server.api_key, model, budget=Budget(max_no_tool_turns=1)).results[0]
    dead_url = f"http://127.0.0.1:{free_port()}"  # an attempt stored as an API failure: past the check
    dead = run(workspace, dead_url, server.api_key, model, check_endpoint=False).results[0]
    with session(workspace.engine) as s:  # a bug of ours, as a crashed attempt records it
        queries.create_generation(
            s, prompt_version="v1-plain", model=model, outcome="error", reason="generator.internal_error"
        )

    proc = cli(workspace, "generations", "--json")
    rows = json.loads(proc.stdout)
    assert [r["id"] for r in rows] == [ok.generation_id, dead.generation_id, dead.generation_id + 1]
    assert rows[0]["turns"] == 2 and rows[0]["outcome"] == "rejected" and rows[0]["lost_tokens_in"] > 0
    assert rows[1]["reason"] == "infra.generator_unavailable" and "Connection refused" in rows[1]["detail"]
    proc = cli(workspace, "generations", "--outcome", "error", "--prompt", "v1-plain")
    assert proc.returncode == 0 and "infra.generator_unavailable" in proc.stdout
    assert "Connection refused" in proc.stdout and "rejected" not in proc.stdout
    assert cli(workspace, "generations", "--outcome", "bogus").returncode == 2

    proc = cli(workspace, "generations", "show", str(ok.generation_id))
    out = proc.stdout
    assert proc.returncode == 0, proc.stderr
    assert "generation" in out and "rejected (generator.no_tool_use)" in out
    assert "── turn 1 · msg_" in out and "── turn 2 · msg_" in out
    assert "retry 1 after infra.generator_unavailable" in out and "closed the connection mid-reply" in out
    assert "▶ write_file" in out and "◀ wrote 2 bytes to a.txt" in out
    assert "Writing the instruction." in out and "(nudge)" not in out
    view = json.loads(cli(workspace, "generations", "show", str(ok.generation_id), "--json").stdout)
    assert [t["index"] for t in view["turns"]] == [1, 2]
    assert view["turns"][0]["retries"][0]["code"] == "infra.generator_unavailable"
    assert view["turns"][0]["tool_results"][0]["name"] == "write_file"
    assert all(t["message_id"].startswith("msg_") for t in view["turns"])
    proc = cli(workspace, "generations", "show", str(dead.generation_id))
    assert "api error infra.generator_unavailable: cannot connect to" in proc.stdout
    proc = cli(workspace, "generations", "show", "999")
    assert proc.returncode == 1 and "generation 999 does not exist" in proc.stderr

    (row,) = generation_report(workspace)
    assert (row.attempts, row.api_failures, row.internal_errors, row.docker_errors) == (1, 1, 1, 0)
    proc = cli(workspace, "report", "generation")
    assert "api fail" in proc.stdout and "own err" in proc.stdout
