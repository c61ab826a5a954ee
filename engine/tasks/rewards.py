"""A verifier's reward, read as its author meant: every dimension it wrote, one scalar by one rule, and
whether the files are the ones the task's verifier writes.

Harbor's verifier writes ``/logs/verifier/reward.json`` (an object of numbers: ``{"reward": 1}`` or several
dimensions, ``{"correctness": 1, "performance": 0.5}``) or ``reward.txt`` (one number). Harbor 0.25 reads
``reward.json`` when it exists (then ``reward.txt`` is ignored), else ``reward.txt``, and keeps the whole
object as the trial's ``rewards``; its own "primary reward" is the ``"reward"`` key, else a single key,
else none. Parsing here is Harbor's, file for file (``tests/engine/tasks/test_rewards_differential.py``
runs Harbor's own code on the same bytes): an empty file, text that is not a number, a non-numeric or
non-finite value, a JSON value that is not an object are refused.

**Every key is kept** as the episode's reward components (:attr:`Reading.components`, Harbor's
``rewards``). **The scalar** that pass@k, the band and the exports use comes from one rule that never
loses a score the author wrote (:func:`read`):

1. ``reward.json``'s ``"reward"`` key;
2. else ``reward.json``'s only key, when it has exactly one (1 and 2 are Harbor's own primary reward, so
   pass@k here and in Harbor count the same number);
3. else ``reward.txt``, when the verifier wrote it too (Harbor ignores it beside ``reward.json``; it is
   the author's score);
4. else the key the task declares (``[metadata.bandpass] primary_reward = "success"`` in ``task.toml``,
   under Harbor's free ``metadata`` table) or the curator declares (``bandpass.toml``:
   ``[rewards.primary] task-name = "success"``);
5. else no scalar: the episode is *unscored* (its components are kept; the audit says once what to
   declare).

**Which files the verifier writes** is read from the task's ``tests/`` (:func:`files_written`): every file
there that names ``reward.json`` or ``reward.txt`` (``[metadata.bandpass] reward_files`` overrides it when
the writer lives elsewhere, say in a grading tool the image ships). The verifier runs the policy's code,
and that code can write the reward files too; :func:`forgery` names what the task's verifier cannot have
left: a reward file its tests never name, or the two files disagreeing on the scalar.

This module is the one place that reads a reward; the verifier (engine/run/verifier.py), Harbor job
imports (engine/tasks/harbor_jobs.py) and the audit call it.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

REWARD_JSON = "reward.json"
REWARD_TXT = "reward.txt"
REWARD_FILES = (REWARD_JSON, REWARD_TXT)
#: The task's own declarations, under ``[metadata.bandpass]``.
PRIMARY_KEY = "primary_reward"
FILES_KEY = "reward_files"
#: Two scalars closer than this are the same score (a verifier that prints 0.1 + 0.2 in one file and 0.3
#: in the other agrees with itself).
_SAME = 1e-9
#: Files of ``tests/`` read for reward file names: text up to this size (a verifier's scripts, not data).
_SCAN_BYTES = 1 << 20


class RewardFileError(ValueError):
    """A reward file Harbor would refuse; the message says which file and why."""


def parse_json(data: bytes) -> dict[str, float]:
    """``reward.json`` as Harbor 0.25 reads it: a non-empty JSON object whose values are all finite
    numbers. Integers are kept as numbers (a ``true`` counts as 1, as Harbor's check lets it through)."""
    if not data:
        raise RewardFileError(f"{REWARD_JSON} is empty")
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError) as exc:
        raise RewardFileError(f"{REWARD_JSON} is not valid JSON ({exc})") from exc
    values = doc.values() if isinstance(doc, dict) else [doc]
    for value in values:
        if not isinstance(value, int | float):
            raise RewardFileError(f"{REWARD_JSON}: non-numeric reward {_short(value)} (expected numbers)")
        if isinstance(value, float) and not math.isfinite(value):
            raise RewardFileError(f"{REWARD_JSON}: non-finite reward {value!r}")
    if not isinstance(doc, dict):
        raise RewardFileError(
            f'{REWARD_JSON}: expected an object of numbers such as {{"reward": 1}}, got {_short(doc)}'
        )
    out: dict[str, float] = {}
    for key, value in doc.items():
        try:
            out[str(key)] = float(value)
        except OverflowError as exc:  # an integer past a double: Harbor keeps it, no score can use it
            raise RewardFileError(f"{REWARD_JSON}: {key!r} is too large to be a score") from exc
    return out


