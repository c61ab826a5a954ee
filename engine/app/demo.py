"""The demo workspace (``bandpass demo``): the example tasks, two policy checkpoints' real recorded
episodes with their audits, tags and reviews, the generation attempts, the checkpoints' config, and the
diagnoses (derived, so recomputed here rather than shipped).

Why here: preparing it imports tasks, loads samples into the store and diagnoses episodes — three stages
— so it is a use case; the command only says where (``.bandpass-demo/`` unless ``--workspace``) and
prints or opens the result. Refusals are ``BandpassError``: ``DemoError``, and ``SampleError`` /
``GenerationSampleError`` naming the broken sample file and field.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from ..core.errors import BandpassError
from ..core.workspace import CONFIG_NAME, DB_NAME, Workspace

__all__ = ["DemoError", "PreparedDemo", "prepare"]


class DemoError(BandpassError, RuntimeError):
    """The demo workspace cannot be prepared; the message says why."""


@dataclass(frozen=True)
class PreparedDemo:
    workspace: Workspace
    #: Episode samples loaded now (0 when the workspace already held them all).
    added: int
    warnings: list[str] = field(default_factory=list)


def prepare(root: Path, *, samples: Path, example_tasks: Path, reset: bool = False) -> PreparedDemo:
    """Builds (or tops up) the demo workspace at ``root`` from the sample folder ``samples`` and the task
    folder ``example_tasks``; ``reset`` deletes it first (only a Bandpass workspace is ever deleted)."""
    from ..audit.samples import load_samples
    from ..generator.generation_samples import load_generation_samples
    from ..review.diagnoser import diagnose_episodes
    from ..tasks.importer import import_paths

    root = Path(root).expanduser().resolve()
    if reset and root.exists():
        if any(root.iterdir()) and not (root / DB_NAME).exists():
            raise DemoError(f"--reset: {root} is not a Bandpass workspace (no {DB_NAME}); not deleting it")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    if not (root / CONFIG_NAME).exists() and (samples / CONFIG_NAME).is_file():
        # The checkpoints as one training series, so Calibration's compare orders them by step.
        shutil.copyfile(samples / CONFIG_NAME, root / CONFIG_NAME)
    ws = Workspace.open(root)
    report = import_paths(ws, [example_tasks])
    if not report.ok:
        bad = [i.source for i in report.items if i.status == "invalid"]
        raise DemoError(f"example tasks failed to import: {', '.join(bad)}")
    warnings: list[str] = []
    added = load_samples(ws, samples, on_warning=warnings.append)
    load_generation_samples(ws, samples, on_warning=warnings.append)
    diagnose_episodes(ws, missing_only=True)
    return PreparedDemo(ws, added, warnings)
