"""Claude as a second reviewer, end to end: the real ``anthropic`` SDK streams over real HTTP from the
scripted Messages server (tests/support/servers/anthropic_server.py) into a real SQLite workspace.

Covers: a validated suggestion stored (never a tag), unsupported parts dropped and counted, malformed tool
input answered with is_error and retried, a refusal recorded, 429/529/overload retries honouring
retry-after and counted apart, a budget stop (through the CLI), an unknown model's unknown cost, accepting
a review as the curator's tag (and undoing it), and clusters sampled and summarised.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.llm.client import RetryPolicy
from bandpass.engine.review.review_context import build_episode_context
from bandpass.engine.review.review_scope import (
    cluster_summary,
    failure_clusters,
    select_episodes,
    spread_sample,
)
from bandpass.engine.review.review_summary import latest_review_summary
from bandpass.engine.review.reviewer import ReviewError, ReviewRunResult, accept_review, review_episodes
from bandpass.engine.review.tagging import Tagger
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.queries import reviews as rq
from tests.support.narrow import present
from tests.support.paths import REPO
from tests.support.replay_data import make_episode
from tests.support.servers.anthropic_server import (
    AnthropicServer,
    Fail,
    Reply,
    StreamFail,
    malformed,
    refusal,
    running_server,
    text,
    tool,
)

HAIKU = "claude-haiku-4-5"  # $1 in / $5 out per MTok in engine/llm/prices.toml
FAST = RetryPolicy(max_retries=4, backoff_base_s=0.01, backoff_max_s=0.05)
GOOD_CITES = [
    {"source": "step", "step": 1, "quote": "observation given at step 1"},
    {"source": "verifier", "quote": "AssertionError: expected 42"},
]


def submit(**over: Any) -> Reply:
    args: dict[str, Any] = {
        "verdict": "true_fail",
        "code": "harness.turn_limit",
        "citations": GOOD_CITES,
        "explanation": "The policy kept echoing and never wrote the answer the test expects.",
    }
    args.update(over)
    return Reply([text("Reading the episode."), tool("submit_review", **args)])


@pytest.fixture
def server(monkeypatch: pytest.MonkeyPatch) -> Iterator[AnthropicServer]:
    with running_server() as srv:
        monkeypatch.setenv("ANTHROPIC_API_KEY", srv.api_key)
        monkeypatch.delenv("ANTHROPIC_BASE_URL", raising=False)
        yield srv


def run(ws: Workspace, srv: AnthropicServer, ids: list[int], **kw: Any) -> ReviewRunResult:
    kw.setdefault("model", HAIKU)
    kw.setdefault("retry", FAST)
    return review_episodes(ws, ids, base_url=srv.base_url, **kw)


def user_text(body: dict[str, Any]) -> str:
    first = body["messages"][0]["content"]
    return first if isinstance(first, str) else json.dumps(first)


def test_a_review_is_stored_as_a_validated_suggestion_never_a_tag(
    workspace: Workspace, server: AnthropicServer
) -> None:
    eid = make_episode(workspace, test="test_answer")
    server.script(HAIKU, [submit()])
    res = run(workspace, server, [eid])
    (out,) = res.results
    assert (out.status, out.verdict, out.code, out.citations, out.dropped) == (
        "ok",
        "true_fail",
        "harness.turn_limit",
        2,
        [],
    )
    assert out.cost_usd is not None and out.cost_usd > 0 and out.tokens_in > 0 and out.tokens_out > 0
    with session(workspace.engine) as s:
        row = rq.latest_review(s, eid)
        assert row is not None and row.id == out.review_id
        assert (row.model, row.prompt_version, row.tag_class, row.subclass) == (
            HAIKU,
            "v1",
            "harness",
            "turn_limit",
        )
        assert json.loads(row.citations_json) == GOOD_CITES
        assert queries.tags_for_episode(s, eid) == []  # a suggestion, not a tag
    (req,) = server.message_requests(HAIKU)
    body = req.body or {}
    assert body["stream"] is True
    assert [t["name"] for t in body["tools"]] == ["submit_review"]
    assert body["tools"][0]["input_schema"]["additionalProperties"] is False
    prompt = user_text(body)
    for expected in (
        "do it",  # the instruction
        "analysis of step 2",
        "echo step0",  # keystrokes
        "observation given at step 1",
        "tests/test_outputs.py::test_answer",  # the failing check
        "harness.turn_limit",  # the taxonomy
        "outcome: failed",
    ):
        assert expected in prompt, expected
    assert server.api_key.encode() not in workspace.db_path.read_bytes()
    shown = latest_review_summary(workspace, eid)  # what `bandpass show` embeds
    assert shown is not None and shown["code"] == "harness.turn_limit" and shown["citations"] == GOOD_CITES
    assert shown["accepted_tag_id"] is None and latest_review_summary(workspace, eid + 1000) is None


def test_unknown_class_missing_step_and_invented_quote_are_dropped_and_counted(
    workspace: Workspace, server: AnthropicServer
) -> None:
    eid = make_episode(workspace)
    server.script(
        HAIKU,
        [
            submit(
                code="invalidity.tests_are_mean",
                citations=[
                    {"source": "step", "step": 7, "quote": "echo step7"},
                    {"source": "step", "step": 0, "quote": "rm -rf /app"},
                    {"source": "verifier", "quote": "expected   42"},  # whitespace differs: still found
                    {"source": "step", "quote": "echo step1"},
                ],
            )
        ],
    )
    (out,) = run(workspace, server, [eid]).results
    assert out.status == "ok" and out.code == "" and out.citations == 1
    reasons = [d["reason"] for d in out.dropped]
    assert len(reasons) == 4
    assert reasons[0].startswith("unknown class") and "tests_are_mean" in reasons[0]
    assert "step 7 does not exist (the episode has 3 steps)" in reasons[1]
    assert "quote not in the stored step 0" in reasons[2]
    assert "without a step number" in reasons[3]
    with session(workspace.engine) as s:
        row = rq.latest_review(s, eid)
        assert row is not None and row.tag_class == "" and len(json.loads(row.dropped_json)) == 4
        with pytest.raises(ReviewError, match="suggests no taxonomy code"):
            accept_review(workspace, row.id)  # type: ignore[arg-type]


def test_malformed_tool_input_gets_a_clear_error_back_and_a_retry(
    workspace: Workspace, server: AnthropicServer
) -> None:
    eid = make_episode(workspace)
    server.script(
        HAIKU,
        [
            Reply([malformed("submit_review", '{"verdict": "true_fail", "code": ')]),
            submit(verdict="maybe", citations="none"),
            submit(),
        ],
    )
    (out,) = run(workspace, server, [eid]).results
    assert (out.status, out.tool_errors, out.code) == ("ok", 2, "harness.turn_limit")
    reqs = server.message_requests(HAIKU)
    assert len(reqs) == 3
    first_error = reqs[1].body["messages"][-1]["content"][0]  # type: ignore[index]
    assert first_error["type"] == "tool_result" and first_error["is_error"] is True
    assert "not valid JSON" in first_error["content"]
    second_error = reqs[2].body["messages"][-1]["content"][0]["content"]  # type: ignore[index]
    assert "verdict: 'maybe' is not one of" in second_error
    assert "citations: 'none' is not of type 'array'" in second_error


def test_a_model_that_never_answers_validly_ends_invalid_not_in_a_loop(
    workspace: Workspace, server: AnthropicServer
) -> None:
    eid = make_episode(workspace)
    server.script(HAIKU, [Reply([text("I think it is a harness problem.")])])
    (out,) = run(workspace, server, [eid]).results
    assert out.status == "invalid" and out.tool_errors == 3
    assert "no valid submit_review after 3 tries" in out.error
    assert len(server.message_requests(HAIKU)) == 3
    assert (
        "Answer by calling the submit_review tool"
        in present(server.message_requests(HAIKU)[1].body)["messages"][-1]["content"]
    )


def test_a_refusal_is_recorded_as_such(workspace: Workspace, server: AnthropicServer) -> None:
    eid = make_episode(workspace)
    server.script(HAIKU, [refusal("I can't help with that request.")])
    (out,) = run(workspace, server, [eid]).results
    assert out.status == "refused" and out.verdict == "" and out.code == ""
    with session(workspace.engine) as s:
        row = rq.latest_review(s, eid)
        assert row is not None and row.status == "refused"
        assert row.explanation == "I can't help with that request."


def test_429_529_and_overload_are_retried_honouring_retry_after_and_counted_apart(
    workspace: Workspace, server: AnthropicServer
) -> None:
    eid = make_episode(workspace)
    server.script(
        HAIKU,
        [
            [
                Fail(429, "rate_limit_error", retry_after="0"),
                StreamFail(),
                Fail(529, "overloaded_error", retry_after="1"),
                submit(),
            ]
        ],
    )
    (out,) = run(workspace, server, [eid]).results
    assert out.status == "ok" and out.api_retries == 3 and out.tool_errors == 0
    reqs = server.message_requests(HAIKU)
    assert len(reqs) == 4
    assert reqs[3].at - reqs[2].at >= 1.0  # the 529's retry-after: 1 was waited out
    with session(workspace.engine) as s:
        assert rq.latest_review(s, eid).api_retries == 3  # type: ignore[union-attr]


def test_api_failure_after_retries_is_stored_as_an_error(
    workspace: Workspace, server: AnthropicServer
) -> None:
    eid = make_episode(workspace)
    server.script(HAIKU, [Fail(529, "overloaded_error", retry_after="0")])
    res = run(workspace, server, [eid], retry=RetryPolicy(max_retries=2, backoff_base_s=0.01))
    (out,) = res.results
    assert out.status == "error" and out.api_retries == 2 and "infra.generator_overloaded" in out.error


def _cli(ws: Workspace, srv: AnthropicServer, *args: str) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": srv.api_key,
        "ANTHROPIC_BASE_URL": srv.base_url,
        "PYTHONPATH": str(REPO),
    }
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(ws.root), *args],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )


@pytest.mark.slow
def test_budget_stops_the_run_from_the_cli(workspace: Workspace, server: AnthropicServer) -> None:
    ids = [make_episode(workspace, task=f"t{i}") for i in range(3)]
    # $0.10 in + $0.005 out per review at $1/$5 per MTok: two reviews pass a $0.15 budget.
    reply = submit()
    reply.input_tokens, reply.output_tokens = 100_000, 1_000
    server.script(HAIKU, [reply])
    args = ["review", *map(str, ids), "--model", HAIKU, "--budget-usd", "0.15", "--concurrency", "1"]
    proc = _cli(workspace, server, *args, "--json")
    assert proc.returncode == 1, proc.stderr
    out = json.loads(proc.stdout)
    assert out["reviewed"] == 2 and out["skipped_budget"] == [ids[2]]
    assert out["spent_usd"] == pytest.approx(0.21)
    assert len(server.message_requests(HAIKU)) == 2
    proc = _cli(workspace, server, *args)  # again: the two reviewed are skipped, the third reviewed
    assert proc.returncode == 0, proc.stderr
    assert "2 already reviewed by this model and prompt" in proc.stdout
    assert f"ep {ids[2]}" in proc.stdout and "harness.turn_limit" in proc.stdout


def test_an_unknown_model_works_with_cost_unknown_but_cannot_take_a_budget(
    workspace: Workspace, server: AnthropicServer
) -> None:
    eid = make_episode(workspace)
    server.script("claude-mystery-9", [submit()])
    res = run(workspace, server, [eid], model="claude-mystery-9")
    assert res.results[0].status == "ok" and res.results[0].cost_usd is None
    assert not res.cost_known and "no price for model 'claude-mystery-9'" in res.warnings[0]
    with pytest.raises(ReviewError, match="--budget-usd cannot be enforced"):
        run(workspace, server, [eid], model="claude-mystery-9", budget_usd=1.0, again=True)
    proc = _cli(workspace, server, "review", str(eid), "--model", "claude-mystery-9", "--again")
    assert proc.returncode == 0, proc.stderr
    assert "cost unknown" in proc.stdout and "warning: cost unknown" in proc.stderr


def test_no_key_is_a_clear_error(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    eid = make_episode(workspace)
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    with pytest.raises(ReviewError, match="ANTHROPIC_API_KEY is not set"):
        review_episodes(workspace, [eid], model=HAIKU)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-x")
    with pytest.raises(ReviewError, match=r"nothing to review: episode 999$"):
        review_episodes(workspace, [eid, 999], model=HAIKU)


def test_accepting_a_review_writes_the_curators_tag_and_undo_removes_it(
    workspace: Workspace, server: AnthropicServer
) -> None:
    eid = make_episode(workspace)
    server.script(HAIKU, [submit(code="misalignment.false_negative")])
    (out,) = run(workspace, server, [eid]).results
    tagger = Tagger(workspace, author="ana")
    tag = accept_review(workspace, out.review_id, tagger=tagger)  # type: ignore[arg-type]
    assert (tag.tag_class, tag.subclass, tag.author, tag.blocking) == (
        "misalignment",
        "false_negative",
        "ana",
        True,
    )
    assert f"review #{out.review_id}" in tag.note
    with session(workspace.engine) as s:
        assert rq.get_review(s, out.review_id).accepted_tag_id == tag.id  # type: ignore[union-attr,arg-type]
    assert tagger.undo() is not None
    with session(workspace.engine) as s:
        assert queries.tags_for_episode(s, eid) == []


def test_context_has_named_optional_sections_and_cuts_long_episodes(workspace: Workspace) -> None:
    eid = make_episode(workspace, steps=50)
    ctx = build_episode_context(
        workspace, eid, diagnosis="harness.action_loop (0.8)", end_state="/app/x: created"
    )
    titles = [t for t, _ in ctx.sections]
    assert titles == [
        "TASK INSTRUCTION",
        "OUTCOME",
        "STEPS",
        "VERIFIER",
        "DIAGNOSIS (deterministic, no model)",
        "END STATE AND GUARD FINDINGS",
    ]
    steps = ctx.section("STEPS") or ""
    assert "--- step 0 ---" in steps and "--- step 49 ---" in steps and "--- step 25 ---" not in steps
    assert "10 middle steps omitted" in steps
    assert "step:25" in ctx.records  # quotes from an omitted step are still checked against the record
    plain = build_episode_context(workspace, eid)
    assert [t for t, _ in plain.sections][-1] == "VERIFIER"


def test_clusters_are_sampled_and_summarised(workspace: Workspace, server: AnthropicServer) -> None:
    same = [make_episode(workspace, task="loop", test="test_answer") for _ in range(5)]
    other = make_episode(workspace, task="loop", test="test_other")
    clusters = failure_clusters(workspace)
    assert [len(c.episode_ids) for c in clusters] == [5, 1]
    big = clusters[0]
    assert big.episode_ids == same and big.failing == ("tests/test_outputs.py::test_answer",)
    assert other in clusters[1].episode_ids
    assert spread_sample(same, 3) == [same[0], same[2], same[4]]
    ids = select_episodes(workspace, cluster=big.id, sample=3)
    assert ids == [same[0], same[2], same[4]]
    server.script(HAIKU, [submit()])
    res = run(workspace, server, ids, cluster=big.id)
    assert len(res.results) == 3
    summary = cluster_summary(workspace, big.id)
    assert summary["reviewed"] == 3 and summary["majority"] == "harness.turn_limit"
    assert summary["majority_share"] == 1.0 and summary["representative_episode"] in ids
    with session(workspace.engine) as s:
        assert {r.cluster for r in rq.all_reviews(s)} == {big.id}


def test_a_cluster_id_means_the_same_episodes_everywhere(workspace: Workspace) -> None:
    """`bandpass clusters`, the tag queue's cluster view and filter, and the reviewer share one cluster:
    the diagnosis's failure signature, named by one short id (or the full signature)."""
    from bandpass.engine.review.clusters import load_clusters
    from bandpass.engine.review.tagging import QueueFilter, load_queue
    from bandpass.tui.screens.tag_queue import group_clusters

    same = [make_episode(workspace, task="loop", test="test_answer") for _ in range(3)]
    make_episode(workspace, task="loop", test="test_other")
    make_episode(workspace, task="loop", outcome="agent_error:turn_limit")  # no checks: diagnosis + error
    nop = make_episode(workspace, task="loop", test="test_answer", agent="nop")  # an audit probe
    listed = {c.id: c.episode_ids for c in load_clusters(workspace)}  # `bandpass clusters`
    assert {c.id: c.episode_ids for c in failure_clusters(workspace)} == listed  # the reviewer's
    queue = load_queue(workspace)
    assert {c.id: sorted(i.episode_id for i in c.items) for c in group_clusters(queue)} == listed
    big = next(k for k, v in listed.items() if v == same)
    for key in (big, next(c.signature for c in load_clusters(workspace) if c.id == big)):
        assert [i.episode_id for i in load_queue(workspace, filt=QueueFilter(cluster=key))] == same
        assert select_episodes(workspace, cluster=key, sample=5) == same  # probes stay out, as listed
    assert nop in failure_clusters(workspace, include_probes=True)[0].episode_ids
    assert cluster_summary(workspace, big)["episode_ids"] == same


