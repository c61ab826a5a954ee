"""Adaptive sampling: the round planner (pure), and the sampler on a real workspace's batch and ledger.

The planner is exercised directly; the sampler is exercised against the store with episodes finished
through ``store.queries`` as a runner would finish them (the Docker path, runner and resume included, is
``tests/engine/calibration/test_adaptive_docker.py``).
"""

from __future__ import annotations

import json
from collections import Counter

import pytest

from bandpass.engine.calibration import ledger
from bandpass.engine.calibration.adaptive import (
    ALL_DECIDED,
    BUDGET_SPENT,
    FUTILE,
    MAX_K,
    AdaptiveError,
    AdaptiveSampler,
    AdaptiveSettings,
    TaskState,
    horizons,
    plan_adaptive_batch,
    plan_round,
    score,
)
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.rollouts import extend_batch, latest_unfinished_batch, plan_batch
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.calib_data import add_episodes, add_task, outcomes

DEFAULT = AdaptiveSettings()  # pass@2 in [0.1, 0.9] at 90%, first 1, step 1, max-k 32, 8 tasks a round


def test_first_round_tops_thin_tasks_up_within_the_budget() -> None:
    tasks = [TaskState(1, 0, 0), TaskState(2, 1, 1), TaskState(3, 30, 30), TaskState(4, 0, 0)]
    plan = plan_round(tasks, DEFAULT)
    assert plan.first_round and plan.attempts == {1: 1, 4: 1}  # 2 has its one; 3 is decided (above)
    assert (plan.decided, plan.undecided) == (1, 3)
    two = AdaptiveSettings(first=2)  # `--k 2`
    assert plan_round(tasks, two).attempts == {1: 2, 2: 1, 4: 2}
    tight = plan_round(tasks, AdaptiveSettings(first=2, budget=3))
    assert tight.attempts == {1: 2, 2: 1}  # in scope order until the budget is spent


def test_later_rounds_go_to_the_tasks_closest_to_a_decision() -> None:
    tasks = [
        TaskState(1, 10, 0, attempts=10),  # never solved: "below hi" already, "below lo" ~40 episodes away
        TaskState(2, 7, 7, attempts=7),  # always solved: one more pass clears the top edge
        TaskState(3, 7, 2, attempts=7),  # two of seven: the next episode settles an edge either way
        TaskState(4, 10, 1, attempts=10),  # near the lower edge: slow to settle
        TaskState(5, 150, 0, attempts=10),  # decided below: never sampled again
    ]
    s = AdaptiveSettings(round_tasks=2)
    plan = plan_round(tasks, s)
    assert not plan.first_round and plan.attempts == {2: 1, 3: 1}
    values = {
        t.key: score(t.c, t.n, s.max_k - t.attempts, s.step, s.lo, s.hi, s.k, s.confidence, 1) for t in tasks
    }
    assert values[3] >= values[2] > values[4] > values[1] > 0 == values[5]
    assert list(plan_round(tasks, AdaptiveSettings(round_tasks=8)).attempts) == [3, 2, 4, 1]  # best first
    assert plan_round(tasks, AdaptiveSettings(round_tasks=2, step=2)).attempts == {2: 2, 3: 2}  # `step`


def test_in_flight_tasks_wait_and_the_sampler_says_why_it_stops() -> None:
    flying = [TaskState(1, 7, 7, attempts=7, in_flight=2)]
    plan = plan_round(flying, DEFAULT)
    assert plan.waiting and not plan.attempts
    assert plan_round([TaskState(1, 150, 0)], DEFAULT).stopped == ALL_DECIDED
    assert plan_round([TaskState(1, 7, 7, attempts=7)], AdaptiveSettings(budget=7)).stopped == BUDGET_SPENT
    assert plan_round([TaskState(1, 10, 5, attempts=32)], DEFAULT).stopped == MAX_K
    # two episodes left cannot take a never-solved task below 0.1 on pass@2: no use spending them
    assert plan_round([TaskState(1, 10, 0, attempts=30)], DEFAULT).stopped == FUTILE
    last = plan_round([TaskState(1, 7, 7, attempts=7)], AdaptiveSettings(step=2, budget=8))
    assert last.attempts == {1: 1}  # the round shrinks to what the budget leaves
    capped = plan_round([TaskState(1, 7, 7, attempts=31)], AdaptiveSettings(step=2))
    assert capped.attempts == {1: 1}  # and to what --max-k leaves


