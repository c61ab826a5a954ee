"""The application layer (engine/app): the use cases both front ends call, tested without either front end.

Start a batch (the checks before anything is queued), resume one, select episodes to review, and the error
rule: a ``BandpassError`` is one line in the CLI and a notification in the TUI, while a bug (any other
exception) fails loudly — a traceback and a non-zero exit, an "Unexpected error" report — never a
look-alike refusal. Real SQLite workspaces, real HTTP to the local OpenAI-compatible server in
tests/support/servers/, the real ``bandpass`` process.
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.app import batches
from bandpass.engine.app import review as reviewing
from bandpass.engine.app.errors import NothingToRun
from bandpass.engine.core.errors import BandpassError
from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run import rollouts
from bandpass.engine.run.rollouts import BatchError
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import pk
from bandpass.tui.app import BandpassApp
from tests.support.paths import REPO
from tests.support.servers.openai_server import running_server
from tests.support.taskfactory import make_task
from tests.support.waiting import start_batch, wait_for


@pytest.fixture
def tasks(workspace: Workspace, tmp_path: Path) -> tuple[Workspace, dict[str, int]]:
    a = make_task(tmp_path / "src", "answer-a", instruction="Write 42 into /app/answer.txt (a).")
    b = make_task(tmp_path / "src", "answer-b", instruction="Write 42 into /app/answer.txt (b).")
    assert import_paths(workspace, [a, b]).ok
    with session(workspace.engine) as s:
        return workspace, {r.name: r.version_id for r in queries.task_rows(s)}


def _episodes(ws: Workspace) -> list[Any]:
    with session(ws.engine) as s:
        return list(queries.episodes(s))


def _batches(ws: Workspace) -> list[Any]:
    with session(ws.engine) as s:
        return list(queries.batches(s))


def _dead_port() -> int:
    """A port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


# --- start a batch ------------------------------------------------------------------------------------


def test_a_dead_endpoint_is_refused_and_nothing_is_queued(tasks: tuple[Workspace, dict[str, int]]) -> None:
    ws, _ = tasks
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    req = batches.StartBatch(name="script:solve-hello", kind="model", base_url=url, local=False)
    with pytest.raises(BatchError, match="policy endpoint not ready, nothing was run"):
        batches.start_batch(ws, req)
    assert _batches(ws) == [] and _episodes(ws) == []


def test_a_live_endpoint_passes_the_check_and_the_batch_is_planned(
    tasks: tuple[Workspace, dict[str, int]],
) -> None:
    ws, vids = tasks
    with running_server() as server:
        url = server.base_url
        req = batches.StartBatch(
            name="script:solve-hello",
            kind="model",
            base_url=url,
            tasks=["answer-a"],
            k=3,
            params={"max_steps": 5},
            local=False,
        )
        planned = batches.start_batch(ws, req)
        assert server.requests, "the endpoint check asked the server"
    assert planned.version_ids == [vids["answer-a"]] and planned.k == 3
    (batch,) = _batches(ws)
    assert (batch.id, batch.agent, batch.kind, batch.base_url) == (
        planned.batch_id,
        "script:solve-hello",
        "model",
        url,
    )
    eps = _episodes(ws)
    assert sorted(e.attempt for e in eps) == [0, 1, 2] and {e.status for e in eps} == {"queued"}


def test_a_model_missing_from_the_config_is_refused_before_any_request(
    tasks: tuple[Workspace, dict[str, int]],
) -> None:
    ws, _ = tasks
    with pytest.raises(BatchError, match="not in bandpass.toml"):
        batches.start_batch(ws, batches.StartBatch(name="nowhere", kind="model", local=False))
    assert _batches(ws) == []


def test_plan_of_a_builtin_batch_over_every_task(tasks: tuple[Workspace, dict[str, int]]) -> None:
    ws, vids = tasks
    planned = batches.start_batch(ws, batches.StartBatch(name="oracle", kind="builtin", k=2, local=False))
    assert sorted(planned.version_ids) == sorted(vids.values())
    eps = _episodes(ws)
    assert len(eps) == 4 and {e.batch_id for e in eps} == {planned.batch_id}
    assert sorted((e.task_version_id, e.attempt) for e in eps) == sorted(
        (v, a) for v in vids.values() for a in (0, 1)
    )


