"""Decontamination: keep tasks out of an export when a reference benchmark already has them.

``bandpass export --against DIR...`` reads the instructions of the task directories under each DIR (a
Terminal-Bench or Harbor dataset checkout, say) and leaves out every workspace task whose instruction is
a near-duplicate of one of them — the same word 3-shingle Jaccard rule, and threshold, as the export's
duplicate gate (``engine.calibration.calibrate``). Training on a benchmark's own tasks would make the
benchmark score meaningless, and a regenerated copy with a changed word or two is still that task.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from pathlib import Path

from ..core.errors import BandpassError
from ..tasks.taskdir import find_task_dirs
from .calibrate import DUPLICATE_THRESHOLD, shingles


class AgainstError(BandpassError, ValueError):
    """A ``--against`` directory that cannot serve as a reference; one line naming it."""


def _instruction(task_dir: Path) -> str:
    md = task_dir / "instruction.md"
    if md.is_file():
        return md.read_text(encoding="utf-8", errors="replace")
    yml = task_dir / "task.yaml"
    if yml.is_file():  # Terminal-Bench 1
        import yaml

        try:
            data = yaml.safe_load(yml.read_text(encoding="utf-8", errors="replace"))
        except yaml.YAMLError:
            return ""
        if isinstance(data, dict):
            text = data.get("instruction") or ""
            if not text and isinstance(data.get("descriptions"), list) and data["descriptions"]:
                first = data["descriptions"][0]
                text = first.get("description", "") if isinstance(first, dict) else ""
            return str(text)
    return ""


def reference_instructions(dirs: Sequence[str]) -> list[tuple[str, str]]:
    """``(label, instruction)`` per reference task; the label is DIR as given joined with the task's
    path under it, so the manifest says exactly which reference matched."""
    out: list[tuple[str, str]] = []
    for given in dirs:
        root = Path(given).expanduser()
        if not root.is_dir():
            raise AgainstError(f"--against {given}: no such directory")
        found = find_task_dirs(root)
        if not found:
            raise AgainstError(f"--against {given}: no task directories (task.toml or task.yaml) under it")
        for d in found:
            rel = d.relative_to(root).as_posix()
            label = given.rstrip("/") + ("/" + rel if rel != "." else "")
            text = _instruction(d)
            if text.strip():
                out.append((label, text))
    return out


def contaminated(
    items: Sequence[tuple[str, str]],
    references: Sequence[tuple[str, str]],
    threshold: float = DUPLICATE_THRESHOLD,
) -> dict[str, tuple[str, float]]:
    """``{task: (reference label, similarity)}`` for the tasks whose instruction has Jaccard >= threshold
    with some reference instruction (the most similar one, first label on ties)."""
    index: dict[str, list[int]] = {}
    ref_sets = [shingles(text) for _, text in references]
    for j, sh in enumerate(ref_sets):
        for g in sh:
            index.setdefault(g, []).append(j)
    out: dict[str, tuple[str, float]] = {}
    for name, text in items:
        sh = shingles(text)
        shared: Counter[int] = Counter()
        for g in sh:
            for j in index.get(g, ()):
                shared[j] += 1
        best: tuple[float, int] | None = None
        for j, inter in sorted(shared.items()):
            union = len(sh) + len(ref_sets[j]) - inter
            sim = inter / union if union else 0.0
            if sim >= threshold and (best is None or sim > best[0]):
                best = (sim, j)
        if best is not None:
            out[name] = (references[best[1]][0], best[0])
    return out
