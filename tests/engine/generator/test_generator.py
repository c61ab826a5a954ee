"""The meta-agent end to end: the real ``anthropic`` SDK over real HTTP against a scripted Messages server.

Two tests run the real audit in Docker (a sound task accepted; a broken task repaired after reading the
audit); the rest need no container: malformed tool input, 429/529/overload retries, budgets, duplicates,
band feedback, the CLI and the yield report.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.core.events import EventBus, GenerationEvent
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.generator import (
    BatchResult,
    Budget,
    RetryPolicy,
    generate_batch,
    generation_report,
    scratch_path,
)
from bandpass.engine.llm.pricing import PriceTable, Usage
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import Generation
from tests.support.calib_data import add_episodes, add_task, outcomes
from tests.support.generated_task import TASK_TOML
from tests.support.paths import REPO
from tests.support.servers.anthropic_server import (
    AnthropicServer,
    Fail,
    Reply,
    StreamFail,
    Tool,
    text,
    tool,
)
from tests.support.taskfactory import make_task

HAIKU = "claude-haiku-4-5"  # priced $1 / $5 per MTok in prices.toml; test models are "claude-haiku-4-5-…"
#: Price keys match families exactly (claude-haiku-4-5-loop is not claude-haiku-4-5), so the test models
#: the server scripts by name get HAIKU's price from the workspace's generator-prices.toml.
TEST_MODEL_SUFFIXES = ("sound", "repair", "malformed", "429", "down", "auth", "loop", "pricey", "dup",
                       "band", "batch", "cli", "echo")  # fmt: skip
FAST_RETRY = RetryPolicy(max_retries=4, backoff_base_s=0.01, backoff_max_s=0.05)

# --- a tiny sound task, written by the scripted model -----------------------------------------------------

INSTRUCTION = (
    "The file /app/numbers.txt holds one integer per line. Write their sum, as a single line with just "
    "the number, to /app/total.txt."
)
DOCKERFILE = "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY numbers.txt /app/numbers.txt\n"
NUMBERS = "3\n5\n11\n-2\n"
GOOD_SOLVE = "#!/bin/bash\nawk '{ s += $1 } END { print s }' /app/numbers.txt > /app/total.txt\n"
BROKEN_SOLVE = "#!/bin/bash\necho 16 > /app/total.txt\n"
TEST_SH = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/total.txt 2>/dev/null)" = "17" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


def task_files(
    solve: str = GOOD_SOLVE, instruction: str = INSTRUCTION, toml: str = TASK_TOML
) -> dict[str, str]:
    return {
        "instruction.md": instruction + "\n",
        "task.toml": toml,
        "environment/Dockerfile": DOCKERFILE,
        "environment/numbers.txt": NUMBERS,
        "solution/solve.sh": solve,
        "tests/test.sh": TEST_SH,
    }


def write_all(files: dict[str, str]) -> list[Tool]:
    return [tool("write_file", path=p, content=c) for p, c in files.items()]


# --- fixtures and helpers ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def _test_model_prices(workspace: Workspace) -> None:
    (workspace.root / "generator-prices.toml").write_text(
        "".join(f'[models."{HAIKU}-{sfx}"]\ninput = 1.0\noutput = 5.0\n' for sfx in TEST_MODEL_SUFFIXES)
    )


@pytest.fixture
def bus_events() -> tuple[EventBus, list[GenerationEvent]]:
    bus = EventBus()
    events: list[GenerationEvent] = []
    bus.subscribe(GenerationEvent, events.append)
    return bus, events


def run(ws: Workspace, server: AnthropicServer, model: str, **kw: Any) -> BatchResult:
    kw.setdefault("prompt_version", "v1-plain")
    kw.setdefault("retry", FAST_RETRY)
    kw.setdefault("audit_reruns", 1)
    return generate_batch(
        ws, kw.pop("n", 1), model, api_key=server.api_key, base_url=server.base_url, seed=7, **kw
    )


def generation(ws: Workspace, gid: int) -> Generation:
    with session(ws.engine) as s:
        g = queries.get_generation(s, gid)
        assert g is not None
        s.expunge(g)
        return g


def transcript(g: Generation) -> list[dict[str, Any]]:
    turns: list[dict[str, Any]] = json.loads(g.transcript_json)
    return turns


def tool_results(body: dict[str, Any]) -> list[dict[str, Any]]:
    """The tool_result blocks of the last user message of a request."""
    last = body["messages"][-1]
    return [b for b in last["content"] if isinstance(b, dict) and b.get("type") == "tool_result"]


def first_user_text(server: AnthropicServer) -> str:
    body = server.message_requests()[0].body
    assert body is not None
    text: str = body["messages"][0]["content"][0]["text"]
    return text


def expected_usage(server: AnthropicServer, model: str) -> tuple[int, int, float]:
    sent = [u for u in server.usage_sent if u[0] == model]
    usage = Usage(
        input_tokens=sum(u[1] for u in sent),
        output_tokens=sum(u[2] for u in sent),
        cache_write_tokens=sum(u[3] for u in sent),
        cache_read_tokens=sum(u[4] for u in sent),
    )
    return usage.tokens_in, usage.output_tokens, PriceTable().cost(HAIKU, usage)


def assert_key_absent(ws: Workspace, key: str) -> None:
    for f in ws.root.glob("bandpass.db*"):  # the WAL holds recent writes: check it too
        assert key.encode() not in f.read_bytes(), f"API key found in {f.name}"


# --- Docker: the real audit ------------------------------------------------------------------------------


@pytest.mark.docker
def test_sound_task_is_written_audited_and_accepted(
    workspace: Workspace, server: AnthropicServer, bus_events: tuple[EventBus, list[GenerationEvent]]
) -> None:
    bus, events = bus_events
    model = f"{HAIKU}-sound"
    files = task_files()
    server.script(
        model,
        [
            # The model echoes the key it was sent: the stored transcript must not.
            Reply([text(f"Writing the task files now (key {server.api_key})."), *write_all(files)]),
            Reply(
                [
                    text("Building and checking the starting state and my solution."),
                    tool("build"),
                    tool(
                        "run",
                        command="cat numbers.txt && bash /solution/solve.sh && cat total.txt && ls /tests",
                        include=["solution", "tests"],
                    ),
                ]
            ),
            Reply([tool("audit")]),
            Reply([text("The audit accepts it."), tool("submit", summary="Sum integers from a file.")]),
        ],
    )
    result = run(workspace, server, model, bus=bus)

    (res,) = result.results
    assert res.outcome == "accepted", res
    assert len(server.message_requests()) == 4  # nothing is asked after an accepted submit
    g = generation(workspace, res.generation_id)
    assert (g.prompt_version, g.model, g.outcome, g.reason) == ("v1-plain", model, "accepted", "")
    tin, tout, cost = expected_usage(server, model)
    assert (g.tokens_in, g.tokens_out) == (tin, tout) and tin > 0 and tout > 0
    assert g.cost_usd == pytest.approx(cost, abs=1e-6) and g.cost_usd > 0
    assert g.api_retries == 0 and g.wall_s > 0
    assert set(json.loads(g.seed_axes_json)) == {"domain", "skill", "complexity", "verifier_kind"}

    # The run tool really ran in a container of the built image, with the solution and tests copied in.
    run_result = tool_results(server.message_requests()[2].body or {})[1]
    assert "is_error" not in run_result, run_result
    assert "exit code 0" in run_result["content"] and "17" in run_result["content"]
    assert "test.sh" in run_result["content"]

    # The accepted task is in the workspace, origin generated, with its audit, byte-identical files.
    with session(workspace.engine) as s:
        version = queries.get_version(s, g.task_version_id)  # type: ignore[arg-type]
        assert version is not None
        assert version.origin == "generated"
        audit = queries.latest_audit(s, version.id)  # type: ignore[arg-type]
        rows = {r.name: r for r in queries.task_rows(s)}
    assert audit is not None and audit.verdict == "accepted"
    assert rows["bandpass/sum-numbers-gen"].audit == "accepted"
    stored = workspace.abs(version.path)
    for rel, content in files.items():
        assert (stored / rel).read_text() == content
    assert os.access(stored / "solution" / "solve.sh", os.X_OK)
    # The staging workspace is gone; the scratch folder stays as the record of what was written.
    assert not (scratch_path(workspace, g.id).parent / ".stage").exists()  # type: ignore[arg-type]

    kinds = [e.kind for e in events]
    for kind in ("started", "text", "tool_use", "tool_result", "turn", "finished"):
        assert kind in kinds, kind
    assert kinds[-1] == "finished" and json.loads(events[-1].data)["outcome"] == "accepted"
    streamed = "".join(e.data for e in events if e.kind == "text")
    assert "Writing the task files now" in streamed and server.api_key not in streamed

    entries = transcript(g)
    assert [e["verdict"] for e in entries if e["type"] == "audit"] == ["accepted"]
    assert server.api_key not in g.transcript_json and "[REDACTED]" in g.transcript_json
    assert_key_absent(workspace, server.api_key)


@pytest.mark.docker
def test_broken_task_is_repaired_after_reading_the_audit(
    workspace: Workspace, server: AnthropicServer
) -> None:
    # Context for v2-context: one accepted example task and one earlier failed generation.
    add_task(workspace, "answer-42", instruction="Write the number 42 into /app/answer.txt.\n")
    with session(workspace.engine) as s:
        queries.create_generation(
            s,
            prompt_version="v2-context",
            model="claude-haiku-4-5",
            outcome="rejected",
            reason="invalidity.trivially_solved",
            transcript_json=json.dumps(
                [
                    {
                        "type": "audit",
                        "verdict": "rejected",
                        "findings": [
                            {"code": "invalidity.trivially_solved", "detail": "doing nothing passes"}
                        ],
                    }
                ]
            ),
        )
    model = f"{HAIKU}-repair"

    def repair(body: dict[str, Any]) -> Reply:
        (audit_result,) = tool_results(body)
        if "invalidity.oracle_fails" not in audit_result["content"]:
            return Reply([text("I did not get the audit failure I expected.")])
        return Reply(
            [
                text("The oracle writes 16 but the sum is 17: fixing solve.sh."),
                tool("write_file", path="solution/solve.sh", content=GOOD_SOLVE),
            ]
        )

    server.script(
        model,
        [
            Reply([text("Writing the task."), *write_all(task_files(solve=BROKEN_SOLVE))]),
            Reply([tool("audit")]),
            repair,
            Reply([tool("submit", summary="Sum integers.")]),  # re-audits: the files changed
        ],
    )
    result = run(workspace, server, model, prompt_version="v2-context")

    (res,) = result.results
    assert res.outcome == "accepted", res
    context = first_user_text(server)
    assert "Write the number 42 into /app/answer.txt." in context  # accepted example shown
    assert "invalidity.trivially_solved" in context  # last failure shown
    g = generation(workspace, res.generation_id)
    assert g.prompt_version == "v2-context" and g.task_version_id is not None
    audits = [e for e in transcript(g) if e["type"] == "audit"]
    assert [a["verdict"] for a in audits] == ["rejected", "accepted"]
    assert "invalidity.oracle_fails" in audits[0]["reasons"]
    with session(workspace.engine) as s:
        version = queries.get_version(s, g.task_version_id)
    assert version is not None
    assert workspace.abs(version.path).joinpath("solution/solve.sh").read_text() == GOOD_SOLVE


# --- no Docker ------------------------------------------------------------------------------------------


def test_malformed_tool_input_gets_tool_errors_not_a_crash(
    workspace: Workspace, server: AnthropicServer
) -> None:
    model = f"{HAIKU}-malformed"
    seen: dict[str, list[dict[str, Any]]] = {}

    def after(body: dict[str, Any]) -> Reply:
        seen.setdefault("results", tool_results(body))  # later turns (nudges) repeat this entry
        return Reply([text("I cannot continue.")])

    server.script(
        model,
        [
            Reply(
                [
                    Tool("write_file", {"content": 5}),  # missing path, content not a string
                    tool("write_file", path="../outside.txt", content="x"),
                    Tool("read_file", raw_json='{"path": "instruction'),  # truncated JSON
                    tool("delete_everything"),
                    Tool("list_files", {"bogus": 1}),
                    tool("read_file", path="nope.md"),
                    tool("build"),  # nothing written yet: an invalid task, reported before Docker
                    tool("write_file", path="notes/ok.txt", content="fine"),
                ]
            ),
            after,
        ],
    )
    result = run(workspace, server, model)

    (res,) = result.results
    assert res.outcome == "rejected" and res.reason == "generator.no_tool_use"
    results = seen["results"]
    assert len(results) == 8
    assert [bool(r.get("is_error")) for r in results] == [True] * 7 + [False]
    msgs = [r["content"] for r in results]
    assert "missing required field 'path'" in msgs[0] and "must be a string" in msgs[0]
    assert "'..'" in msgs[1]
    assert "not valid JSON" in msgs[2]
    assert "unknown tool 'delete_everything'" in msgs[3]
    assert "unknown field 'bogus'" in msgs[4]
    assert "no such file" in msgs[5]
    assert "not a valid Harbor task" in msgs[6] and "instruction.md" in msgs[6]
    assert not (workspace.root / "generations" / "outside.txt").exists()
    assert (scratch_path(workspace, res.generation_id) / "notes" / "ok.txt").read_text() == "fine"
    g = generation(workspace, res.generation_id)
    assert g.outcome == "rejected" and g.api_retries == 0


def test_rate_limit_and_overload_are_retried_and_counted_apart(
    workspace: Workspace, server: AnthropicServer, bus_events: tuple[EventBus, list[GenerationEvent]]
) -> None:
    bus, events = bus_events
    model = f"{HAIKU}-429"
    server.script(
        model,
        [
            [
                Fail(429, "rate_limit_error", "Number of request tokens has exceeded your rate limit", "1"),
                Fail(529, "overloaded_error", "Overloaded", retry_after="0"),
                StreamFail(partial="Let me"),
                Reply([text("Writing."), tool("write_file", path="instruction.md", content="Sum numbers.")]),
            ],
            Reply([text("Stopping here.")]),
        ],
    )
    result = run(workspace, server, model, bus=bus)

    (res,) = result.results
    # The meta-agent's own failure (no submit) is the outcome; the API trouble is only api_retries.
    assert res.outcome == "rejected" and res.reason == "generator.no_tool_use"
    g = generation(workspace, res.generation_id)
    assert g.api_retries == 3
    reqs = server.message_requests()
    assert [r.status for r in reqs[:4]] == [429, 529, 200, 200]
    assert reqs[1].at - reqs[0].at >= 1.0  # retry-after: 1 honoured
    retries = [e for e in transcript(g) if e["type"] == "api_retry"]
    assert [r["code"] for r in retries] == [
        "infra.rate_limited",
        "infra.generator_overloaded",
        "infra.generator_overloaded",
    ]
    assert [r["retry_after_honoured"] for r in retries] == [True, True, False]
    assert retries[0]["request_id"].startswith("req_")
    assert [e.kind for e in events].count("api_retry") == 3
    # Tokens of the failed attempts were never billed: the totals are the successful replies' usage.
    tin, tout, _ = expected_usage(server, model)
    assert (g.tokens_in, g.tokens_out) == (tin, tout)


def test_persistent_rate_limit_is_an_infra_error(workspace: Workspace, server: AnthropicServer) -> None:
    model = f"{HAIKU}-down"
    server.script(model, [[Fail(429, "rate_limit_error", retry_after="0")]])
    result = run(workspace, server, model, retry=RetryPolicy(max_retries=2, backoff_base_s=0.01))
    (res,) = result.results
    assert (res.outcome, res.reason, res.api_retries) == ("error", "infra.rate_limited", 2)
    assert len(server.message_requests()) == 3
    # Infra errors are not attempts of the prompt: the yield report keeps them apart.
    (row,) = generation_report(workspace)
    assert (row.attempts, row.infra_errors, row.yield_) == (0, 1, None)


def test_wrong_key_is_an_auth_error_and_never_stored(workspace: Workspace, server: AnthropicServer) -> None:
    model = f"{HAIKU}-auth"
    server.script(model, [Reply([text("hi")])])
    bad = "sk-ant-api03-WRONGWRONGWRONGWRONG"
    result = generate_batch(workspace, 1, model, "v1-plain", api_key=bad, base_url=server.base_url)
    (res,) = result.results
    assert (res.outcome, res.reason) == ("error", "infra.generator_auth")
    assert len(server.message_requests()) == 1  # 401 is not retried
    assert_key_absent(workspace, bad)


def test_turn_budget_stops_cleanly_with_partial_work(workspace: Workspace, server: AnthropicServer) -> None:
    model = f"{HAIKU}-loop"
    server.script(
        model,
        [
            Reply([tool("write_file", path="instruction.md", content="Half a task.")]),
            Reply([text("Let me look again."), tool("list_files")]),  # repeats forever
        ],
    )
    result = run(workspace, server, model, budget=Budget(max_turns=3))
    (res,) = result.results
    assert res.outcome == "budget_exhausted" and res.reason == "budget.turns"
    assert res.turns == 3 and len(server.message_requests()) == 3
    g = generation(workspace, res.generation_id)
    assert g.outcome == "budget_exhausted" and g.tokens_in > 0 and g.cost_usd > 0
    assert (scratch_path(workspace, res.generation_id) / "instruction.md").read_text() == "Half a task."
    entries = transcript(g)
    assert entries[-2] == {"type": "budget", "exhausted": "budget.turns"}
    # Every tool_use got its tool_result: the last assistant turn is answered even though we stopped.
    assert entries[-3]["type"] == "message" and entries[-3]["role"] == "user"


def test_dollar_budgets_per_attempt_and_per_batch(workspace: Workspace, server: AnthropicServer) -> None:
    model = f"{HAIKU}-pricey"
    # 1M input tokens per turn at $1/MTok: $1 a turn.
    server.script(model, [Reply([tool("list_files")], input_tokens=1_000_000, output_tokens=10)])
    res = run(workspace, server, model, budget=Budget(max_usd=1.5)).results[0]
    assert (res.outcome, res.reason, res.turns) == ("budget_exhausted", "budget.usd", 2)
    assert res.cost_usd == pytest.approx(2 * (1.0 + 10 * 5 / 1e6))

    batch = run(workspace, server, model, n=3, batch_budget_usd=0.5)
    assert [r.reason for r in batch.results] == ["budget.batch_usd"]
    assert batch.skipped == 2 and batch.spent_usd == pytest.approx(1.0 + 50 / 1e6)


def test_near_duplicate_instruction_is_rejected(
    workspace: Workspace, server: AnthropicServer, tmp_path: Path
) -> None:
    assert import_paths(workspace, [make_task(tmp_path, "answer-42")]).ok
    model = f"{HAIKU}-dup"
    dup_files = task_files(instruction="Write the number 42 into /app/answer.txt.")
    seen: dict[str, Any] = {}

    def then_submit(body: dict[str, Any]) -> Reply:
        seen.setdefault("audit", tool_results(body)[-1])
        return Reply([tool("submit")])

    server.script(model, [Reply([*write_all(dup_files), tool("audit")]), then_submit])
    res = run(workspace, server, model).results[0]
    assert (res.outcome, res.reason) == ("rejected", "invalidity.duplicate_task")
    assert seen["audit"]["is_error"] and "invalidity.duplicate_task" in seen["audit"]["content"]
    assert "answer-42" in seen["audit"]["content"]
    with session(workspace.engine) as s:
        assert [r.name for r in queries.task_rows(s)] == ["answer-42"]  # nothing imported
    (row,) = generation_report(workspace)
    assert row.top_reasons() == [("invalidity.duplicate_task", 1)]


def test_target_model_band_feedback_shows_too_easy_tasks(
    workspace: Workspace, server: AnthropicServer
) -> None:
    easy_vid, _ = add_task(
        workspace, "trivial-echo", instruction="Echo hello into /app/hello.txt, nothing else.\n"
    )
    add_episodes(workspace, easy_vid, "qwen-9b", outcomes(30, 0))  # decided above the band
    mid_vid, _ = add_task(workspace, "mid-task", instruction="Repair the broken Makefile in /app/project.\n")
    add_episodes(workspace, mid_vid, "qwen-9b", outcomes(3, 3))
    model = f"{HAIKU}-band"
    server.script(model, [Reply([text("ok")])])
    run(workspace, server, model, target_model="qwen-9b", difficulty="hard")
    prompt = first_user_text(server)
    assert "too easy" in prompt and "Echo hello into /app/hello.txt" in prompt
    assert "trivial-echo (pass@2 = 1.00 over 30 attempts" in prompt
    assert "Repair the broken Makefile" not in prompt  # inside the band: not "too easy"
    assert "Difficulty: hard" in prompt
    with session(workspace.engine) as s:
        (g,) = queries.list_generations(s)
    assert g.difficulty == "hard"


def test_concurrent_batch_records_every_attempt(workspace: Workspace, server: AnthropicServer) -> None:
    model = f"{HAIKU}-batch"
    server.script(model, [Reply([text("nothing to do")])])
    result = run(workspace, server, model, n=4, concurrency=2)
    assert len(result.results) == 4 and result.skipped == 0
    assert {r.outcome for r in result.results} == {"rejected"}
    # Seeds are drawn up front from --seed: the same batch twice asks for the same tasks.
    again = run(workspace, server, model, n=4, concurrency=2)
    assert [r.seed_axes for r in again.results] == [r.seed_axes for r in result.results]
    (row,) = generation_report(workspace)
    assert (row.attempts, row.accepted, row.yield_) == (8, 0, 0.0)


@pytest.mark.slow
def test_cli_generate_and_report(workspace: Workspace, server: AnthropicServer) -> None:
    model = f"{HAIKU}-cli"
    server.script(model, [Reply([text("I will not write a task.")])])
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": server.api_key,
        "ANTHROPIC_BASE_URL": server.base_url,
        "PYTHONPATH": str(REPO),
    }
    cmd = [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(workspace.root)]
    proc = subprocess.run(
        [*cmd, "generate", "--n", "2", "--model", model, "--prompt", "v1-plain", "--concurrency", "2",
         "--difficulty", "medium", "--budget-usd", "5", "--seed", "1"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert proc.returncode == 1, proc.stderr  # nothing accepted
    assert "rejected" in proc.stdout and "0/2 accepted" in proc.stdout
    assert server.api_key not in proc.stdout + proc.stderr

    # [generator] base_url in bandpass.toml is honoured when ANTHROPIC_BASE_URL is not set.
    (workspace.root / "bandpass.toml").write_text(f'[generator]\nbase_url = "{server.base_url}"\n')
    env.pop("ANTHROPIC_BASE_URL")
    proc = subprocess.run(
        [*cmd, "generate", "--n", "1", "--model", model, "--prompt", "v2-context", "--json"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    out = json.loads(proc.stdout)
    assert out["results"][0]["outcome"] == "rejected" and out["results"][0]["prompt_version"] == "v2-context"

    proc = subprocess.run(
        [*cmd, "report", "generation", "--json"], capture_output=True, text=True, env=env, timeout=60
    )
    assert proc.returncode == 0, proc.stderr
    rows = {(r["prompt_version"], r["model"]): r for r in json.loads(proc.stdout)}
    assert rows[("v1-plain", model)]["attempts"] == 2 and rows[("v2-context", model)]["attempts"] == 1
    assert rows[("v1-plain", model)]["top_reasons"] == [["generator.no_tool_use", 2]]
    proc = subprocess.run([*cmd, "report", "generation"], capture_output=True, text=True, env=env, timeout=60)
    assert "v1-plain" in proc.stdout and "yield" in proc.stdout

    env.pop("ANTHROPIC_API_KEY")
    proc = subprocess.run(
        [*cmd, "generate", "--n", "1", "--model", model], capture_output=True, text=True, env=env
    )
    assert proc.returncode == 2 and "ANTHROPIC_API_KEY is not set" in proc.stderr


def test_streamed_text_is_redacted_even_when_the_key_spans_deltas(
    workspace: Workspace, server: AnthropicServer, bus_events: tuple[EventBus, list[GenerationEvent]]
) -> None:
    bus, events = bus_events
    model = f"{HAIKU}-echo"
    # 16-character text deltas: the 32-character key always arrives cut in pieces.
    server.script(model, [Reply([text(f"Your key is {server.api_key}, and {server.api_key}x again.")])])
    res = run(workspace, server, model, bus=bus).results[0]
    streamed = "".join(e.data for e in events if e.kind == "text")
    assert server.api_key not in streamed and streamed.count("[REDACTED]") >= 2
    assert streamed.startswith("Your key is ")
    assert server.api_key not in generation(workspace, res.generation_id).transcript_json
    assert_key_absent(workspace, server.api_key)


@pytest.mark.slow
def test_unknown_model_runs_with_cost_unknown_and_a_budget_refuses_it(
    workspace: Workspace, server: AnthropicServer
) -> None:
    """A model missing from the price table (a family newer than the table) still generates; its cost
    is shown as unknown, never as $0; only a dollar budget refuses it, before any API call."""
    model = "claude-opus-4-8"  # not claude-opus-4: families match exactly
    server.script(model, [Reply([text("I will not write a task.")])])
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": server.api_key,
        "ANTHROPIC_BASE_URL": server.base_url,
        "PYTHONPATH": str(REPO),
    }
    cmd = [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(workspace.root)]
    proc = subprocess.run(
        [*cmd, "generate", "--n", "1", "--model", model, "--prompt", "v1-plain"],
        capture_output=True, text=True, env=env, timeout=120,
    )  # fmt: skip
    assert "warning: cost unknown: no price for model 'claude-opus-4-8'" in proc.stderr
    # the hint names the file a curator edits: this workspace's prices, not the installed package's
    assert f"to {workspace.root / 'generator-prices.toml'}" in proc.stderr, proc.stderr
    assert "0/1 accepted, cost unknown spent" in proc.stdout, proc.stdout + proc.stderr
    assert len(server.message_requests()) >= 1
    proc = subprocess.run([*cmd, "report", "generation"], capture_output=True, text=True, env=env, timeout=60)
    assert "unknown" in proc.stdout
    rows = json.loads(
        subprocess.run(
            [*cmd, "report", "generation", "--json"], capture_output=True, text=True, env=env, timeout=60
        ).stdout
    )
    assert rows[0]["cost_usd"] is None and rows[0]["cost_known"] is False
    listing = subprocess.run([*cmd, "generations"], capture_output=True, text=True, env=env, timeout=60)
    assert "unknown" in listing.stdout and "0.0000" not in listing.stdout, listing.stdout
    (gen,) = json.loads(
        subprocess.run([*cmd, "generations", "--json"], capture_output=True, text=True, env=env).stdout
    )[:1]
    assert gen["cost_usd"] is None
    shown = subprocess.run(
        [*cmd, "generations", "show", str(gen["id"])], capture_output=True, text=True, env=env
    )
    assert "cost unknown" in shown.stdout and "$0.0000" not in shown.stdout, shown.stdout

    sent = len(server.message_requests())
    for flag in (["--budget-usd", "1"], ["--task-budget-usd", "1"]):
        proc = subprocess.run(
            [*cmd, "generate", "--n", "1", "--model", model, *flag], capture_output=True, text=True, env=env
        )
        assert proc.returncode == 2, proc.stderr
        assert "needs a price: no price for model 'claude-opus-4-8'" in proc.stderr
    assert len(server.message_requests()) == sent