def test_horizons_and_settings_errors() -> None:
    assert horizons(2, 30) == [2, 4, 8, 16, 30]
    assert horizons(2, 2) == [2] and horizons(2, 0) == []
    with pytest.raises(AdaptiveError, match="--confidence"):
        AdaptiveSettings(confidence=1.0)
    with pytest.raises(AdaptiveError, match="--max-k"):
        AdaptiveSettings(max_k=0)
    with pytest.raises(AdaptiveError, match="cannot exceed --max-k"):
        AdaptiveSettings(first=8, max_k=4)
    with pytest.raises(AdaptiveError, match="--budget"):
        AdaptiveSettings(budget=0)
    with pytest.raises(AdaptiveError, match="--band"):
        AdaptiveSettings(lo=0.9, hi=0.1)
    s = AdaptiveSettings(budget=40, max_k=12)
    assert AdaptiveSettings.from_dict(json.loads(json.dumps(s.as_dict()))) == s


# --- the sampler on a real workspace ------------------------------------------------------------------

#: A narrow band on pass@1 at a low confidence, so that a task solved every time (or never) is decided
#: within 4 episodes while one solved every other time stays undecided for 10: what the Docker test runs.
NARROW = AdaptiveSettings(
    lo=0.4, hi=0.6, k=1, confidence=0.5, first=2, step=2, max_k=14, round_tasks=8, min_samples=1
)


def _finish_queued(ws: Workspace, batch_id: str, behaviour: dict[int, str], counters: Counter[int]) -> int:
    """Finishes the batch's queued episodes as a runner would: claim, then an outcome per task."""
    done = 0
    while True:
        with session(ws.engine) as s:
            ep = queries.claim_next_episode(s, batch_id)
            if ep is None:
                return done
            vid = ep.task_version_id
            kind = behaviour[vid]
            passed = kind == "always" or (kind == "half" and counters[vid] % 2 == 0)
            counters[vid] += 1
            queries.finish_episode(s, ep.id, outcome="passed" if passed else "failed", reward=float(passed))  # type: ignore[arg-type]
            done += 1


def test_sampler_stops_decided_tasks_keeps_the_undecided_and_resumes_from_the_row(
    workspace: Workspace,
) -> None:
    ws = workspace
    vids = {name: add_task(ws, name)[0] for name in ("always", "never", "half")}
    behaviour = {vids[n]: n for n in vids}
    sampler = plan_adaptive_batch(ws, "oracle", list(vids.values()), NARROW, kind="builtin")
    bid = sampler.batch_id
    assert latest_unfinished_batch(ws) == bid  # no episode yet, but rounds to come: unfinished
    counters: Counter[int] = Counter()
    rounds: list[dict[int, int]] = []
    while True:
        # A fresh sampler from the row each round: what `bandpass run --resume` rebuilds after a crash.
        sampler = AdaptiveSampler.from_batch(ws, bid)
        before = {v: a.attempts for v, a in _attempts(ws, bid).items()}
        if sampler() == 0:
            break
        after = {v: a.attempts for v, a in _attempts(ws, bid).items()}
        rounds.append({v: after[v] - before.get(v, 0) for v in after if after[v] != before.get(v, 0)})
        _finish_queued(ws, bid, behaviour, counters)
    a, n, h = vids["always"], vids["never"], vids["half"]
    # first round: everyone; second: the two that are about to be decided, and the undecided one; then
    # the decided two get nothing more while the undecided one keeps its rounds until no outcome within
    # --max-k could decide it
    assert rounds == [{a: 2, n: 2, h: 2}, {a: 2, n: 2, h: 2}, {h: 2}, {h: 2}, {h: 2}]
    state = AdaptiveSampler.from_batch(ws, bid)
    assert state.status.stopped == FUTILE and state.status.rounds == len(rounds)
    assert latest_unfinished_batch(ws) is None  # stopped on its own: nothing to resume
    # attempts are numbered on from each task's last one, never reused
    with session(ws.engine) as s:
        eps = queries.episodes(s, batch_id=bid)
    assert Counter((e.task_version_id, e.attempt) for e in eps).most_common(1)[0][1] == 1
    # every round's decisions are in the ledger, one row per new piece of evidence
    hist = ledger.task_history(ws, "always")
    assert [h.decision for h in hist][-1] == "above" and all(h.source == f"adaptive:{bid}" for h in hist)
    assert [h.n for h in hist] == sorted({h.n for h in hist})
    assert ledger.task_history(ws, "half")[-1].decision == "undecided"
    assert ledger.task_history(ws, "never")[-1].decision == "below"


def _attempts(ws: Workspace, bid: str) -> dict[int, queries.BatchAttempts]:
    with session(ws.engine) as s:
        return queries.batch_attempts(s, bid)


