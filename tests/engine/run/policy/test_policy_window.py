"""The served context window, exact token counts and truthful truncation, against a server that behaves
like vLLM (tests/support/servers/openai_server.py): it reports ``max_model_len``, counts chat prompts on
``/tokenize`` with its own tokenizer, refuses an over-long prompt with vLLM's 400 and clamps replies to the
window. Real HTTP through the real ``openai`` SDK; the sandbox is the fake terminal of test_policy_agent.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from typer.testing import CliRunner

from bandpass.engine.core.config import PolicyModelConfig
from bandpass.engine.run.agents.base import AgentContext, AgentResult, StepRecord
from bandpass.engine.run.agents.policy import PolicyAgent
from bandpass.engine.run.policy.client import PolicyClient, check_endpoint, describe_check
from bandpass.engine.run.policy.fit import PromptCounter, fit_request
from bandpass.engine.tasks.taskdir import TaskSpec
from tests.support.fake_terminal import FakeTerminal
from tests.support.servers.openai_server import OpenAIServer, prompt_tokens, running_server

LOOP = "script:loop"
#: Output whose tokens a characters-per-token guess undercounts 1.75x ("f\n" is one token per 2 chars).
DENSE = "f\n" * 1200


def _agent_run(
    server: OpenAIServer,
    model: str = LOOP,
    *,
    context_window: int | None = None,
    max_tokens: int = 512,
    terminal: FakeTerminal | None = None,
    instruction: str = "Loop.",
    max_steps: int = 8,
    timeout: float = 5.0,
) -> tuple[AgentResult, list[StepRecord]]:
    cfg = PolicyModelConfig(
        name=model, base_url=server.base_url, max_tokens=max_tokens, context_window=context_window
    )
    client = PolicyClient(cfg, timeout=timeout, max_retries=4, backoff_base=0.01)
    steps: list[StepRecord] = []
    ctx = AgentContext(
        task=TaskSpec(name="t", path=Path("."), instruction=instruction),
        terminal=terminal or FakeTerminal({"ls\n": DENSE}),  # type: ignore[arg-type]
        episode_id=None,
        deadline=time.monotonic() + 60,
        on_step=steps.append,
    )
    try:
        result = PolicyAgent(client, max_steps=max_steps).run(ctx)
    finally:
        client.close()
    json.dumps([s.__dict__ for s in steps])  # storable
    return result, steps


def _bodies(server: OpenAIServer) -> list[dict[str, Any]]:
    return [r.body for r in server.chat_requests() if r.body is not None]


def _cuts(steps: list[StepRecord], kind: str) -> list[dict[str, Any]]:
    return [c for s in steps for c in s.cuts if c["kind"] == kind]


# --- the window --- #


def test_served_window_is_read_from_v1_models() -> None:
    with running_server(window=2048) as server:
        client = PolicyClient(PolicyModelConfig(name=LOOP, base_url=server.base_url), timeout=5)
        assert client.served_window() == 2048
        assert client.served_windows()["script:solve-hello"] == 2048
        client.served_window()
        client.close()
    gets = [r for r in server.requests if r.path.endswith("/models")]
    assert len(gets) == 2  # served_window() asked once and then remembered; served_windows() asks
    with running_server(report_window=False) as server:  # OpenAI's API does not say
        client = PolicyClient(PolicyModelConfig(name=LOOP, base_url=server.base_url), timeout=5)
        assert client.served_window() is None
        client.close()


def test_check_reports_the_served_window_and_warns_on_a_mismatch() -> None:
    with running_server(window=2048) as server:
        report = check_endpoint(PolicyModelConfig(name=LOOP, base_url=server.base_url))
        assert (report.served_window, report.configured_window, report.window) == (2048, None, 2048)
        assert report.tokenizer and report.warnings == []
        line = describe_check(report)
        assert "served window 2048 tokens" in line and "exact token counts via /tokenize" in line

        cfg = PolicyModelConfig(name=LOOP, base_url=server.base_url, context_window=8192)
        report = check_endpoint(cfg)
        assert report.window == 2048  # the smaller wins
        assert len(report.warnings) == 1
        assert "context_window 8192" in report.warnings[0] and "served window 2048" in report.warnings[0]
    with running_server(report_window=False, tokenizer=False) as server:
        report = check_endpoint(PolicyModelConfig(name=LOOP, base_url=server.base_url))
        assert report.window is None and not report.tokenizer
        assert "does not report its context window" in report.warnings[0]
        assert "token counts estimated" in describe_check(report)


def test_cli_check_prints_window_and_warning(tmp_path: Path) -> None:
    from bandpass.tui.cli import _register, app

    _register()
    with running_server(window=2048) as server:
        (tmp_path / "bandpass.toml").write_text(
            f'[models.small]\nbase_url = "{server.base_url}"\nserved_name = "{LOOP}"\ncontext_window = 4096\n'
        )
        res = CliRunner().invoke(app, ["--workspace", str(tmp_path), "policy", "check", "small"])
    assert res.exit_code == 0, res.output
    assert "served window 2048 tokens" in res.output
    warning = "WARNING: context_window 4096 in bandpass.toml for 'small' differs from the served window 2048"
    assert warning in res.output


# --- exact counts --- #


def test_tokenize_counts_exactly_and_is_cached_per_prefix() -> None:
    msgs = [{"role": "system", "content": "You are terse."}, {"role": "user", "content": DENSE}]
    with running_server() as server:
        client = PolicyClient(PolicyModelConfig(name=LOOP, base_url=server.base_url), timeout=5)
        assert client.tokenize(msgs) == prompt_tokens(msgs)
        counter = PromptCounter(client.tokenize)
        first = counter.count(msgs)
        assert (first.tokens, first.exact, first.source) == (prompt_tokens(msgs), True, "tokenize")
        assert counter.count(msgs).source == "cached" and counter.requests == 1
        longer = [*msgs, {"role": "assistant", "content": "ok"}, {"role": "user", "content": "next"}]
        assert counter.count(longer).tokens == prompt_tokens(longer)
        assert counter.requests == 2
        client.close()
    tokenize_posts = [r for r in server.requests if r.path == "/tokenize"]
    assert len(tokenize_posts) == 3 and tokenize_posts[0].body is not None
    assert tokenize_posts[0].body["messages"] == msgs and tokenize_posts[0].body["add_generation_prompt"]


def test_without_tokenize_the_estimate_has_a_stated_margin_and_exact_prefixes() -> None:
    msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "x " * 400}]
    with running_server(tokenizer=False) as server:
        client = PolicyClient(PolicyModelConfig(name=LOOP, base_url=server.base_url), timeout=5)
        counter = PromptCounter(client.tokenize)
        c = counter.count(msgs)
        assert not c.exact and c.source == "estimate" and c.margin >= 32
        assert client.tokenize(msgs) is None
        client.close()
    assert len([r for r in server.requests if r.path == "/tokenize"]) == 1  # a 404 stops the asking
    counter.learn(msgs, 900)  # the server's usage for a prompt it answered is exact
    grown = [*msgs, {"role": "assistant", "content": "a"}, {"role": "user", "content": "b"}]
    est = counter.count(grown)
    assert not est.exact and est.tokens >= 900 + est.margin  # the exact prefix plus an estimated rest


def test_history_is_trimmed_exactly_and_no_request_exceeds_the_served_window() -> None:
    # No context_window configured: the 2048-token served window is learned; each step adds ~450
    # tokens that a chars/token guess would count as ~260.
    with running_server(window=2048) as server:
        result, steps = _agent_run(server, terminal=FakeTerminal({"ls\n": "f\n" * 420}))
        bodies = _bodies(server)
    assert result.error_code == "turn_limit"
    assert len(bodies) == 8
    for body in bodies:
        assert prompt_tokens(body["messages"]) + body["max_tokens"] <= 2048
    history = _cuts(steps, "history")
    assert history and all(c["exact"] and c["tokens_after"] <= c["budget"] for c in history)
    for s in steps:  # Bandpass's count is the server's count
        assert s.action["prompt_count"]["exact"] is True
        assert s.action["prompt_count"]["tokens"] == s.prompt_tokens
    assert not _cuts(steps, "context_overflow")


def test_an_overestimate_never_ends_the_episode() -> None:
    # Spaces are free for this tokenizer: the local guess overshoots ~2x. Without /tokenize, the old
    # harness declared context_overflow; now the request is sent and the server accepts it.
    instruction = "ab  " * 900  # with the prompts: 1784 server tokens; the guess with its margin says 2100
    with running_server(window=2048, tokenizer=False) as server:
        result, steps = _agent_run(server, "script:solve-hello", instruction=instruction)
        bodies = _bodies(server)
    assert result.error_code is None, result.detail
    assert _cuts(steps, "estimate_over_window")
    assert steps[0].action["prompt_count"]["exact"] is False
    assert prompt_tokens(bodies[0]["messages"]) < 2048  # the server took it


def test_an_underestimate_is_corrected_by_the_servers_400() -> None:
    # No /tokenize and no reported window, 4000 configured (rightly). The estimate learns its ratio from
    # prose ("word " is 5 characters a token), then dense output arrives ("f\n" is 2): the guess, margin
    # and all, says the prompt fits; the server refuses it, stating the true length; the harness learns
    # it, refits (drops the older turn) and the episode goes on.
    def cmd(keys: str) -> str:
        return json.dumps({"analysis": "", "plan": "", "commands": [{"keystrokes": keys, "duration": 1}]})

    term = FakeTerminal({"a\n": "word " * 1000, "b\n": "f\n" * 3100})
    with running_server(window=4000, tokenizer=False, report_window=False) as server:
        server.script("script:a-then-b", [cmd("a\n"), cmd("b\n"), cmd("true\n")])
        result, steps = _agent_run(server, "script:a-then-b", context_window=4000, terminal=term, max_steps=4)
        bodies = _bodies(server)
    assert result.error_code == "turn_limit", result.detail
    refused = _cuts(steps, "server_overflow")
    assert len(refused) == 1 and "maximum context length is 4000" in refused[0]["server"]
    assert refused[0]["prompt_tokens"] > refused[0]["counted"]  # the estimate was short; now it knows
    step2 = steps[2]
    assert refused[0] in step2.cuts and step2.completion_tokens > 0  # answered after the refit
    assert len(bodies) == 5 and prompt_tokens(bodies[2]["messages"]) >= 4000  # the refused one
    assert all(prompt_tokens(b["messages"]) < 4000 for b in bodies[3:])


# --- fitting --- #


def test_max_tokens_lowered_to_what_the_window_leaves_and_recorded() -> None:
    with running_server(window=2048) as server:
        client = PolicyClient(PolicyModelConfig(name=LOOP, base_url=server.base_url), timeout=5)
        counter = PromptCounter(client.tokenize)
        msgs = [{"role": "system", "content": "s"}, {"role": "user", "content": "word " * 1500}]
        fit = fit_request(msgs, window=2048, max_tokens=1024, counter=counter)
        client.close()
    n = prompt_tokens(msgs)
    assert fit.messages == msgs and fit.count.tokens == n
    assert fit.max_tokens == 2048 - n
    assert fit.cuts == [
        {
            "kind": "max_tokens",
            "asked": 1024,
            "sent": 2048 - n,
            "prompt_tokens": n,
            "window": 2048,
            "exact": True,
        }
    ]


def test_newest_observation_capped_when_history_alone_cannot_make_room() -> None:
    with running_server(window=2048) as server:
        client = PolicyClient(PolicyModelConfig(name=LOOP, base_url=server.base_url), timeout=5)
        counter = PromptCounter(client.tokenize)
        msgs = [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "task"},
            {"role": "assistant", "content": "{}"},
            {"role": "user", "content": "HEAD\n" + DENSE * 2 + "TAIL $"},
        ]
        fit = fit_request(msgs, window=2048, max_tokens=512, counter=counter)
        client.close()
    capped = [c for c in fit.cuts if c["kind"] == "observation"]
    assert capped and capped[0]["part"] == "fit" and capped[0]["tokens_after"] <= 2048 - 256
    last = fit.messages[-1]["content"]
    assert last.startswith("HEAD") and last.endswith("TAIL $")
    assert f"[… {capped[0]['bytes_cut']} bytes cut]" in last
    assert prompt_tokens(fit.messages) == fit.count.tokens
    assert fit.count.tokens + fit.max_tokens <= 2048


def test_exact_overflow_ends_without_sending() -> None:
    with running_server(window=2048) as server:
        result, steps = _agent_run(server, instruction="word " * 2500)
        assert server.chat_requests() == []
    assert result.error_code == "context_overflow"
    assert steps[0].cuts[-1]["kind"] == "context_overflow" and steps[0].cuts[-1]["exact"] is True


# --- configured vs served --- #


def test_configured_window_larger_than_served_is_warned_and_the_smaller_wins() -> None:
    with running_server(window=2048) as server:
        result, steps = _agent_run(server, context_window=8192, max_steps=4)
        bodies = _bodies(server)
    assert result.error_code == "turn_limit"
    assert {"kind": "config_mismatch", "configured": 8192, "served": 2048, "using": 2048} in steps[0].cuts
    assert all(prompt_tokens(b["messages"]) + b["max_tokens"] <= 2048 for b in bodies)


def test_overflow_from_a_configured_window_larger_than_served_is_config_mismatch() -> None:
    # The server does not list its window; the task alone fits the configured 8192 but not the served
    # 2048: the server's 400 is the ground truth and the two limits that disagree are the diagnosis.
    with running_server(window=2048, report_window=False) as server:
        result, steps = _agent_run(server, context_window=8192, instruction="word " * 2500)
    assert result.error_code == "config_mismatch"
    assert "context_window 8192" in result.detail and "served window 2048" in result.detail
    assert {"kind": "config_mismatch", "configured": 8192, "served": 2048, "using": 2048} in steps[0].cuts
    from bandpass.engine.core.outcomes import suggested_tag

    assert suggested_tag("agent_error:config_mismatch") == "harness.config_mismatch"


# --- truthful truncation --- #


def test_reply_clamped_by_the_server_is_cut_at_the_context_window() -> None:
    # A plain server (no window listed, no /tokenize) and nothing configured: Bandpass asks for 2048
    # tokens, the server clamps the reply to what its window leaves.
    with running_server(window=2048, report_window=False, tokenizer=False) as server:
        result, steps = _agent_run(server, "script:truncated", max_tokens=2048, max_steps=2)
        retry = _bodies(server)[1]["messages"][-1]["content"]
    cut = _cuts(steps, "reply_truncated")[0]
    assert cut["cause"] == "context_window" and cut["max_tokens"] == 2048
    assert cut["completion_tokens"] < 2048 and cut["completion_tokens"] + cut["prompt_tokens"] == 2048
    assert "cut off at the context window" in retry and "max_tokens=2048" not in retry
    assert result.error_code in ("parse_error", "turn_limit")


def test_reply_cut_at_a_max_tokens_bandpass_lowered_is_the_window_too() -> None:
    with running_server(window=2048) as server:
        _, steps = _agent_run(server, "script:truncated", max_tokens=2048, max_steps=1)
    lowered = _cuts(steps, "max_tokens")[0]
    cut = _cuts(steps, "reply_truncated")[0]
    assert cut["max_tokens"] == lowered["sent"] < 2048 and cut["cause"] == "context_window"


# --- every request attempt --- #


def test_every_attempt_is_stored_on_the_step() -> None:
    with running_server() as server:
        server.script("script:slow-start", [{"sleep": 3.0, "content": "x"}, {"sleep": 3.0, "content": "x"}])
        server.scripts["script:slow-start"].extend(
            ['{"analysis": "", "plan": "", "commands": [], "task_complete": true}']
        )
        result, steps = _agent_run(server, "script:slow-start", timeout=0.5, max_steps=2)
    attempts = steps[0].attempts
    assert [a.get("error", "").split(" ")[0] for a in attempts] == ["timeout", "timeout", ""]
    assert all(a["latency_s"] >= 0.4 for a in attempts[:2])
    assert steps[0].action["retries"] == 2
    assert result.error_code is None


def test_backoff_and_status_of_failed_attempts_are_kept() -> None:
    with running_server() as server:
        result, steps = _agent_run(server, "script:flaky", max_steps=3)
    assert [a.get("status") for a in steps[0].attempts] == [500, 429, None]
    assert steps[0].attempts[0]["error"] == "HTTP 500" and "wait_s" in steps[0].attempts[0]
    assert result.error_code is None


def test_replay_shows_a_step_that_needed_several_requests() -> None:
    from types import SimpleNamespace

    from bandpass.engine.review.replay import _step_view

    attempts = [
        {"latency_s": 0.5, "error": "timeout after 0.5s"},
        {"latency_s": 0.01, "error": "HTTP 503", "status": 503, "wait_s": 1.0},
        {"latency_s": 2.0},
    ]
    view = _step_view(SimpleNamespace(index=0, attempts_json=json.dumps(attempts)))
    assert "requests: 3 (timeout after 0.5s, HTTP 503, ok), 3.5 s in all" in view.notes
    assert not any(n.startswith("requests:") for n in _step_view(SimpleNamespace(index=0)).notes)


def test_run_warns_when_bandpass_toml_and_the_server_disagree(tmp_path: Path) -> None:
    from bandpass.tui.cli import _register, app

    _register()
    with running_server(window=2048) as server:
        (tmp_path / "bandpass.toml").write_text(
            f'[models.small]\nbase_url = "{server.base_url}"\nserved_name = "{LOOP}"\ncontext_window = 4096\n'
        )
        res = CliRunner().invoke(app, ["--workspace", str(tmp_path), "run", "--model", "small", "--k", "1"])
    assert (
        "WARNING: context_window 4096 in bandpass.toml for 'small' differs from the served window 2048"
        in (res.output)
    )
    assert "using 2048" in res.output
