"""Export the calibrated training set: what ``bandpass export`` does, in one call a screen can make too.

Why here: the default output folder (``exports/<model>-<lo>-<hi>-k<k>``) and the refusal of a model with
no finished episodes were written in the command; a front end now builds ``ExportParams`` from its options
and calls :func:`export_dataset`. Refusals are ``BandpassError`` (``ExportError``, ``NothingToRun``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ...store import queries
from ...store.db import session
from ..calibration.export import ExportError, ExportParams, export
from .errors import NothingToRun

if TYPE_CHECKING:
    from ..calibration.export import ExportResult
    from ..core.workspace import Workspace

__all__ = [
    "ExportError",
    "ExportParams",
    "default_out",
    "export_dataset",
    "models_with_episodes",
    "require_model",
]


def models_with_episodes(ws: Workspace) -> list[str]:
    """The agents (models and built-ins) that have finished episodes: what a report or export can be of."""
    with session(ws.engine) as s:
        return list(queries.episode_agents(s))


def require_model(ws: Workspace, model: str | None) -> str:
    """``model``, when it has finished episodes; else ``NothingToRun`` naming the models that do."""
    known = models_with_episodes(ws)
    if not model:
        hint = f" (models with episodes: {', '.join(known)})" if known else " (no episodes yet)"
        raise NothingToRun(f"--model is required{hint}")
    if model not in known:
        hint = f"; models with episodes: {', '.join(known)}" if known else ""
        raise NothingToRun(f"--model {model}: no finished episodes for this model{hint}")
    return model


def default_out(ws: Workspace, params: ExportParams) -> Path:
    """``exports/<model>-<lo>-<hi>-k<k>`` in the workspace (the model name made safe for a folder)."""
    safe = "".join(ch if ch.isalnum() or ch in "._-" else "_" for ch in params.model)
    return ws.exports_dir / f"{safe}-{params.lo:g}-{params.hi:g}-k{params.k}"


def export_dataset(
    ws: Workspace, params: ExportParams, out: Path | None = None, *, overwrite: bool = False
) -> ExportResult:
    """Writes the tasks that pass every gate in the formats asked for; ``out`` None is
    :func:`default_out`. Raises ``ExportError`` (a folder that is not a previous export, a bad format...)."""
    return export(ws, params, out or default_out(ws, params), overwrite=overwrite)
