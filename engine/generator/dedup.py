"""Near-duplicate instructions against the workspace's tasks (taxonomy: ``invalidity.duplicate_task``).

Uses the calibration engineer's measure (word 3-shingle Jaccard, ``engine.calibration.calibrate``) and
threshold, so
a generated task that would pass here is not later dropped by the export's duplicate gate, and vice versa.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..calibration.calibrate import DUPLICATE_THRESHOLD, shingles

DUPLICATE_CODE = "invalidity.duplicate_task"


def most_similar(
    instruction: str, existing: Sequence[tuple[str, str]], threshold: float = DUPLICATE_THRESHOLD
) -> tuple[str, float] | None:
    """The existing ``(name, instruction)`` most similar to ``instruction`` at or above ``threshold``."""
    mine = shingles(instruction)
    if not mine:
        return None
    best: tuple[str, float] | None = None
    for name, text in existing:
        theirs = shingles(text)
        union = len(mine | theirs)
        sim = len(mine & theirs) / union if union else 0.0
        if sim >= threshold and (best is None or sim > best[1]):
            best = (name, sim)
    return best
