"""Calibration: the pass@k estimator, accounting of outcomes, band decisions and the export gates."""

from __future__ import annotations

import math

import pytest
from sqlmodel import Session

from bandpass.engine.calibration.calibrate import (
    GateParams,
    TaskEstimate,
    band_status,
    estimates,
    gates,
    near_duplicates,
    parse_band,
    pass_at_k,
)
from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk
from tests.support.calib_data import add_episodes, add_task, instruction_for, outcomes

M = "qwen-9b"


def add_episodes_in(s: Session, version_id: int, model: str, outs: list[str]) -> list[int]:
    """Episodes inside an open session, so tags can be added in the same transaction."""
    ids = []
    for o in outs:
        ep = q.create_episode(s, version_id, model)
        q.finish_episode(s, pk(ep), outcome=o, reward=0.0)
        ids.append(pk(ep))
    return ids


# --- the estimator ------------------------------------------------------------------------------------


def test_pass_at_k_hand_computed() -> None:
    assert pass_at_k(5, 2, 2) == pytest.approx(1 - math.comb(3, 2) / math.comb(5, 2))
    assert pass_at_k(5, 2, 2) == 0.7
    assert pass_at_k(10, 3, 1) == pytest.approx(0.3)  # pass@1 is the pass rate
    assert pass_at_k(20, 1, 2) == pytest.approx(1 - 171 / 190)


def test_pass_at_k_edges() -> None:
    assert pass_at_k(5, 4, 2) == 1.0  # n - c = 1 < k: every pair holds a pass
    assert pass_at_k(4, 4, 2) == 1.0  # all pass
    assert pass_at_k(4, 0, 2) == 0.0  # all fail
    assert pass_at_k(1, 1, 2) is None  # k > n: undefined, not silently pass@n
    assert pass_at_k(0, 0, 1) is None
    with pytest.raises(ValueError, match="k must be >= 1"):
        pass_at_k(5, 1, 0)
    with pytest.raises(ValueError, match="0 <= c <= n"):
        pass_at_k(3, 4, 1)


def test_pass_at_k_is_exact_at_band_edges() -> None:
    # 1 - C(19,2)/C(20,2) is exactly 1/10 in rational arithmetic; it must round to the float 0.1.
    assert pass_at_k(20, 1, 2) == 0.1
    assert pass_at_k(5, 3, 2) == 0.9


def test_parse_band() -> None:
    assert parse_band("0.1:0.9") == (0.1, 0.9)
    assert parse_band("0:1") == (0.0, 1.0)
    for bad in ("0.9:0.1", "0.1", "a:b", "-0.1:0.5", "0.2:1.5", "0.1:0.2:0.3", "nan:0.5"):
        with pytest.raises(ValueError) as exc:
            parse_band(bad)
        assert str(exc.value) == f"--band: expected LO:HI with 0 <= LO <= HI <= 1, got {bad}"


# --- accounting ---------------------------------------------------------------------------------------


def _est(ws: Workspace, name: str, model: str = M, ks: tuple[int, ...] = (1, 2)) -> TaskEstimate:
    (e,) = [e for e in estimates(ws, model, ks) if e.task == name]
    return e


def test_agent_errors_are_failures_infra_errors_are_not_samples(workspace: Workspace) -> None:
    vid, _ = add_task(workspace, "acct")
    add_episodes(
        workspace,
        vid,
        M,
        outcomes(2, 1, agent_error__turn_limit=2, infra_error__oom=3) + ["weird"],
        rewards=(1.0, 1.0, 0.0, 1.0),  # the verifier passed after a turn-limit: still a failure
    )
    add_episodes(workspace, vid, "other-model", outcomes(5))
    with session(workspace.engine) as s:  # unfinished episodes never count
        q.create_episode(s, vid, M)
    e = _est(workspace, "acct")
    assert (e.n, e.c, e.agent_errors, e.infra_errors, e.unclassified) == (5, 2, 2, 3, 1)
    assert e.episodes == 9
    assert e.pass_at[2] == pytest.approx(0.7)
    assert e.pass_at[1] == pytest.approx(0.4)
    assert e.infra_rate == pytest.approx(3 / 9)
    assert e.outcomes == {
        "agent_error:turn_limit": 2,
        "failed": 1,
        "infra_error:oom": 3,
        "passed": 2,
        "weird": 1,
    }
    # rewards of valid samples: 1, 1, 0, and 0 for both agent errors (whatever the verifier wrote)
    assert e.reward_std == pytest.approx(math.sqrt(0.24))
    lo, hi = e.rate_interval(
        0.9
    )  # the anytime-valid interval on c/n = 2/5 (engine/calibration/confidence.py)
    assert lo < 0.4 < hi and (e.samples, len(e.sample_ids)) == ([1, 1, 0, 0, 0], 5)