def parse_txt(data: bytes) -> float:
    """``reward.txt`` as Harbor 0.25 reads it: one finite number (surrounding whitespace allowed)."""
    if not data:
        raise RewardFileError(f"{REWARD_TXT} is empty")
    text = data.decode("utf-8", "replace")
    try:
        value = float(text)
    except ValueError as exc:
        raise RewardFileError(f"{REWARD_TXT}: expected a number, got {text.strip()[:80]!r}") from exc
    if not math.isfinite(value):
        raise RewardFileError(f"{REWARD_TXT}: expected a finite number, got {text.strip()[:80]!r}")
    return value


def _short(value: Any) -> str:
    return repr(value)[:80]


@dataclass
class Reading:
    """One verifier run's reward: the scalar (None: no valid reward, or none the rule can pick), the
    components (Harbor's ``rewards``: every key of ``reward.json``, else ``{"reward": <reward.txt>}``),
    which rule gave the scalar, and why there is none."""

    reward: float | None
    components: dict[str, float] = field(default_factory=dict)
    source: str = ""  # 'reward.json "reward"', 'reward.txt', 'reward.json "x" (its only key)', ...
    problem: str = ""  # why no scalar: a file Harbor refuses, no file, or no rule (``unscored``)
    unscored: bool = False  # valid files, but no rule picks a scalar: declare a primary
    present: list[str] = field(default_factory=list)  # which reward files were there
    txt: float | None = None  # reward.txt's value when it was written and valid (beside reward.json too)
    notes: list[str] = field(default_factory=list)  # what was ignored, as Harbor ignores it

    def as_dict(self) -> dict[str, Any]:
        return {
            "reward": self.reward,
            "components": self.components,
            "source": self.source,
            "problem": self.problem,
            "unscored": self.unscored,
            "present": self.present,
            "notes": self.notes,
        }


def read(json_bytes: bytes | None, txt_bytes: bytes | None, *, primary: str = "") -> Reading:
    """The reward of one verifier run from what ``/logs/verifier`` held (None: the file was not there),
    by the rule in the module docstring. ``primary`` is the key the task or the curator declared."""
    present = [n for n, b in ((REWARD_JSON, json_bytes), (REWARD_TXT, txt_bytes)) if b is not None]
    if json_bytes is None and txt_bytes is None:
        return Reading(
            None, problem=f"neither /logs/verifier/{REWARD_JSON} nor {REWARD_TXT} was written", present=[]
        )
    txt: float | None = None
    txt_problem = ""
    if txt_bytes is not None:
        try:
            txt = parse_txt(txt_bytes)
        except RewardFileError as exc:
            txt_problem = str(exc)
    if json_bytes is None:
        if txt is None:
            return Reading(None, problem=txt_problem, present=present)
        return Reading(txt, {"reward": txt}, REWARD_TXT, present=present, txt=txt)
    try:
        comps = parse_json(json_bytes)
    except RewardFileError as exc:  # Harbor does not fall back to reward.txt either
        return Reading(None, problem=str(exc), present=present, txt=txt)
    reading = Reading(None, comps, present=present, txt=txt)
    if txt_problem:
        reading.notes.append(f"{txt_problem} (ignored, as Harbor ignores reward.txt beside reward.json)")
    scalar, source, problem = scalar_of(comps, txt, primary)
    reading.reward, reading.source, reading.problem = scalar, source, problem
    reading.unscored = scalar is None
    return reading


def scalar_of(
    components: dict[str, float], txt: float | None, primary: str = ""
) -> tuple[float | None, str, str]:
    """(scalar, which rule gave it, why none) for a ``reward.json``'s components and ``reward.txt``'s value
    (None: not written): the rule of the module docstring."""
    if "reward" in components:
        return components["reward"], f'{REWARD_JSON} "reward"', ""
    if len(components) == 1:
        key = next(iter(components))
        return components[key], f'{REWARD_JSON} "{key}" (its only key)', ""
    if txt is not None:
        return txt, f'{REWARD_TXT} (beside a {REWARD_JSON} of several keys without "reward")', ""
    if primary and primary in components:
        return components[primary], f'{REWARD_JSON} "{primary}" (the declared primary reward)', ""
    keys = ", ".join(f'"{k}"' for k in components) or "none"
    if primary:
        return None, "", (f'the declared primary reward "{primary}" is not in {REWARD_JSON} (keys: {keys})')
    return (
        None,
        "",
        (
            f'{REWARD_JSON} has no "reward" key and '
            f"{'no key at all' if not components else f'several ({keys})'}"
            f", and no {REWARD_TXT}: declare which one is the task's score "
            f'([metadata.bandpass] {PRIMARY_KEY} = "..." in task.toml, or [rewards.primary] in bandpass.toml)'
        ),
    )


