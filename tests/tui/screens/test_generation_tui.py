"""The Generate screen reads stored attempts and checks the generator, against the scripted Messages
server through the real SDK: Enter on a history row opens the Generation screen with the same turn-by-turn
reading as ``bandpass generations show``; ``k`` runs the one-token check and shows which step failed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from textual.widgets import DataTable

from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.generator import Budget, RetryPolicy, generate_batch
from bandpass.engine.generator.transcript import render_lines
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.generate import GenerateScreen
from bandpass.tui.screens.generation import GenerationScreen
from tests.support.servers.anthropic_server import VLLM_TOOLS_REFUSAL, Cut, Reply, running_server, text, tool
from tests.support.waiting import wait_for

SIZE = (160, 45)
MODEL = "claude-haiku-4-5-tui"


def log_text(screen: Any, selector: str) -> str:
    return "\n".join(line.text for line in screen.query_one(selector).lines)


async def test_history_opens_an_attempt_and_check_explains_a_refusal(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with running_server() as server:
        ws = Workspace.open(tmp_path / "ws")
        ws.config_path.write_text(f'[generator]\nmodel = "{MODEL}"\nbase_url = "{server.base_url}"\n')
        ws = Workspace.open(tmp_path / "ws")
        monkeypatch.setenv("ANTHROPIC_API_KEY", server.api_key)
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
        server.script(
            MODEL,
            [
                [Cut("close"), Reply([text("Listing."), tool("list_files")])],
                Reply([text("That is all.")]),
            ],
        )
        generate_batch(
            ws,
            1,
            MODEL,
            "v1-plain",
            retry=RetryPolicy(max_retries=2, backoff_base_s=0.01),
            budget=Budget(max_no_tool_turns=1),
        )

        app = BandpassApp(ws, bus=EventBus())
        async with app.run_test(size=SIZE) as pilot:
            await pilot.press("3")
            await wait_for(pilot, lambda: isinstance(app.screen, GenerateScreen))
            gen = app.screen
            table = gen.query_one("#gen-history", DataTable)
            await wait_for(pilot, lambda: table.row_count == 1)
            table.focus()
            await pilot.press("enter")
            await wait_for(pilot, lambda: isinstance(app.screen, GenerationScreen))
            detail = app.screen
            await wait_for(pilot, lambda: "── turn 2" in log_text(detail, "#generation-log"))
            shown = log_text(detail, "#generation-log")
            assert "rejected (generator.no_tool_use)" in shown
            assert "── turn 1 · msg_" in shown and "retry 1 after infra.generator_unavailable" in shown
            assert "closed the connection mid-reply" in shown and "▶ list_files" in shown
            await pilot.press("escape")
            await wait_for(pilot, lambda: app.screen is gen)

            server.refuse_tools = VLLM_TOOLS_REFUSAL
            await pilot.press("k")
            await wait_for(pilot, lambda: "FAIL tools" in log_text(gen, "#gen-log"))
            shown = log_text(gen, "#gen-log")
            assert "ok   endpoint" in shown and "--enable-auto-tool-choice" in shown
            await wait_for(
                pilot, lambda: any(VLLM_TOOLS_REFUSAL in str(n.message) for n in app._notifications)
            )


def test_snapshot_generation_screen(tmp_path: Path, snap_compare: Any) -> None:
    """A stored attempt with a retry, tool calls, an error result, an audit and an API error ending."""
    import json
    from datetime import UTC, datetime

    from bandpass.store import queries
    from bandpass.store.db import session

    ws = Workspace.open(tmp_path / "ws")
    url = "http://127.0.0.1:8000/v1/messages"
    usage = {"input_tokens": 1200, "output_tokens": 80, "cache_write_tokens": 0, "cache_read_tokens": 0}
    transcript = [
        {"type": "meta", "url": url, "scratch_dir": "generations/000001/gen-1"},
        {"type": "system", "text": "You write terminal tasks."},
        {"type": "message", "role": "user", "content": [{"type": "text", "text": "Write a task."}]},
        {
            "type": "api_retry",
            "code": "infra.generator_unavailable",
            "attempt": 1,
            "wait_s": 1.2,
            "detail": f"{url} closed the connection mid-reply: peer closed connection without sending "
            "complete message body (incomplete chunked read)",
            "lost_usage": {"input_tokens": 1200, "output_tokens": 3},
        },
        {
            "type": "message",
            "role": "assistant",
            "message_id": "msg_0001",
            "request_id": "req_0001",
            "stop_reason": "tool_use",
            "usage": usage,
            "cost_usd": 0.0016,
            "content": [
                {"type": "text", "text": "I will write a log-parsing task."},
                {"type": "tool_use", "id": "tu1", "name": "write_file", "input": {"path": "instruction.md"}},
                {"type": "tool_use", "id": "tu2", "name": "audit", "input": {}},
            ],
        },
        {
            "type": "message",
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "tu1", "content": "wrote 120 bytes to instruction.md"},
                {
                    "type": "tool_result",
                    "tool_use_id": "tu2",
                    "content": "audit rejected: invalidity.oracle_fails",
                    "is_error": True,
                },
            ],
        },
        {"type": "audit", "verdict": "rejected", "reasons": ["invalidity.oracle_fails"]},
        {
            "type": "api_error",
            "code": "infra.generator_unavailable",
            "detail": f"cannot connect to {url}: [Errno 111] Connection refused (gave up after 8 retries)",
        },
        {"type": "finished", "outcome": "error", "reason": "infra.generator_unavailable"},
    ]
    with session(ws.engine) as s:
        gid = queries.create_generation(
            s,
            prompt_version="v2-context",
            model="claude-sonnet-4-5",
            difficulty="medium",
            seed_axes_json=json.dumps({"domain": "logs", "skill": "awk"}),
            outcome="error",
            reason="infra.generator_unavailable",
            detail=f"cannot connect to {url}: [Errno 111] Connection refused (gave up after 8 retries)",
            turns=1,
            tokens_in=1200,
            tokens_out=80,
            lost_tokens_in=1200,
            lost_tokens_out=3,
            cost_usd=0.0016,
            wall_s=95.0,
            api_retries=9,
            transcript_json=json.dumps(transcript),
            created_at=datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC),
        ).id
    assert gid is not None

    async def run_before(pilot: Any) -> None:
        tasks = pilot.app.screen  # the Tasks screen underneath loads in a worker: let it finish first
        await wait_for(pilot, lambda: tasks.last_load_s is not None, what="the Tasks load")
        screen = GenerationScreen(ws, gid)
        await pilot.app.push_screen(screen)

        def written() -> bool:  # the whole reading is in the log, down to its last line
            shown = log_text(screen, "#generation-log")
            return screen.reading is not None and render_lines(screen.reading)[-1][1] in shown

        await wait_for(pilot, written, what="the attempt's last line in the log")

    assert snap_compare(
        BandpassApp(ws, bus=EventBus(), show_path=False), terminal_size=SIZE, run_before=run_before
    )