def test_scope_by_task_and_pending_and_clear_errors(workspace: Workspace) -> None:
    from bandpass.engine.review.review_scope import ScopeError

    a = make_episode(workspace, task="alpha")
    b = make_episode(workspace, task="beta")
    passed = make_episode(workspace, task="alpha", outcome="passed")
    assert select_episodes(workspace, task="alpha") == [a, passed]  # passes too: false passes exist
    Tagger(workspace, author="cur").tag(b, "harness.turn_limit")
    assert select_episodes(workspace, pending=True) == [a]  # the tag queue's pending ones
    assert select_episodes(workspace, [b], task="alpha") == [b, a, passed]
    with pytest.raises(ScopeError, match="episode 999 does not exist or has not finished"):
        select_episodes(workspace, [999])
    with pytest.raises(ScopeError, match="task 'gamma' has no finished episodes"):
        select_episodes(workspace, task="gamma")
    with pytest.raises(ScopeError, match="no failure cluster 'nope'"):
        select_episodes(workspace, cluster="nope")


def test_a_stored_diagnosis_reaches_the_prompt_through_its_hook(workspace: Workspace) -> None:
    from sqlalchemy import text as sql

    eid = make_episode(workspace)
    with session(workspace.engine) as s:  # issue 15's table, as the diagnosis stores it
        s.connection().execute(
            sql(
                "INSERT INTO diagnosis (episode_id, code, tag, confidence, summary, evidence_json,"
                " checks_json, signature, rules_version, created_at) VALUES (:e, 'harness.action_loop',"
                " 'harness.action_loop', 0.8, 'the same action 3 times', :ev, '[]', 's', 1, '2026-01-01')"
            ),
            {"e": eid, "ev": '[{"what": "x3", "quote": "", "step": 2, "time": 21.0, "cast": "agent"}]'},
        )
    body = build_episode_context(workspace, eid).section("DIAGNOSIS (deterministic, no model)") or ""
    assert "code: harness.action_loop" in body and "evidence: [step 2 @ 21.0s] x3" in body


