"""`export --format traces [--filter ...]` (episodes as chats with masking columns, loadable by
`datasets`, byte-identical) and `export --against DIR...` (decontamination against reference tasks)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import bandpass.tui.commands.export  # noqa: F401 - registers `export`
from bandpass.engine.calibration.export import ExportError, ExportParams, export
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.policy.context import PromptTemplates
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.tui.cli import app
from tests.support.calib_data import add_episodes, add_task, outcomes, write_task_dir

M = "qwen-9b"
BENCH_INSTRUCTION = (
    "Configure nginx to serve the static site in /srv/www on port 8080, enable gzip for text assets, "
    "and make the access log use the combined format with request timing appended at the end."
)
COLUMNS = [
    "episode_id", "task", "version_hash", "model", "attempt", "outcome", "reward", "verifier_reward",
    "rewards", "infra_ok", "blocking_tags", "episode_tags", "task_exported", "source", "steps", "messages",
]  # fmt: skip


@pytest.fixture
def ws(workspace: Workspace) -> Workspace:
    ws = workspace
    alpha, _ = add_task(ws, "alpha")
    ids = add_episodes(
        ws, alpha, M, outcomes(2, 2, agent_error__parse_error=1, infra_error__container_died=1)
    )
    with session(ws.engine) as s:
        # passed: two steps, the first answer declares the task complete, the second confirms
        q.add_step(s, ids[0], 0, observation="$ ", raw_reply='{"commands": [], "task_complete": true}',
                   action={"commands": [], "task_complete": True})  # fmt: skip
        q.add_step(s, ids[0], 1, observation="$ ls\nalpha.txt\n$ ", raw_reply="confirmed", action={})
        # parse error, then a step whose request died before any reply
        q.add_step(
            s, ids[4], 0, observation="$ ", raw_reply="I think I should", action={"parse_error": "no JSON"}
        )
        q.add_step(s, ids[4], 1, observation="$ again", raw_reply="", action={"error": "agent_timeout"})
        q.add_tag(s, ids[2], "harness", "turn_limit", blocking=False)
    bravo, _ = add_task(ws, "bravo")
    bids = add_episodes(ws, bravo, M, outcomes(2, 2))
    with session(ws.engine) as s:
        q.add_tag(s, bids[1], "misalignment", "reward_hack", blocking=True)
    copy, _ = add_task(ws, "bench-copy", instruction=BENCH_INSTRUCTION.replace("8080", "8081"))
    add_episodes(ws, copy, M, outcomes(2, 2))
    return ws


def _rows(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_traces_carry_masking_columns_and_the_conversation(ws: Workspace, tmp_path: Path) -> None:
    # band 0:1: four samples decide nothing inside a narrower band, and this test is about the columns
    res = export(ws, ExportParams(model=M, formats=("traces",), lo=0.0, hi=1.0), tmp_path / "out")
    rows = _rows(tmp_path / "out/traces/traces.jsonl")
    assert res.traces == len(rows) == 14
    assert [r["task"] for r in rows] == ["alpha"] * 6 + ["bench-copy"] * 4 + ["bravo"] * 4
    assert list(rows[0]) == sorted(COLUMNS)  # JSONL keys sorted; Parquet keeps the schema order
    assert pq.read_table(tmp_path / "out/traces/traces.parquet").column_names == COLUMNS
    alpha = rows[:6]
    assert [r["outcome"] for r in alpha] == [
        "passed", "passed", "failed", "failed", "agent_error:parse_error", "infra_error:container_died",
    ]  # fmt: skip
    assert [r["infra_ok"] for r in alpha] == [True] * 5 + [False]
    assert alpha[5]["reward"] is None and alpha[0]["reward"] == 1.0
    assert alpha[2]["episode_tags"] == ["harness.turn_limit"] and alpha[2]["blocking_tags"] == []
    assert all(r["blocking_tags"] == ["misalignment.reward_hack"] for r in rows if r["task"] == "bravo")
    exported = {r["task"]: r["task_exported"] for r in rows}
    assert exported == {"alpha": True, "bench-copy": True, "bravo": False}  # bravo: blocking tag

    p = PromptTemplates("terminus-v1")
    instruction = (ws.root / "tasks").glob("alpha/*/instruction.md").__next__().read_text().strip()
    assert alpha[0]["messages"] == [
        {"role": "system", "content": p.render("system")},
        {"role": "user", "content": p.render("first", instruction=instruction, observation="$ ")},
        {"role": "assistant", "content": '{"commands": [], "task_complete": true}'},
        {"role": "user", "content": p.render("confirm", observation="$ ls\nalpha.txt\n$ ")},
        {"role": "assistant", "content": "confirmed"},
    ]
    parse = alpha[4]["messages"]
    assert [m["role"] for m in parse] == ["system", "user", "assistant", "user"]  # no reply at step 1
    assert parse[3]["content"] == p.render("parse_error", error="no JSON", observation="$ again")
    assert alpha[1]["messages"][2:] == []  # an episode without steps is the prompt alone

    ok = export(ws, ExportParams(model=M, formats=("traces",), trace_filter="success"), tmp_path / "s")
    assert ok.traces == 6 and {r["outcome"] for r in _rows(tmp_path / "s/traces/traces.jsonl")} == {"passed"}
    bad = export(ws, ExportParams(model=M, formats=("traces",), trace_filter="failure"), tmp_path / "f")
    outs = [r["outcome"] for r in _rows(tmp_path / "f/traces/traces.jsonl")]
    assert bad.traces == 8 and "passed" not in outs and "infra_error:container_died" in outs
    with pytest.raises(ExportError, match="--filter: expected one of all, success, failure, got 'good'"):
        ExportParams(model=M, formats=("traces",), trace_filter="good")


def test_traces_load_with_datasets_and_reexport_is_byte_identical(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets

    params = ExportParams(model=M, formats=("traces", "verl"))
    export(ws, params, tmp_path / "a")
    export(ws, params, tmp_path / "b")
    for rel in ("traces/traces.jsonl", "traces/traces.parquet", "manifest.json"):
        assert (tmp_path / "a" / rel).read_bytes() == (tmp_path / "b" / rel).read_bytes(), rel
    cache = str(tmp_path / "hf-cache")
    pq_ds = datasets.load_dataset(
        "parquet", data_files=str(tmp_path / "a/traces/traces.parquet"), cache_dir=cache
    )["train"]
    js_ds = datasets.load_dataset(
        "json", data_files=str(tmp_path / "a/traces/traces.jsonl"), cache_dir=cache
    )["train"]
    assert pq_ds.num_rows == js_ds.num_rows == 14
    assert pq_ds.column_names == COLUMNS and set(js_ds.column_names) == set(COLUMNS)
    masked = pq_ds.filter(lambda r: r["infra_ok"] and not r["blocking_tags"])
    assert masked.num_rows == 9  # the infra error and bravo's four are masked out
    assert pq_ds[0]["messages"][0]["role"] == "system"


def test_against_leaves_out_near_duplicates_of_reference_tasks(ws: Workspace, tmp_path: Path) -> None:
    bench = tmp_path / "terminal-bench"
    write_task_dir(bench / "tasks" / "nginx-gzip", "nginx-gzip", BENCH_INSTRUCTION)
    write_task_dir(bench / "tasks" / "other", "other", "Compute the sha256 of every file in /data.")
    out = tmp_path / "out"
    r = CliRunner().invoke(
        app,
        ["--workspace", str(ws.root), "export", "--model", M, "--format", "harbor,traces", "--band", "0:1",
         "--against", str(bench), "--out", str(out), "--json"],
    )  # fmt: skip
    assert r.exit_code == 0, r.output
    d = json.loads(r.stdout)
    ref = f"{bench}/tasks/nginx-gzip"
    assert d["excluded"]["bench-copy"] == [f"contaminated:{ref}"]
    assert "bench-copy" not in [t["name"] for t in d["tasks"]]
    manifest = json.loads((out / "manifest.json").read_text())
    (only,) = manifest["decontaminated"]
    assert only == "bench-copy" and manifest["decontaminated"][only]["reference"] == ref
    assert manifest["decontaminated"][only]["similarity"] >= 0.8
    assert manifest["params"]["against"] == [str(bench)]
    assert "bench-copy" not in {r["task"] for r in _rows(out / "traces/traces.jsonl")}
    assert not (out / "harbor" / "bench-copy").exists()

    r = CliRunner().invoke(
        app,
        ["--workspace", str(ws.root), "export", "--model", M, "--against", str(tmp_path / "nope"),
         "--out", str(tmp_path / "o2")],
    )  # fmt: skip
    assert r.exit_code == 1 and f"--against {tmp_path / 'nope'}: no such directory" in r.output
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ExportError, match="no task directories"):
        export(ws, ExportParams(model=M, against=(str(empty),)), tmp_path / "o3")


def test_harbor_schema_never_exports_tampered_or_infra_episodes_as_successes(
    workspace: Workspace, tmp_path: Path
) -> None:
    """In Harbor's schema a result is the exception name when there is one: a forged reward (the tamper
    guard's agent_error:verifier_tamper, reward 1) or an infra error is never a number, so never kept by
    ``--filter success`` (Harbor's rule: float(result) > 0)."""
    ws = workspace
    vid, _ = add_task(ws, "alpha")
    ids = add_episodes(
        ws,
        vid,
        M,
        [
            "passed",
            "failed",
            "agent_error:verifier_tamper",
            "infra_error:container_died",
            "agent_error:agent_timeout",
        ],
        rewards=[1.0, 0.0, 1.0, None, 0.0],
    )
    with session(ws.engine) as s:
        for eid in ids:
            q.add_step(s, eid, 0, observation="$ ", raw_reply='{"commands": []}', action={})
    rows = {}
    for how in ("all", "success"):
        export(
            ws,
            ExportParams(model=M, formats=("traces",), trace_schema="harbor", trace_filter=how),
            tmp_path / how,
        )
        rows[how] = _rows(tmp_path / how / "traces/traces.jsonl")
    assert [r["result"] for r in rows["all"]] == [
        "1.0", "0.0", "BandpassVerifierTamperError", "BandpassContainerDiedError", "AgentTimeoutError",
    ]  # fmt: skip
    assert [r["result"] for r in rows["success"]] == ["1.0"]
    first = rows["all"][0]
    assert (first["agent"], first["model"], first["episode"]) == ("bandpass", M, "episode-0")
    assert [m["role"] for m in first["conversations"]] == ["user", "user", "assistant"]
    with pytest.raises(ExportError, match="--traces-schema: expected one of bandpass, harbor"):
        ExportParams(model=M, formats=("traces",), trace_schema="hf")