def test_sampler_counts_earlier_evidence_and_respects_the_budget(workspace: Workspace) -> None:
    ws = workspace
    known, _ = add_task(ws, "known")
    add_episodes(ws, known, "oracle", outcomes(12, 0))  # decided above [0.4, 0.6] before the batch
    fresh, _ = add_task(ws, "fresh")
    sampler = plan_adaptive_batch(
        ws, "oracle", [known, fresh], AdaptiveSettings(**{**NARROW.as_dict(), "budget": 3}), kind="builtin"
    )
    assert sampler() == 2  # the first round: only the task without evidence
    assert _attempts(ws, sampler.batch_id).keys() == {fresh}
    _finish_queued(ws, sampler.batch_id, {fresh: "half"}, Counter())
    assert sampler() == 1  # one episode of budget left
    _finish_queued(ws, sampler.batch_id, {fresh: "half"}, Counter({fresh: 2}))
    assert sampler() == 0 and sampler.status.stopped == BUDGET_SPENT
    assert sampler.refresh().spent == 3


def test_extend_batch_numbers_attempts_after_the_last(workspace: Workspace) -> None:
    vid, _ = add_task(workspace, "t")
    bid = plan_batch(workspace, "oracle", [vid], 2, kind="builtin")
    assert extend_batch(workspace, bid, {vid: 3}) == 3
    with session(workspace.engine) as s:
        assert sorted(e.attempt for e in queries.episodes(s, batch_id=bid)) == [0, 1, 2, 3, 4]


def test_cli_shows_the_ledger_and_the_adaptive_batch(workspace: Workspace) -> None:
    from typer.testing import CliRunner

    import bandpass.tui.commands.report  # registers `report`
    import bandpass.tui.commands.rollouts  # noqa: F401 - registers `batches`
    from bandpass.tui.cli import app

    ws = workspace
    vid, _ = add_task(ws, "always")
    sampler = plan_adaptive_batch(ws, "oracle", [vid], NARROW, kind="builtin")
    counters: Counter[int] = Counter()
    while sampler():
        _finish_queued(ws, sampler.batch_id, {vid: "always"}, counters)
    runner = CliRunner()
    r = runner.invoke(app, ["--workspace", str(ws.root), "report", "ledger", "--task", "always", "--json"])
    assert r.exit_code == 0, r.output
    rows = [json.loads(line) for line in r.stdout.splitlines()]
    assert [(x["n"], x["decision"]) for x in rows] == [(2, "undecided"), (4, "above")]
    assert rows[-1]["source"] == f"adaptive:{sampler.batch_id}" and len(rows[-1]["episodes"]) == 4
    text = runner.invoke(app, ["--workspace", str(ws.root), "report", "ledger", "--model", "oracle"]).stdout
    assert "above" in text and "pass@1 in [" in text
    b = runner.invoke(app, ["--workspace", str(ws.root), "batches"])
    assert f"adaptive, 2 rounds, stopped: {ALL_DECIDED}" in b.stdout
    typo = runner.invoke(app, ["--workspace", str(ws.root), "report", "ledger", "--task", "nope"])
    # a task name that does not exist is an error naming the ones that do, never "no decision yet"
    assert typo.exit_code == 1 and "nope" in typo.output and "always" in typo.output
    assert "no band decision recorded yet" not in typo.output


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["run", "--agent", "oracle", "--budget", "10"], "--budget goes with --adaptive"),
        (["run", "--agent", "oracle", "--max-k", "10"], "--max-k goes with --adaptive"),
        (["run", "--agent", "oracle", "--band", "0.1:0.9"], "--band goes with --adaptive"),
        (["run", "--resume", "--adaptive"], "--resume takes no --k/--adaptive"),
        # these three are checked after the Docker engine answers (the pre-flight comes first)
        pytest.param(
            ["run", "--agent", "oracle", "--adaptive", "--confidence", "1.5"],
            "--confidence: expected a number",
            marks=pytest.mark.docker,
        ),
        pytest.param(
            ["run", "--agent", "oracle", "--adaptive", "--band", "0.9:0.1"],
            "--band: expected LO:HI",
            marks=pytest.mark.docker,
        ),
        pytest.param(
            ["run", "--agent", "oracle", "--adaptive", "--k", "40"],
            "cannot exceed --max-k",
            marks=pytest.mark.docker,
        ),
    ],
)
def test_adaptive_usage_errors_are_one_line(workspace: Workspace, args: list[str], message: str) -> None:
    from typer.testing import CliRunner

    import bandpass.tui.commands.rollouts  # noqa: F401 - registers `run`
    from bandpass.tui.cli import app

    add_task(workspace, "t")
    r = CliRunner().invoke(app, ["--workspace", str(workspace.root), *args])
    assert r.exit_code == 1 and message in r.stderr, r.output
    with session(workspace.engine) as s:
        assert queries.batches(s) == []  # nothing was queued
