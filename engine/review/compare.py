"""Two episodes side by side: their steps aligned by content and the first step where they part ways.

Why: "the same task passed once and failed three times" is answered fastest by the first step where the
failing run did something else (or was shown something else) than the passing one. Steps are aligned by
what they did, not by their number: one episode's extra step (a retried ``ls``, a detour) would otherwise
shift every later step and make the whole rest of the table "differ". The alignment is a longest matching
subsequence (``difflib.SequenceMatcher``) over the normalised actions — keystrokes with control characters
removed and whitespace runs collapsed, so ``ls  -la\\n`` and ``ls -la\\n`` are the same action.

A row *diverges* when its keystrokes differ (a replaced step), when only one episode has the step (an
inserted step: the other side is empty), or when both typed the same but were shown different screens
(same action, different world).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from difflib import SequenceMatcher
from typing import Any

from .text import strip_controls

KEYSTROKES, OBSERVATION, ONLY_LEFT, ONLY_RIGHT = "keystrokes", "observation", "only_left", "only_right"


@dataclass
class AlignedStep:
    left: dict[str, Any] | None  # a step of episode_record()["steps"], or None: no counterpart
    right: dict[str, Any] | None
    differs: bool
    why: str = ""  # keystrokes | observation | only_left | only_right

    @property
    def left_index(self) -> int | None:
        return None if self.left is None else int(self.left["index"])

    @property
    def right_index(self) -> int | None:
        return None if self.right is None else int(self.right["index"])

    @property
    def index(self) -> int:
        """The step number to name the row by (the left's, else the right's)."""
        i = self.left_index
        return i if i is not None else int(self.right_index or 0)

    def steps_label(self) -> str:
        """``3`` when both sides are step 3, ``3 / 4`` when they are aligned at different numbers."""
        a, b = self.left_index, self.right_index
        if a == b:
            return str(a)
        return f"{'—' if a is None else a} / {'—' if b is None else b}"

    def describe(self, left_name: str = "left", right_name: str = "right") -> str:
        if self.why == ONLY_LEFT:
            return f"step {self.left_index} of {left_name} has no counterpart in {right_name}"
        if self.why == ONLY_RIGHT:
            return f"step {self.right_index} of {right_name} has no counterpart in {left_name}"
        return f"step {self.steps_label()}: {self.why} differ"


def _keys(step: dict[str, Any] | None) -> str:
    if step is None:
        return ""
    return "".join(step.get("keystrokes") or []) or (
        f"parse error: {step['parse_error']}" if step.get("parse_error") else ""
    )


_SPACE = re.compile(r"\s+")


def normalise_action(step: dict[str, Any]) -> str:
    """The action as compared: control characters out, whitespace runs collapsed, ends trimmed."""
    return _SPACE.sub(" ", strip_controls(_keys(step))).strip()


def _screen(obs: dict[int, str], step: dict[str, Any]) -> str:
    return strip_controls(obs.get(int(step["index"]), "")).strip()


def align(
    left: list[dict[str, Any]],
    right: list[dict[str, Any]],
    observations: tuple[dict[int, str], dict[int, str]] | None = None,
) -> tuple[list[AlignedStep], int | None]:
    """Aligned rows and the index (into the rows) of the first divergence, None when none."""
    left = sorted(left, key=lambda s: s["index"])
    right = sorted(right, key=lambda s: s["index"])
    obs_l, obs_r = observations or ({}, {})
    a = [normalise_action(s) for s in left]
    b = [normalise_action(s) for s in right]
    rows: list[AlignedStep] = []
    for op, i1, i2, j1, j2 in SequenceMatcher(None, a, b, autojunk=False).get_opcodes():
        if op == "equal":
            for x, y in zip(left[i1:i2], right[j1:j2], strict=True):
                same_screen = _screen(obs_l, x) == _screen(obs_r, y)
                rows.append(AlignedStep(x, y, not same_screen, "" if same_screen else OBSERVATION))
            continue
        # replace: pair what can be paired (a different action at the same place), the rest is one-sided
        ls, rs = left[i1:i2], right[j1:j2]
        paired = min(len(ls), len(rs)) if op == "replace" else 0
        for k in range(paired):
            rows.append(AlignedStep(ls[k], rs[k], True, KEYSTROKES))
        rows += [AlignedStep(x, None, True, ONLY_LEFT) for x in ls[paired:]]
        rows += [AlignedStep(None, y, True, ONLY_RIGHT) for y in rs[paired:]]
    first = next((n for n, r in enumerate(rows) if r.differs), None)
    return rows, first


def keys_text(step: dict[str, Any] | None) -> str:
    """A step's action as one line for a table cell."""
    if step is None:
        return "—"
    return _keys(step).replace("\n", "⏎ ").replace("\t", "⇥") or "(no keystrokes)"
