"""Seed axes: what each generation is asked to be about, sampled so the pool is not bimodal.

Left alone, a generator collapses onto a few favourite shapes of task. Each axis (domain, skill,
complexity, verifier kind, difficulty) is a list in a data file and every generation draws one value from
each list *independently and uniformly*, so over a batch every combination is reachable and no axis
value's frequency depends on another's. A ``random.Random`` seeded per batch makes a batch reproducible.
"""

from __future__ import annotations

import random
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import BandpassError
from .prompts import PROMPTS_DIR

AXES_FILE = PROMPTS_DIR / "axes.toml"
AXES = ("domain", "skill", "complexity", "verifier_kind")
DIFFICULTIES = ("easy", "medium", "hard")


class AxesError(BandpassError, ValueError):
    pass


@dataclass(frozen=True)
class SeedAxes:
    domain: str
    skill: str
    complexity: str
    verifier_kind: str

    def as_dict(self) -> dict[str, str]:
        return dict(self.__dict__)


def load_axes(path: Path = AXES_FILE) -> dict[str, list[str]]:
    """Every axis list, validated: each must be a non-empty list of distinct non-empty strings."""
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise AxesError(f"{path}: {exc}") from exc
    problems = []
    out: dict[str, list[str]] = {}
    for axis in (*AXES, "difficulty"):
        values = data.get(axis)
        if not isinstance(values, list) or not values or not all(isinstance(v, str) and v for v in values):
            problems.append(f"{axis}: expected a non-empty list of strings")
            continue
        if len(set(values)) != len(values):
            problems.append(f"{axis}: duplicate values (they would be drawn twice as often)")
        out[axis] = list(values)
    bad = sorted(set(out.get("difficulty", [])) - set(DIFFICULTIES))
    if bad:
        problems.append(f"difficulty: unknown values {bad} (expected {', '.join(DIFFICULTIES)})")
    if problems:
        raise AxesError(f"{path}: " + "; ".join(problems))
    return out


def sample_axes(rng: random.Random, axes: dict[str, list[str]]) -> SeedAxes:
    return SeedAxes(**{a: rng.choice(axes[a]) for a in AXES})


def sample_difficulty(rng: random.Random, axes: dict[str, list[str]], fixed: str | None) -> str:
    """The ``--difficulty`` asked for, else a uniform draw (drawn even when fixed, so the other axes'
    sequence for a given seed does not depend on whether a difficulty was forced)."""
    drawn = rng.choice(axes["difficulty"])
    return fixed or drawn