def test_an_unknown_task_or_an_empty_workspace_is_refused(
    tasks: tuple[Workspace, dict[str, int]], tmp_path: Path
) -> None:
    ws, _ = tasks
    req = batches.StartBatch(name="oracle", kind="builtin", tasks=["answer-a,no-such"], local=False)
    with pytest.raises(NothingToRun, match="no task or version matches 'no-such'"):
        batches.start_batch(ws, req)
    assert _batches(ws) == []
    empty = Workspace.open(tmp_path / "empty")
    with pytest.raises(NothingToRun, match="no tasks in"):
        batches.start_batch(empty, batches.StartBatch(name="oracle", kind="builtin", local=False))


def test_a_bad_band_for_an_adaptive_batch_is_one_refusal(tasks: tuple[Workspace, dict[str, int]]) -> None:
    ws, _ = tasks
    req = batches.StartBatch(name="oracle", kind="builtin", local=False)
    with pytest.raises(BandpassError, match="--band"):
        batches.start_batch(ws, req, adaptive=batches.AdaptiveOptions(band="0.9:0.1"))
    assert _batches(ws) == []


def test_a_band_round_without_a_docker_engine_is_one_refusal(
    tasks: tuple[Workspace, dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Calibration's `a` (run a round) on a machine with no engine: refused before anything is planned (the
    round once planned its batch and waited for the engine until the app was closed)."""
    from bandpass.engine.calibration.adaptive import AdaptiveSettings
    from bandpass.engine.sandbox.docker_engine import DockerUnavailable

    ws, versions = tasks
    monkeypatch.setenv("DOCKER_HOST", "unix:///nonexistent/docker.sock")
    with pytest.raises(DockerUnavailable):
        batches.start_round(ws, "oracle", list(versions.values()), AdaptiveSettings())
    assert _batches(ws) == [] and _episodes(ws) == []


# --- resume -------------------------------------------------------------------------------------------


def test_resume_finds_the_latest_unfinished_batch(tasks: tuple[Workspace, dict[str, int]]) -> None:
    ws, _ = tasks
    with pytest.raises(NothingToRun, match="no unfinished batch"):
        batches.resume_batch(ws)
    with pytest.raises(NothingToRun, match="no batch in"):
        batches.resume_batch(ws, retry="oom")
    first = batches.start_batch(ws, batches.StartBatch(name="oracle", kind="builtin", k=1, local=False))
    second = batches.start_batch(ws, batches.StartBatch(name="nop", kind="builtin", k=1, local=False))
    resumed = batches.resume_batch(ws)
    assert resumed.batch_id in {first.batch_id, second.batch_id} and resumed.batch.kind == "builtin"
    assert resumed.requeued is None and resumed.sampler is None
    named = batches.resume_batch(ws, first.batch_id)
    assert (named.batch_id, named.batch.agent) == (first.batch_id, "oracle")
    with pytest.raises(BatchError, match="no batch 'b-missing'"):
        batches.resume_batch(ws, "b-missing")


def test_resume_with_retry_requeues_only_infra_errors(tasks: tuple[Workspace, dict[str, int]]) -> None:
    ws, _ = tasks
    planned = batches.start_batch(ws, batches.StartBatch(name="oracle", kind="builtin", k=1, local=False))
    eps = _episodes(ws)
    with session(ws.engine) as s:
        queries.finish_episode(s, eps[0].id, outcome="infra_error:oom", reward=None)
        queries.finish_episode(s, eps[1].id, outcome="failed", reward=0.0)
    with pytest.raises(BatchError, match="only infra_error codes can be retried"):
        batches.resume_batch(ws, planned.batch_id, retry="failed")
    resumed = batches.resume_batch(ws, retry="oom")
    assert resumed.batch_id == planned.batch_id and resumed.requeued == [eps[0].id]


def test_resume_checks_a_model_batchs_endpoint(tasks: tuple[Workspace, dict[str, int]]) -> None:
    ws, vids = tasks
    url = f"http://127.0.0.1:{_dead_port()}/v1"
    batch_id = rollouts.plan_batch(ws, "script:solve-hello", [vids["answer-a"]], 1, base_url=url)
    with pytest.raises(BatchError, match="policy endpoint not ready"):
        batches.resume_batch(ws, batch_id)
    assert batches.resume_batch(ws, batch_id, check=False).batch_id == batch_id  # --no-check


# --- review -------------------------------------------------------------------------------------------


def test_review_selection_refuses_nothing_and_unknown_episodes(
    tasks: tuple[Workspace, dict[str, int]],
) -> None:
    ws, _ = tasks
    with pytest.raises(NothingToRun, match="no episodes selected"):
        reviewing.select(ws, reviewing.ReviewRequest())
    with pytest.raises(BandpassError, match="999"):
        reviewing.select(ws, reviewing.ReviewRequest(episodes=[999]))
    with pytest.raises(NothingToRun, match="episode 999 does not exist"):
        reviewing.latest_valid_review(ws, 999)
    with pytest.raises(NothingToRun, match="no such episode: 999"):
        reviewing.stored_reviews(ws, [999])


# --- the error rule -----------------------------------------------------------------------------------

#: Runs the real CLI with one app function replaced by ``BODY`` (a fault injected in the process).
INJECT = """
import sys
import bandpass.engine.app.batches as b
def task_versions(ws, refs):
    {body}
b.task_versions = task_versions
from bandpass.tui.cli import main
sys.argv = ["bandpass", *sys.argv[1:]]
main()
"""


def _cli_with(body: str, ws: Workspace, *args: str) -> subprocess.CompletedProcess[str]:
    code = INJECT.format(body=body)
    return subprocess.run(
        [sys.executable, "-c", code, "-w", str(ws.root), *args],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "BANDPASS_DEBUG"},
    )


def test_a_bug_in_a_use_case_fails_loudly_in_the_cli(tasks: tuple[Workspace, dict[str, int]]) -> None:
    ws, _ = tasks
    res = _cli_with("raise KeyError('bug')", ws, "run", "--agent", "oracle")
    assert res.returncode != 0
    assert "Traceback" in res.stderr and "KeyError: 'bug'" in res.stderr, res.stderr
    assert "bandpass: error:" not in res.stderr  # not dressed as a refusal
    assert _batches(ws) == []


def test_a_bandpass_error_in_a_use_case_is_one_line(tasks: tuple[Workspace, dict[str, int]]) -> None:
    ws, _ = tasks
    body = "from bandpass.engine.app.errors import NothingToRun; raise NothingToRun('nothing to run here')"
    res = _cli_with(body, ws, "run", "--agent", "oracle")
    assert res.returncode == 1
    assert res.stderr.strip() == "bandpass: error: nothing to run here", res.stderr


@pytest.mark.docker  # the batch's pre-flight asks the Docker engine before anything else
async def test_a_bug_in_a_use_case_is_an_unexpected_error_in_the_tui_not_a_refusal(
    tasks: tuple[Workspace, dict[str, int]], monkeypatch: pytest.MonkeyPatch
) -> None:
    ws, _ = tasks

    def plan_batch(*_: Any, **__: Any) -> str:
        raise KeyError("bug")

    monkeypatch.setattr(rollouts, "plan_batch", plan_batch)
    app = BandpassApp(ws, bus=EventBus())
    app.raise_unexpected_in_tests = False
    async with app.run_test(size=(160, 45)) as pilot:
        await pilot.press("2")
        await start_batch(pilot)
        await wait_for(pilot, lambda: any("KeyError" in u for u in app.unexpected))
        titles = [n.title for n in app._notifications]
        assert "Unexpected error" in titles and "Batch failed" not in titles
        assert app.error_log is not None and "KeyError: 'bug'" in app.error_log.read_text()


# --- generate and export ------------------------------------------------------------------------------


def test_generation_history_names_a_broken_prices_file(workspace: Workspace) -> None:
    from bandpass.engine.app import generate as generation
    from bandpass.engine.llm.pricing import WORKSPACE_PRICES, PricesInvalid

    empty = generation.history(workspace)
    assert empty.generations == [] and empty.yields == []
    (workspace.root / WORKSPACE_PRICES).write_text('[models."m"]\ninput = "cheap"\n')
    with pytest.raises(PricesInvalid, match=r'generator-prices.toml: \[models."m"\] needs numeric input'):
        generation.history(workspace)


def test_generator_check_without_a_key_is_a_refusal(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    from bandpass.engine.app import generate as generation
    from bandpass.engine.generator import GeneratorError

    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(GeneratorError, match="ANTHROPIC_API_KEY is not set"):
        generation.check(workspace)


def test_export_refuses_a_model_without_episodes(tasks: tuple[Workspace, dict[str, int]]) -> None:
    from bandpass.engine.app import export as exporting

    ws, vids = tasks
    with pytest.raises(NothingToRun, match=r"--model is required \(no episodes yet\)"):
        exporting.require_model(ws, None)
    with session(ws.engine) as s:
        ep = queries.create_episode(s, vids["answer-a"], "m1", attempt=0)
        queries.finish_episode(s, pk(ep), outcome="passed", reward=1.0)
    assert exporting.require_model(ws, "m1") == "m1"
    with pytest.raises(NothingToRun, match="models with episodes: m1"):
        exporting.require_model(ws, "m2")


def test_reads_return_rows_a_front_end_can_use_after_the_read(
    tasks: tuple[Workspace, dict[str, int]],
) -> None:
    """Each read opens and closes its own session; what it returns is read afterwards, as a screen does."""
    from bandpass.engine.app import reads

    ws, vids = tasks
    planned = batches.start_batch(ws, batches.StartBatch(name="oracle", kind="builtin", k=2, local=False))
    rows, agents = reads.task_rows_and_agents(ws)
    assert sorted(r.name for r in rows) == ["answer-a", "answer-b"] and agents == []
    detail = reads.task_detail(ws, vids["answer-a"])
    assert detail is not None and detail.task is not None and detail.task.name == "answer-a"
    assert "(a)" in detail.version.instruction and len(detail.episodes) == 2
    assert [e.status for e in detail.episodes] == ["queued", "queued"] and detail.audits == []
    assert reads.task_detail(ws, 10_000) is None
    assert reads.task_name_of_version(ws, vids["answer-b"]) == "answer-b"
    assert [b.id for b in reads.batches(ws)] == [planned.batch_id]
    assert reads.resolve_versions(ws, ["answer-b", "nope"]) == [
        ("answer-b", vids["answer-b"]),
        ("nope", None),
    ]
    assert reads.filter_problem(ws, task="nope") == ("task", ["answer-a", "answer-b"])
    assert reads.filter_problem(ws, batch="nope") == ("batch", [planned.batch_id])
    assert reads.filter_problem(ws, task="answer-a", batch=planned.batch_id) is None
    assert reads.finished_episode_ids(ws) == []
    listed = reads.episode_list(ws, task="answer-b")  # plain sqlite3, as `bandpass episodes` reads
    assert [(r.task, r.status, r.attempt) for r in listed] == [
        ("answer-b", "queued", 0),
        ("answer-b", "queued", 1),
    ]


def test_the_front_ends_never_open_a_session_or_name_a_store_query() -> None:
    """The read side is reads' functions, not the store's modules passed through: a screen that opened a
    session again would tie itself to the store's layout (what the import contract forbids)."""
    import re

    from bandpass.engine.app import reads

    for name in ("queries", "session", "diagnoses", "reviews", "search", "endstate", "ledger"):
        assert not hasattr(reads, name), name
    offenders = [
        f"{p.relative_to(REPO)}:{n}"
        for p in sorted((REPO / "tui").rglob("*.py"))
        for n, line in enumerate(p.read_text().splitlines(), 1)
        if re.search(r"\bsession\(|\.engine\) as s\b", line)
    ]
    assert offenders == []
