"""One truth per number: what the CLI, the TUI and the exports say about the same episodes agrees.

A tampered episode (its verifier still ran and paid out a forged 1) and an infra error are never a
success anywhere: every list and export shows the reward the episode counts for, and says why it is not
the verifier's. Accepting a review, or tagging, twice changes nothing. A failure cluster has the same
size in ``bandpass clusters`` and the tag queue's cluster view, whatever its members' tagging state. A
``true_fail`` review with no code maps to the taxonomy's valid failure and can be accepted.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.core.outcomes import counted_reward, reward_label
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.evidence import episode_record, why_lines
from bandpass.engine.review.reviewer import accept_review, review_episodes
from bandpass.engine.review.tagging import Tagger, load_queue
from bandpass.store import queries as q
from bandpass.store.db import session
from tests.support.paths import REPO
from tests.support.replay_data import make_episode
from tests.support.servers.anthropic_server import Reply, running_server, text, tool
from tests.support.waiting import wait_for, wait_for_screen

HAIKU = "claude-haiku-4-5"


def bp(root: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(root), *args],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO), "BANDPASS_AUTHOR": "cli-user"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def _forged(ws: Workspace) -> tuple[int, int, int]:
    """A tampered episode stored with the forged reward 1 its verifier still gave, an infra error and a
    plain pass, on one task."""
    tamper = make_episode(ws, task="alpha", outcome="failed", with_casts=False)
    infra = make_episode(ws, task="alpha", outcome="failed", with_casts=False)
    good = make_episode(ws, task="alpha", outcome="failed", with_casts=False)
    with session(ws.engine) as s:
        q.finish_episode(s, tamper, outcome="agent_error:verifier_tamper", reward=1.0)
        q.finish_episode(s, infra, outcome="infra_error:container_died", reward=None)
        q.finish_episode(s, good, outcome="passed", reward=1.0)
    return tamper, infra, good


def test_counted_reward_and_its_label() -> None:
    assert counted_reward("agent_error:verifier_tamper", 1.0) == 0.0
    assert counted_reward("infra_error:oom", None) is None and counted_reward("", 1.0) is None
    assert counted_reward("passed", 1.0) == 1.0 and counted_reward("failed", 0.25) == 0.25
    assert reward_label("agent_error:verifier_tamper", 1.0) == "0 (verifier gave 1: void)"
    assert reward_label("agent_error:turn_limit", None) == "0"
    assert reward_label("infra_error:container_died", None) == "none (infra)"
    assert reward_label("passed", 1.0) == "1" and reward_label("", None) == "—"


def test_a_forged_reward_is_never_a_success_in_lists_show_and_traces(workspace: Workspace) -> None:
    from bandpass.engine.calibration.export import ExportParams, export

    tamper, infra, good = _forged(workspace)
    root = workspace.root
    rows = {r["episode_id"]: r for r in json.loads(bp(root, "episodes", "--json").stdout)}
    assert (rows[tamper]["reward"], rows[tamper]["verifier_reward"]) == (0.0, 1.0)
    assert (rows[infra]["reward"], rows[good]["reward"]) == (None, 1.0)
    table = bp(root, "episodes").stdout
    line = next(ln for ln in table.splitlines() if "verifier_tamper" in ln)
    assert "0 (verifier gave 1: void)" in line
    assert "none (infra)" in next(ln for ln in table.splitlines() if "container_died" in ln)

    rec = episode_record(workspace, tamper)
    assert (rec["reward"], rec["verifier_reward"]) == (0.0, 1.0)
    assert "reward 0 (verifier gave 1: void)" in why_lines(rec)[0]
    assert "reward 0 (verifier gave 1: void)" in bp(root, "show", str(tamper)).stdout
    shown = json.loads(bp(root, "show", str(tamper), "--json").stdout)
    assert (shown["reward"], shown["verifier_reward"]) == (0.0, 1.0)

    queue = {i["episode_id"]: i for i in json.loads(bp(root, "queue", "--json").stdout)}
    assert (queue[tamper]["reward"], queue[tamper]["verifier_reward"]) == (0.0, 1.0)
    assert queue[infra]["reward"] is None

    export(workspace, ExportParams(model="m1", formats=("traces",)), workspace.root / "out")
    traces = {
        r["episode_id"]: r
        for r in map(json.loads, (workspace.root / "out/traces/traces.jsonl").read_text().splitlines())
    }
    assert (traces[tamper]["reward"], traces[tamper]["verifier_reward"]) == (0.0, 1.0)
    assert traces[infra]["reward"] is None and traces[infra]["infra_ok"] is False
    assert traces[good]["reward"] == 1.0
    export(workspace, ExportParams(model="m1", formats=("traces",), trace_filter="success"), root / "ok")
    ok = [json.loads(x)["episode_id"] for x in (root / "ok/traces/traces.jsonl").read_text().splitlines()]
    assert ok == [good]  # a trainer filtering on success never gets the forgery


async def test_the_episodes_screen_shows_the_counted_reward(workspace: Workspace) -> None:
    from bandpass.engine.core.events import EventBus
    from bandpass.tui.app import BandpassApp
    from bandpass.tui.screens.episodes import EpisodesScreen

    tamper, infra, _ = _forged(workspace)
    app = BandpassApp(workspace, bus=EventBus())
    async with app.run_test(size=(160, 48)) as pilot:
        await pilot.press("8")
        screen = await wait_for_screen(pilot, EpisodesScreen, what="episodes")
        await wait_for(pilot, lambda: len(screen.shown) == 3, what="three episodes")
        cells = {r[1]: r for r in screen.table_rows()}
        assert "0 (verifier gave 1: void)" in cells[str(tamper)]
        assert "none (infra)" in cells[str(infra)]


@pytest.mark.slow
def test_tagging_and_accepting_twice_change_nothing(workspace: Workspace) -> None:
    eid = make_episode(workspace, task="t", outcome="agent_error:turn_limit", with_casts=False)
    root = workspace.root
    first = bp(root, "tag", str(eid), "harness.turn_limit")
    again = bp(root, "tag", str(eid), "harness.turn_limit")
    assert first.returncode == again.returncode == 0
    assert "already carries harness.turn_limit" in again.stdout and "nothing added" in again.stdout
    assert len(json.loads(bp(root, "tags", "--json").stdout)) == 1
    tagger = Tagger(workspace)
    (tag,) = tagger.tag([eid], "harness.turn_limit")
    assert tagger.last_added == 0 and not tagger.can_undo  # nothing to undo: nothing was done


@pytest.mark.slow
def test_review_accept_twice_adds_one_tag(workspace: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    eid = make_episode(workspace, task="t", outcome="agent_error:turn_limit")
    _review(workspace, monkeypatch, eid, "true_fail", "harness.turn_limit")
    root = workspace.root
    one = bp(root, "review-accept", str(eid))
    two = bp(root, "review-accept", str(eid))
    assert one.returncode == two.returncode == 0, two.stderr
    assert "harness.turn_limit on episode" in one.stdout
    assert "already carries harness.turn_limit" in two.stdout
    with session(workspace.engine) as s:
        assert len(q.tags_for_episode(s, eid)) == 1
    counts = [i["state"] for i in json.loads(bp(root, "queue", "--json", "--state", "tagged").stdout)]
    assert counts == ["tagged"]


def _review(ws: Workspace, monkeypatch: pytest.MonkeyPatch, eid: int, verdict: str, code: str) -> int:
    """One validated review over the real Messages API against the scripted server."""
    with running_server() as srv:
        monkeypatch.setenv("ANTHROPIC_API_KEY", srv.api_key)
        args: dict[str, Any] = {
            "verdict": verdict,
            "code": code,
            "citations": [{"source": "step", "step": 1, "quote": "observation given at step 1"}],
            "explanation": "The policy echoed and never wrote the answer.",
        }
        srv.script(HAIKU, [Reply([text("Reading."), tool("submit_review", **args)])])
        res = review_episodes(ws, [eid], model=HAIKU, base_url=srv.base_url, concurrency=1)
    (out,) = res.results
    assert out.status == "ok", out
    return int(out.review_id)  # type: ignore[arg-type]


def test_a_true_fail_without_code_is_the_valid_failure(
    workspace: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Claude says the policy simply failed (``true_fail``, code ``none``): the review suggests the
    taxonomy's valid failure, and ``y`` has something to accept — a queue of genuine failures empties."""
    eid = make_episode(workspace, task="t")
    rid = _review(workspace, monkeypatch, eid, "true_fail", "none")
    tag = accept_review(workspace, rid)
    assert f"{tag.tag_class}.{tag.subclass}" == "policy.failed_checks" and not tag.blocking
    (item,) = load_queue(workspace)
    assert item.state == "tagged" and item.tags == ["policy.failed_checks"]


