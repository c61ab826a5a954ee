"""Generation samples: real generation attempts shipped as plain files, loadable into any workspace.

The demo's Generate screen must show what a generation looks like — the meta-agent's turns, its tool
calls, the audit it read and how it repaired the task — without Claude or Docker. So
``scripts/record_samples.py`` runs real attempts once (the real generator and audit, the anthropic SDK
against a scripted Messages server) and ``export_generation_sample`` writes each as a folder:

    recordings/samples/generations/<slug>/generation.json   every stored column of the attempt, and
                                                             the accepted task's name and audit
    recordings/samples/generations/<slug>/task/             the accepted task's files (Harbor layout)

``load_generation_samples`` adds the attempts back, imports an accepted one's task (origin
``generated``) and links the two. Loading twice adds nothing (an attempt is known by model and time).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.models import Generation, pk
from ..core.errors import BandpassError
from ..core.workspace import Workspace
from ..tasks.importer import import_one

log = logging.getLogger(__name__)

FORMAT = "bandpass-generation-sample/1"
FOLDER = "generations"
_OWN = frozenset({"id", "task_version_id"})


class GenerationSampleError(BandpassError, ValueError):
    """A generation sample cannot be written or read; the message names the folder."""


def _plain(v: Any) -> Any:
    return v.isoformat() if isinstance(v, datetime) else v


def export_generation_sample(ws: Workspace, generation_id: int, dest: Path, *, note: str = "") -> Path:
    """Writes one finished attempt as the sample folder ``dest`` (replaced if it exists)."""
    with session(ws.engine) as s:
        g = queries.get_generation(s, generation_id)
        if g is None:
            raise GenerationSampleError(f"generation {generation_id} does not exist")
        if g.outcome == "running":
            raise GenerationSampleError(f"generation {generation_id} is still running")
        version = queries.get_version(s, g.task_version_id) if g.task_version_id else None
        task = queries.task_by_id(s, version.task_id) if version is not None else None
        audit = queries.latest_audit(s, pk(version)) if version is not None else None
        doc: dict[str, Any] = {
            "format": FORMAT,
            "note": note,
            "generation": {f: _plain(getattr(g, f)) for f in Generation.model_fields if f not in _OWN},
            "task": task.name if task else "",
            "task_version": version.hash if version else "",
            "audit": (
                {
                    "verdict": audit.verdict,
                    "reasons": json.loads(audit.reasons_json),
                    "details": json.loads(audit.details_json),
                }
                if audit
                else None
            ),
        }
        task_dir = ws.abs(version.path) if version is not None else None
    dest = Path(dest)
    if dest.exists():
        shutil.rmtree(dest)
    dest.mkdir(parents=True)
    if task_dir is not None:
        shutil.copytree(task_dir, dest / "task")
    (dest / "generation.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return dest


def read_generation_sample(folder: Path) -> dict[str, Any]:
    path = Path(folder) / "generation.json"
    try:
        doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise GenerationSampleError(f"{path}: unreadable generation sample ({exc})") from exc
    if doc.get("format") != FORMAT:
        raise GenerationSampleError(f"{path}: format {doc.get('format')!r}, expected {FORMAT!r}")
    if not isinstance(doc.get("generation"), dict) or not doc["generation"].get("model"):
        raise GenerationSampleError(f"{path}: field 'generation' must be an object with a 'model'")
    return doc


def _revive(values: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for f, info in Generation.model_fields.items():
        if f in _OWN or f not in values:
            continue
        v = values[f]
        if v is not None and "datetime" in str(info.annotation):
            v = datetime.fromisoformat(v)
        out[f] = v
    return out


def load_generation_samples(
    ws: Workspace, samples_dir: Path, *, on_warning: Callable[[str], None] | None = None
) -> int:
    """Loads every folder under ``<samples_dir>/generations``; returns how many attempts were added."""
    warn = on_warning or (lambda msg: log.warning("%s", msg))
    added = 0
    for gen_file in sorted((Path(samples_dir) / FOLDER).glob("*/generation.json")):
        folder = gen_file.parent
        doc = read_generation_sample(folder)
        values = _revive(doc["generation"])
        with session(ws.engine) as s:
            exists = queries.generation_created_at(s, values["model"], values.get("created_at"))
        if exists is not None:
            continue
        version_id: int | None = None
        if (folder / "task").is_dir():
            item = import_one(ws, folder / "task", origin="generated")
            if item.status == "invalid":
                why = "; ".join(item.problems)
                warn(f"generation sample {folder.name}: its task does not import ({why}); linked to none")
            else:
                with session(ws.engine) as s:
                    version = queries.version_by_hash(s, item.version_hash)
                    version_id = version.id if version is not None else None
        with session(ws.engine) as s:
            g = Generation(**values, task_version_id=version_id)
            s.add(g)
            audit = doc.get("audit")
            if version_id is not None and audit and queries.latest_audit(s, version_id) is None:
                queries.record_audit(
                    s,
                    version_id,
                    verdict=audit["verdict"],
                    reasons=list(audit.get("reasons", [])),
                    details=audit.get("details", {}),
                )
        added += 1
    return added


__all__ = [
    "FORMAT",
    "GenerationSampleError",
    "export_generation_sample",
    "load_generation_samples",
    "read_generation_sample",
]
