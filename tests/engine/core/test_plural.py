"""Counts and lists in messages read as sentences: "1 check", "2 checks", "episodes 3, 4"."""

from __future__ import annotations

from bandpass.engine.core.plural import counted, listed


def test_counted_is_singular_only_for_one() -> None:
    assert counted(1, "check") == "1 check"
    assert counted(0, "check") == "0 checks"
    assert counted(2, "check") == "2 checks"
    assert counted(3, "process", "processes") == "3 processes"
    assert counted(1, "process", "processes") == "1 process"


def test_listed_agrees_with_the_number_of_items() -> None:
    assert listed("episode", [3]) == "episode 3"
    assert listed("episode", [3, 4]) == "episodes 3, 4"
    assert listed("batch", ["b1", "b2"], "batches") == "batches b1, b2"
    assert listed("batch", ["b1"], "batches") == "batch b1"
