"""Generator parts that need no model: prompt versions, seed axes, prices, redaction, input validation,
start-up errors and cancellation (the last two against the scripted server, through the real SDK)."""

from __future__ import annotations

import random
import threading
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.core.redact import MASK, Redactor
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.generator import (
    GeneratorError,
    PromptError,
    RetryPolicy,
    available_versions,
    generate_batch,
)
from bandpass.engine.generator.prompts import load_prompt
from bandpass.engine.generator.seeds import AXES, load_axes, sample_axes, sample_difficulty
from bandpass.engine.generator.tools import ToolError, validate_input
from bandpass.engine.llm.pricing import PriceTable, PriceUnknown, Usage
from bandpass.engine.llm.templates import render
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.servers.anthropic_server import Reply, running_server, text, tool

VALUES = {
    "domain": "D",
    "skill": "S",
    "complexity": "C",
    "verifier_kind": "V",
    "difficulty": "hard",
    "difficulty_guidance": "G",
    "too_easy": "",
    "examples": "",
    "last_failure": "",
}


@pytest.mark.parametrize("name", ["v1-plain", "v2-context"])
def test_shipped_prompt_versions_load_and_render(name: str) -> None:
    p = load_prompt(name)
    assert {t["name"] for t in p.tools} == {
        "write_file",
        "read_file",
        "list_files",
        "build",
        "run",
        "audit",
        "submit",
    }
    user = p.render_user(VALUES)
    assert "{{" not in user and "Domain: D" in user and "Difficulty: hard. G" in user
    assert set(p.difficulty_guidance) == {"easy", "medium", "hard"}
    assert "reward.txt" in p.system


def test_v2_context_differs_only_by_context_extension() -> None:
    v1, v2 = load_prompt("v1-plain"), load_prompt("v2-context")
    assert (v1.context.examples, v1.context.last_failure) == (0, False)
    assert v2.context.examples > 0 and v2.context.last_failure
    assert v2.system.startswith(v1.system.rstrip())  # same instructions, plus the failure guide
    assert {"examples", "last_failure"} <= set(v2.sections) and "examples" not in v1.sections
    assert {"v1-plain", "v2-context"} <= set(available_versions())


def test_prompt_errors_are_specific(tmp_path: Path) -> None:
    with pytest.raises(PromptError, match="not found.*available: v1-plain, v2-context"):
        load_prompt("v9-nope")
    with pytest.raises(PromptError, match=r"no value for \{\{skill\}\}"):
        render("a {{skill}}", {}, where="x")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "prompt.toml").write_text('description = "x"\n')
    (tmp_path / "bad" / "tools.json").write_text('[{"name": "rm_rf", "input_schema": {}}]')
    with pytest.raises(PromptError) as exc:
        load_prompt("bad", root=tmp_path)
    msg = str(exc.value)
    assert "system.md: missing" in msg and "rm_rf" in msg and "must offer submit" in msg


def test_axes_are_sampled_independently_and_uniformly() -> None:
    axes = load_axes()
    rng = random.Random(0)
    draws = [sample_axes(rng, axes) for _ in range(8000)]
    for axis in AXES:
        counts = Counter(getattr(d, axis) for d in draws)
        assert set(counts) == set(axes[axis])  # every value reachable
        expected = len(draws) / len(axes[axis])
        assert all(abs(c - expected) < 0.25 * expected for c in counts.values()), (axis, counts)
    # Independence: given one domain, the verifier kinds are still spread uniformly (not bimodal).
    d0 = axes["domain"][0]
    sub = Counter(d.verifier_kind for d in draws if d.domain == d0)
    expected = sum(sub.values()) / len(axes["verifier_kind"])
    assert all(abs(c - expected) < 0.5 * expected for c in sub.values()), sub
    assert sample_difficulty(random.Random(1), axes, "hard") == "hard"


def test_prices_by_family_prefix_and_workspace_override(tmp_path: Path) -> None:
    table = PriceTable()
    assert table.price("claude-sonnet-4-5-20250929") == table.price("claude-sonnet-4-5")
    assert table.price("claude-opus-4-1-20250805").input == 15.0  # not claude-opus-4's row by accident
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cache_read_tokens=1_000_000)
    assert table.cost("claude-sonnet-4-5", usage) == pytest.approx(3.0 + 1.5 + 0.3)
    assert usage.tokens_in == 2_000_000
    with pytest.raises(PriceUnknown, match="no price for model 'gpt-5'.*prices.toml"):
        table.price("gpt-5")
    # Families match exactly: a new family is never priced as an older one by prefix.
    assert table.price("claude-opus-4-20250514").input == 15.0  # a dated snapshot of claude-opus-4
    assert table.price("claude-opus-4-5@20251101").input == 5.0
    for new_family in ("claude-opus-4-8", "claude-opus-4-8-20260101", "claude-sonnet-4-5-turbo"):
        assert not table.known(new_family), new_family
        assert table.cost(new_family, usage) == 0.0  # counted as 0, displayed as unknown
    (tmp_path / "generator-prices.toml").write_text('[models."gpt-5"]\ninput = 1.25\noutput = 10\n')
    assert PriceTable(tmp_path).price("gpt-5").cache_read == pytest.approx(0.125)