def test_infra_heavy_task_is_flagged_and_not_a_low_pass_at_k(workspace: Workspace) -> None:
    """146 of 151 episodes infra: n is 5, pass@2 is over those 5, never 2.65%."""
    vid, _ = add_task(workspace, "broken-env")
    add_episodes(workspace, vid, M, outcomes(2, 3, infra_error__container_died=146))
    e = _est(workspace, "broken-env")
    assert (e.n, e.c, e.infra_errors, e.episodes) == (5, 2, 146, 151)
    assert e.infra_heavy
    assert e.pass_at[2] == pytest.approx(0.7)
    assert pass_at_k(151, 2, 2) == pytest.approx(0.0265, abs=1e-4)  # what a careless count would say
    why = gates([e], GateParams())["broken-env"]
    assert any(g.startswith("infra_rate:") for g in why)


def test_estimates_use_latest_version_only(workspace: Workspace) -> None:
    old, _ = add_task(workspace, "edited")
    add_episodes(workspace, old, M, outcomes(4))
    new, new_hash = add_task(
        workspace, "edited", instruction="A rewritten instruction for the edited task.\n"
    )
    add_episodes(workspace, new, M, outcomes(0, 4))
    e = _est(workspace, "edited")
    assert (e.version_hash, e.n, e.c) == (new_hash, 4, 0)


# --- the band -----------------------------------------------------------------------------------------


def test_band_is_a_decision_not_a_point_estimate(workspace: Workspace) -> None:
    """A handful of samples decides nothing; enough evidence on one side of each edge does."""
    specs = {
        "never": outcomes(0, 150),  # interval on pass@2 entirely under 0.1
        "always": outcomes(30, 0),  # entirely over 0.9
        "mid": outcomes(30, 70),  # entirely inside [0.1, 0.9]
        "at-lo-edge": outcomes(5, 95),  # p near the rate whose pass@2 is 0.1: cannot tell
        "point-in": outcomes(1, 3),  # pass@2 = 0.5 over n=4: the old "in" by the luck of one episode
        "point-above": outcomes(4, 0),  # pass@2 = 1.0 over n=4: the old "above"
        "seven": outcomes(7, 0),
    }
    for name, outs in specs.items():
        vid, _ = add_task(workspace, name)
        add_episodes(workspace, vid, M, outs)
    ests = {e.task: e for e in estimates(workspace, M, (2,))}
    status = {name: band_status(e, 0.1, 0.9, 4) for name, e in ests.items()}
    assert status == {
        "never": "below",
        "always": "above",
        "mid": "in",
        "at-lo-edge": "undecided",
        "point-in": "undecided",
        "point-above": "undecided",
        "seven": "undecided",
    }
    d = ests["point-above"].decision(GateParams())
    assert (d.lo_side, d.hi_side) == ("above", None)  # 4 of 4 already rules out "below", not "above"
    assert d.pass_at_k[0] > 0.1 and d.pass_at_k[1] == 1.0
    # a lower confidence decides sooner: 7 of 7 is "above" at 50%, not at 90%
    assert band_status(ests["seven"], 0.1, 0.9, 4, confidence=0.5) == "above"


def test_too_few_samples_is_undecided(workspace: Workspace) -> None:
    vid, _ = add_task(workspace, "thin")
    add_episodes(workspace, vid, M, outcomes(30, 0, infra_error__oom=10))
    e = _est(workspace, "thin")
    assert e.n == 30
    assert band_status(e, 0.1, 0.9, 31) == "undecided"  # min_samples is a floor on top of the interval
    assert band_status(e, 0.1, 0.9, 4) == "above"
    vid, _ = add_task(workspace, "never-run")
    assert band_status(_est(workspace, "never-run"), 0.0, 1.0, 0) == "undecided"


def test_band_is_per_model(workspace: Workspace) -> None:
    vid, _ = add_task(workspace, "shared")
    add_episodes(workspace, vid, "small", outcomes(30, 70))
    add_episodes(workspace, vid, "large", outcomes(30, 0))
    assert band_status(_est(workspace, "shared", "small"), 0.1, 0.9, 4) == "in"
    assert band_status(_est(workspace, "shared", "large"), 0.1, 0.9, 4) == "above"