# --- what the task's verifier writes ------------------------------------------------------------------


@dataclass(frozen=True)
class Declared:
    """The task's reward declarations (``[metadata.bandpass]``)."""

    primary: str = ""
    files: tuple[str, ...] | None = None  # None: read from tests/


def declared(metadata: dict[str, Any]) -> tuple[Declared, list[tuple[str, str]]]:
    """The task's ``primary_reward`` and ``reward_files`` and (field, problem) pairs for malformed ones."""
    bp = metadata.get("bandpass", {})
    if not isinstance(bp, dict):
        return Declared(), []  # reported by engine/tasks/allowances.py
    problems: list[tuple[str, str]] = []
    primary = bp.get(PRIMARY_KEY, "")
    if not isinstance(primary, str):
        problems.append((f"[metadata.bandpass].{PRIMARY_KEY}", f"expected a key name, got {primary!r}"))
        primary = ""
    files = bp.get(FILES_KEY)
    if files is not None and (
        not isinstance(files, list) or not files or not all(f in REWARD_FILES for f in files)
    ):
        problems.append(
            (
                f"[metadata.bandpass].{FILES_KEY}",
                f"expected a list of {' and '.join(REWARD_FILES)}, got {files!r}",
            )
        )
        files = None
    return Declared(primary, tuple(files) if files is not None else None), problems


def files_written(tests_dir: Path, declared_files: tuple[str, ...] | None = None) -> tuple[str, ...] | None:
    """Which reward files the task's verifier writes: the declared list, else every reward file name a
    file of ``tests/`` mentions (its scripts and helpers); None when none names either (then nothing is
    concluded from which files appear)."""
    if declared_files is not None:
        return declared_files
    found: set[str] = set()
    try:
        paths = sorted(p for p in Path(tests_dir).rglob("*") if p.is_file())
    except OSError:
        return None
    for path in paths:
        try:
            if path.stat().st_size > _SCAN_BYTES:
                continue
            text = path.read_bytes()
        except OSError:
            continue
        found.update(name for name in REWARD_FILES if name.encode() in text)
        if len(found) == len(REWARD_FILES):
            break
    return tuple(n for n in REWARD_FILES if n in found) or None


def forgery(reading: Reading, written: tuple[str, ...] | None) -> str:
    """Why these reward files cannot all be the task's verifier's, or "": a reward file its ``tests/``
    never name (the policy's code wrote it while the tests ran it), or ``reward.json``'s scalar and
    ``reward.txt`` disagreeing (one of them is not the verifier's). Only the two files' *reward* are
    compared: a ``reward.json`` of other keys (``{"accuracy": 0.75}``, several dimensions) beside a
    ``reward.txt`` holds other scores, not a second opinion on the same one."""
    if written is not None:
        stray = [n for n in reading.present if n not in written]
        if stray:
            return (
                f"{stray[0]} was written, but the task's verifier (tests/) writes only {', '.join(written)}: "
                "the code under test wrote it"
            )
    if reading.txt is not None and "reward" in reading.components:
        json_value = reading.components["reward"]
        if abs(json_value - reading.txt) > _SAME:
            return (
                f'{REWARD_JSON} says "reward": {json_value:g} and {REWARD_TXT} says {reading.txt:g}: '
                "the two reward files disagree"
            )
    return ""


def harbor_scalar(reading: Reading) -> float | None:
    """The score Harbor 0.25 itself would take from the same files (``reward.json`` first, then
    ``"reward"`` or a single key): what an export run by Harbor would count."""
    comps = reading.components
    if "reward" in comps:
        return comps["reward"]
    if len(comps) == 1:
        return next(iter(comps.values()))
    return None


__all__ = [
    "FILES_KEY",
    "PRIMARY_KEY",
    "REWARD_FILES",
    "REWARD_JSON",
    "REWARD_TXT",
    "Declared",
    "Reading",
    "RewardFileError",
    "declared",
    "files_written",
    "forgery",
    "harbor_scalar",
    "parse_json",
    "parse_txt",
    "read",
    "scalar_of",
]
