"""The Generate screen reads stored attempts and checks the generator, against the scripted Messages
server through the real SDK: Enter on a history row opens the Generation screen with the same turn-by-turn
reading as ``bandpass generations show``; ``k`` runs the one-token check and shows which step failed."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from engine.core.events import EventBus
from engine.core.workspace import Workspace
from engine.generator import Budget, RetryPolicy, generate_batch
from tests.servers.anthropic_server import VLLM_TOOLS_REFUSAL, Cut, Reply, running_server, text, tool
from tui.app import BandpassApp
from tui.screens.generate import GenerateScreen
from tui.screens.generation import GenerationScreen

SIZE = (160, 45)
MODEL = "claude-haiku-4-5-tui"


async def wait_for(pilot: Any, cond: Any, timeout: float = 20.0) -> None:
    end = time.monotonic() + timeout
    while not cond():
        if time.monotonic() > end:
            raise AssertionError("condition not met in time")
        await pilot.pause(0.05)


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
            table = gen.query_one("#gen-history")
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