def test_redactor_removes_keys_and_key_shaped_strings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("SOME_SERVICE_TOKEN", "tok-abcdef123456")
    r = Redactor(["my-literal-secret-key"])
    data: dict[str, Any] = {
        "a": "key my-literal-secret-key here",
        "b": ["sk-ant-api03-AbCdEf0123456789_-xyz", "Authorization: Bearer abcdefghijklmnopqrstuvwxyz"],
        "c": {"x-api-key: sk_live_1234567890": 1, "n": 3, "env": "tok-abcdef123456"},
    }
    out = r.obj(data)
    flat = repr(out)
    for secret in (
        "my-literal-secret-key",
        "sk-ant-api03",
        "abcdefghijklmnop",
        "sk_live_1234567890",
        "tok-abc",
    ):
        assert secret not in flat
    assert out["c"]["n"] == 3 and MASK in out["a"] and "x-api-key: " + MASK in flat
    assert r.text("ordinary text with sk- and bearer words") == "ordinary text with sk- and bearer words"


def test_validate_input_reports_every_problem() -> None:
    schema = load_prompt("v1-plain").tools[4]["input_schema"]  # run
    assert validate_input(schema, {"command": "ls", "include": ["tests"]})["command"] == "ls"
    with pytest.raises(ToolError) as exc:
        validate_input(schema, {"timeout_sec": "10", "include": ["secrets"], "cmd": "ls"})
    msg = str(exc.value)
    assert "missing required field 'command'" in msg and "'cmd'" in msg
    assert "'timeout_sec' must be a number" in msg and "['secrets'] not in" in msg
    with pytest.raises(ToolError, match="JSON object"):
        validate_input(schema, ["ls"])


def test_batch_start_errors(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(GeneratorError, match="ANTHROPIC_API_KEY is not set"):
        generate_batch(workspace, 1, "claude-sonnet-4-5", "v1-plain")
    with pytest.raises(GeneratorError, match="--difficulty"):
        generate_batch(workspace, 1, "claude-sonnet-4-5", "v1-plain", difficulty="extreme", api_key="k")
    with pytest.raises(GeneratorError, match="--budget-usd needs a price: no price for model 'llama-3'"):
        generate_batch(workspace, 1, "llama-3", "v1-plain", api_key="k", batch_budget_usd=1.0)
    with pytest.raises(GeneratorError, match="v7"):
        generate_batch(workspace, 1, "claude-sonnet-4-5", "v7", api_key="k")
    with session(workspace.engine) as s:
        assert queries.list_generations(s) == []  # nothing recorded for a batch that never started


def test_stop_event_cancels_between_turns_and_empty_replies_keep_the_protocol(workspace: Workspace) -> None:
    stop = threading.Event()
    model = "claude-haiku-4-5-cancel"

    def second(body: dict[str, Any]) -> Reply:
        stop.set()  # the curator presses stop while this turn streams
        return Reply([text("writing"), tool("list_files")])

    with running_server() as server:
        server.script(model, [Reply([]), second, Reply([text("never asked")])])
        result = generate_batch(
            workspace,
            3,
            model,
            "v1-plain",
            api_key=server.api_key,
            base_url=server.base_url,
            stop=stop,
            retry=RetryPolicy(max_retries=0),
        )
        statuses = [r.status for r in server.message_requests()]
    (res,) = result.results
    assert res.outcome == "cancelled" and res.reason == "generator.cancelled" and res.turns == 2
    assert result.skipped == 2
    assert statuses == [200, 200]  # the empty reply was sent back in a form the API accepts


def test_a_cut_reply_names_its_cause() -> None:
    """vLLM lowers max_tokens to what the context window leaves: a reply that stops short of the
    requested max_tokens was clamped by the window, and the nudge says so (not "the output limit")."""
    from bandpass.engine.generator.turns import NUDGE_CUT
    from bandpass.engine.llm.client import cut_line
    from bandpass.engine.llm.pricing import Usage

    clamped = cut_line("max_tokens", Usage(input_tokens=1900, output_tokens=148), 8192)
    assert clamped == (
        "cut off at the context window: the conversation (1900 tokens) left room for only 148 tokens of reply"
    )
    assert cut_line("max_tokens", Usage(input_tokens=10, output_tokens=512), 512) == (
        "cut off at the output limit (max_tokens 512)"
    )
    assert cut_line("end_turn", Usage(output_tokens=512), 512) == ""
    assert "context window" in NUDGE_CUT.format(cut=clamped)
