"""An audit's cost in oracle-episode equivalents (engine/audit/phases.py ``cost``): the unit is one attempt
at the task, an oracle episode that verified once, whatever the audit's ``--reruns``."""

from __future__ import annotations

from typing import Any

from bandpass.engine.audit.phases import cost


def _ep(agent: str, seconds: float, *, outcome: str = "passed", reruns: int = 0) -> dict[str, Any]:
    return {"agent": agent, "outcome": outcome, "seconds": seconds, "verifier_reruns": reruns}


def test_the_unit_is_an_oracle_episode_that_verified_once() -> None:
    # --reruns 1: the footprint's oracle (1 s) and the audit's one oracle, which reran its verifier 4 times
    episodes = [_ep("oracle", 1.0), _ep("oracle", 3.0, reruns=4), _ep("nop", 0.8), _ep("cheat:peek", 0.9)]
    out = cost(episodes)
    assert out["oracle_episode_seconds"] == 1.0  # not the median of 1 and 3 s
    assert out["oracle_equivalents"] == 5.7
    assert out["episodes"] == 4


def test_failed_oracles_are_not_the_unit_and_reruns_count_when_nothing_else_passed() -> None:
    assert (
        cost([_ep("oracle", 0.5, outcome="failed"), _ep("oracle", 2.0, reruns=4)])["oracle_episode_seconds"]
        == 2.0
    )
    assert cost([_ep("oracle", 0.5, outcome="failed"), _ep("nop", 1.0)])["oracle_equivalents"] is None