def test_cluster_sizes_agree_between_cli_and_tag_queue(workspace: Workspace) -> None:
    """Five episodes that failed the same way, two of them already tagged: ``bandpass clusters`` and the
    tag queue's cluster view both say 5, and a cluster whose members are all tagged stays listed."""
    from bandpass.tui.screens.tag_queue import read_queue

    same = [make_episode(workspace, task="kv", test="test_ini", with_casts=False) for _ in range(5)]
    done = [make_episode(workspace, task="other", test="test_x", with_casts=False) for _ in range(2)]
    tagger = Tagger(workspace)
    tagger.tag(same[:2], "policy.failed_checks")
    tagger.tag(done, "policy.failed_checks")
    cli = {c["id"]: c["size"] for c in json.loads(bp(workspace.root, "clusters", "--json").stdout)}
    from bandpass.engine.review.tagging import QueueFilter

    load = read_queue(workspace, QueueFilter(), "pending", None)
    tui = {c.id: len(c.items) for c in load.clusters}
    assert tui == cli and sorted(cli.values()) == [2, 5]
    first, last = load.clusters
    assert (len(first.items), len(first.pending), len(first.tagged)) == (5, 3, 2)
    assert (len(last.items), len(last.pending)) == (2, 0)  # all tagged: listed last, not hidden