# --- gates --------------------------------------------------------------------------------------------


def test_gates(workspace: Workspace) -> None:
    good, _ = add_task(workspace, "good")
    tagged, _ = add_task(workspace, "tagged")
    cleared, _ = add_task(workspace, "cleared")
    harness, _ = add_task(workspace, "harness-tagged")
    unaudited, _ = add_task(workspace, "unaudited", audit=None)
    rejected, _ = add_task(workspace, "rejected", audit="rejected")
    warned, _ = add_task(workspace, "warned", audit="warning")
    reaudited, _ = add_task(workspace, "reaudited", audit="rejected")
    copy, _ = add_task(workspace, "copy", instruction="  " + instruction_for("good").upper())
    for vid in (good, tagged, cleared, harness, unaudited, rejected, warned, reaudited, copy):
        add_episodes(workspace, vid, M, outcomes(30, 70))  # decided in the band at 90%
    with session(workspace.engine) as s:
        q.record_audit(s, reaudited, verdict="accepted", reasons=[], details={})
        # a blocking tag on ANOTHER agent's episode still marks the task
        (ep,) = add_episodes_in(s, tagged, "oracle", ["failed"])
        q.add_tag(s, ep, "invalidity", "oracle_fails", blocking=True)
        (ep,) = add_episodes_in(s, cleared, M, ["failed"])
        t = q.add_tag(s, ep, "misalignment", "false_negative", blocking=True)
        t.cleared = True
        s.add(t)
        (ep,) = add_episodes_in(s, harness, M, ["failed"])
        q.add_tag(s, ep, "harness", "turn_limit", blocking=False)
    ests = estimates(workspace, M, (2,))
    failed = gates(ests, GateParams(lo=0.1, hi=0.9, k=2, min_samples=4))
    assert failed["good"] == []
    assert failed["tagged"] == ["blocking_tag:1"]
    assert failed["cleared"] == []
    assert failed["harness-tagged"] == []
    assert failed["unaudited"] == ["audit:none"]
    assert failed["rejected"] == ["audit:rejected"]
    assert failed["warned"] == ["audit:warning"]
    assert failed["reaudited"] == []  # the latest audit decides
    assert failed["copy"] == ["duplicate:good"]  # the later import is the duplicate
    relaxed = gates(ests, GateParams(allow_warning=True))
    assert relaxed["warned"] == []
    thin, _ = add_task(
        workspace, "thin-but-in", instruction="A different instruction entirely, for a thin task."
    )
    add_episodes(workspace, thin, M, outcomes(2, 3))  # pass@2 = 0.7: in by the point estimate, not decided
    ests = estimates(workspace, M, (2,))
    assert gates(ests, GateParams())["thin-but-in"] == ["band:undecided"]


def test_near_duplicates() -> None:
    base = "Write a bash script that counts the lines of every log file under /var/log and prints a total."
    items = [
        ("a", base),
        ("b", "Compile the C project in /src with make and fix the linker error about libm."),
        ("c", base.replace("prints a total", "prints a total.")),  # punctuation only
        ("d", base + " Also sort the output."),  # mostly the same
        ("e", ""),
    ]
    dups = near_duplicates(items, threshold=0.8)
    assert dups["c"][0] == "a" and dups["c"][1] == 1.0
    assert dups["d"][0] in ("a", "c") and dups["d"][1] >= 0.8
    assert "a" not in dups and "b" not in dups and "e" not in dups
    assert near_duplicates(items, threshold=1.01) == {}


def test_reward_std_is_exactly_pstdev() -> None:
    """The band reads reward std through a memoised path for 0/1 rewards: the exported figure must be
    the very same float statistics.pstdev gives, whatever the order of the rewards."""
    import random
    import statistics

    from bandpass.engine.calibration.calibrate import reward_std

    r = random.Random(5)
    for _ in range(300):
        n = r.randint(1, 60)
        rewards = [float(r.random() < r.random()) for _ in range(n)]
        assert reward_std(rewards) == statistics.pstdev(rewards)
        mixed = rewards + [r.choice([0.5, 0.25, 0.3])]
        assert reward_std(mixed) == statistics.pstdev(mixed)
    assert reward_std([]) is None
