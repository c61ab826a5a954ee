"""Two episodes side by side: their steps aligned by index and the first step where they part ways.

Why: "the same task passed once and failed three times" is answered fastest by the first step where the
failing run did something else (or was shown something else) than the passing one. Alignment is by step
index — the policy loop numbers steps the same way in every episode — and a step *diverges* when its
keystrokes differ, or the screen the policy was shown differs (same action, different world).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from engine.review.text import strip_controls


@dataclass
class AlignedStep:
    index: int
    left: dict[str, Any] | None  # a step of episode_record()["steps"], or None past its end
    right: dict[str, Any] | None
    differs: bool
    why: str = ""  # keystrokes | observation | missing


def _keys(step: dict[str, Any] | None) -> str:
    if step is None:
        return ""
    return "".join(step.get("keystrokes") or []) or (
        f"parse error: {step['parse_error']}" if step.get("parse_error") else ""
    )


def align(
    left: list[dict[str, Any]],
    right: list[dict[str, Any]],
    observations: tuple[dict[int, str], dict[int, str]] | None = None,
) -> tuple[list[AlignedStep], int | None]:
    """Aligned rows and the index (into the rows) of the first divergence, None when none."""
    by_l = {s["index"]: s for s in left}
    by_r = {s["index"]: s for s in right}
    rows: list[AlignedStep] = []
    first: int | None = None
    obs_l, obs_r = observations or ({}, {})
    for idx in sorted(set(by_l) | set(by_r)):
        a, b = by_l.get(idx), by_r.get(idx)
        why = ""
        if a is None or b is None:
            why = "missing"
        elif _keys(a) != _keys(b):
            why = "keystrokes"
        elif strip_controls(obs_l.get(idx, "")).strip() != strip_controls(obs_r.get(idx, "")).strip():
            why = "observation"
        rows.append(AlignedStep(idx, a, b, bool(why), why))
        if why and first is None:
            first = len(rows) - 1
    return rows, first


def keys_text(step: dict[str, Any] | None) -> str:
    """A step's action as one line for a table cell."""
    if step is None:
        return "—"
    return _keys(step).replace("\n", "⏎ ").replace("\t", "⇥") or "(no keystrokes)"