def test_budget_also_stops_a_review_that_would_need_another_call(
    workspace: Workspace, server: AnthropicServer
) -> None:
    eid, other = make_episode(workspace, task="a"), make_episode(workspace, task="b")
    costly = Reply([malformed("submit_review", '{"verdict": ')], input_tokens=200_000, output_tokens=10)
    server.script(HAIKU, [costly, submit()])
    res = run(workspace, server, [eid, other], budget_usd=0.1, concurrency=1)
    (out,) = res.results
    assert out.status == "budget" and out.tool_errors == 1 and "budget ran out" in out.error
    assert res.skipped_budget == [other]
    assert len(server.message_requests(HAIKU)) == 1  # no second call past the budget
    with session(workspace.engine) as s:
        row = rq.latest_review(s, eid)
        assert row is not None and row.status == "budget" and row.cost_usd == pytest.approx(0.20005)


def test_a_dead_endpoint_fails_in_one_line_before_any_review(workspace: Workspace) -> None:
    """Nothing listening: exit 3 with the reason, no review stored — not each review retrying for
    minutes (the same check `bandpass run` makes of its policy endpoint)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    eid = make_episode(workspace)
    env = {**os.environ, "ANTHROPIC_API_KEY": "sk-ant-test-0123456789", "PYTHONPATH": str(REPO)}
    env["ANTHROPIC_BASE_URL"] = f"http://127.0.0.1:{port}"
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bandpass.tui.cli",
            "-w",
            str(workspace.root),
            "review",
            str(eid),
            "--model",
            HAIKU,
        ],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert proc.returncode == 3, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1 and "Connection refused" in proc.stderr
    assert "no review was started" in proc.stderr
    with session(workspace.engine) as s:
        assert rq.latest_review(s, eid) is None
