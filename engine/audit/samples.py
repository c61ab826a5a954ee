"""Sample episodes: real recorded episodes shipped as plain files, loadable into any workspace.

A newcomer without Docker (or a GPU, or a policy endpoint) must still be able to open, replay and tag
episodes that really failed in each of the ways Bandpass distinguishes. So ``scripts/record_samples.py``
runs real episodes once and ``export_sample`` writes each as a folder:

    recordings/samples/<slug>/episode.json   task, version hash, agent, outcome, reward, error, timings,
                                             every stored field of every step, the version's audit if any
    recordings/samples/<slug>/agent.cast     the agent's terminal (asciicast v2, plays in asciinema)
    recordings/samples/<slug>/verifier.cast  the verifier's terminal

``load_samples`` turns the folders back into Episode and Step rows whose casts are copies inside the
workspace (the workspace stays self-contained; deleting the repo checkout does not break replay).
"""

from __future__ import annotations

import json
import logging
import shutil
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

from engine.core.workspace import Workspace
from store import queries
from store.db import session
from store.models import STEP_FIELDS, Episode, Step

log = logging.getLogger(__name__)

FORMAT = "bandpass-sample/1"
#: Episodes loaded from a sample carry this batch id prefix: it marks them as samples in every view and
#: makes loading idempotent (one lookup per sample, no extra column).
BATCH_PREFIX = "sample:"
_STEP_FIELDS = (*STEP_FIELDS, "created_at")


class SampleError(ValueError):
    """A sample folder cannot be exported or read; the message names the folder."""


def _iso(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def _dt(value: str | None) -> datetime | None:
    return datetime.fromisoformat(value) if value else None


def export_sample(ws: Workspace, episode_id: int, dest_dir: Path, *, note: str = "") -> Path:
    """Writes one finished episode as a sample folder ``dest_dir`` (replaced if it exists)."""
    dest_dir = Path(dest_dir)
    with session(ws.engine) as s:
        ep = queries.get_episode(s, episode_id)
        if ep is None:
            raise SampleError(f"episode {episode_id} does not exist")
        if ep.status != "done":
            raise SampleError(f"episode {episode_id} is {ep.status}, not done")
        version = queries.get_version(s, ep.task_version_id)
        assert version is not None
        task = s.get(queries.Task, version.task_id)
        steps = queries.steps(s, episode_id)
        audit = queries.latest_audit(s, version.id)  # type: ignore[arg-type]
    duration = (ep.ended_at - ep.started_at).total_seconds() if ep.started_at and ep.ended_at else None
    doc: dict[str, Any] = {
        "format": FORMAT,
        "note": note,
        "task": task.name if task else "",
        "task_version": version.hash,
        "agent": ep.agent,
        "attempt": ep.attempt,
        "outcome": ep.outcome,
        "reward": ep.reward,
        "retries": ep.retries,
        "error": ep.error,
        "verifier_output": ep.verifier_output,
        "started_at": _iso(ep.started_at),
        "ended_at": _iso(ep.ended_at),
        "created_at": _iso(ep.created_at),
        "duration_s": duration,
        "steps": [
            {
                f: (_iso(getattr(st, f)) if f == "created_at" else getattr(st, f))
                for f in _STEP_FIELDS
                # No request attempts (built-in agents, samples recorded before they were stored): the
                # key is left out, so older samples round-trip unchanged.
                if not (f == "attempts_json" and getattr(st, f) in ("", "[]"))
            }
            for st in steps
        ],
        "audit": (
            {
                "verdict": audit.verdict,
                "reasons": json.loads(audit.reasons_json),
                "details": json.loads(audit.details_json),
                "created_at": _iso(audit.created_at),
            }
            if audit
            else None
        ),
    }
    if dest_dir.exists():
        shutil.rmtree(dest_dir)
    dest_dir.mkdir(parents=True)
    for key, name in (("agent_cast", "agent.cast"), ("verifier_cast", "verifier.cast")):
        stored = getattr(ep, key)
        src = ws.abs(stored) if stored else None
        if src is not None and src.is_file():
            shutil.copyfile(src, dest_dir / name)
            doc[key] = name
        else:
            doc[key] = ""  # e.g. an infra error before the verifier ever ran
    (dest_dir / "episode.json").write_text(json.dumps(doc, indent=2, sort_keys=True) + "\n", encoding="utf-8")
    return dest_dir


def read_sample(folder: Path) -> dict[str, Any]:
    path = Path(folder) / "episode.json"
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SampleError(f"{path}: unreadable sample ({exc})") from exc
    if doc.get("format") != FORMAT:
        raise SampleError(f"{path}: format {doc.get('format')!r}, expected {FORMAT!r}")
    return doc


def sample_dirs(samples_dir: Path) -> list[Path]:
    return sorted(p.parent for p in Path(samples_dir).glob("*/episode.json"))


def load_samples(ws: Workspace, samples_dir: Path, *, on_warning: Callable[[str], None] | None = None) -> int:
    """Loads every sample folder under ``samples_dir``; returns how many episodes were added.

    Each sample attaches to the *latest* version of the task with the same name (a warning when its
    hash differs from the one recorded: the example task was edited since). Samples whose task is not in
    the workspace are skipped with a warning. Loading twice adds nothing.
    """
    warn = on_warning or (lambda msg: log.warning("%s", msg))
    added = 0
    for folder in sample_dirs(samples_dir):
        slug = folder.name
        doc = read_sample(folder)
        batch_id = f"{BATCH_PREFIX}{slug}"
        with session(ws.engine) as s:
            if queries.episodes(s, batch_id=batch_id):
                continue
            task = queries.get_task(s, doc["task"])
            if task is None:
                warn(f"sample {slug}: task {doc['task']!r} is not in the workspace; skipped")
                continue
            version = queries.latest_version(s, task.id)  # type: ignore[arg-type]
            assert version is not None
            if version.hash != doc["task_version"]:
                warn(
                    f"sample {slug}: recorded on {doc['task']} version {doc['task_version'][:12]}, "
                    f"loaded against {version.hash[:12]}"
                )
            cast_dir = ws.recordings_dir / "samples" / slug
            cast_dir.mkdir(parents=True, exist_ok=True)
            casts: dict[str, str] = {}
            for key in ("agent_cast", "verifier_cast"):
                name = doc.get(key) or ""
                if name and (folder / name).is_file():
                    shutil.copyfile(folder / name, cast_dir / name)
                    casts[key] = ws.rel(cast_dir / name)
                else:
                    casts[key] = ""
            ep = Episode(
                task_version_id=version.id,  # type: ignore[arg-type]
                agent=doc["agent"],
                batch_id=batch_id,
                attempt=int(doc.get("attempt", 0)),
                status="done",
                outcome=doc["outcome"],
                reward=doc.get("reward"),
                retries=int(doc.get("retries", 0)),
                error=doc.get("error", ""),
                verifier_output=doc.get("verifier_output", ""),
                started_at=_dt(doc.get("started_at")),
                ended_at=_dt(doc.get("ended_at")),
                **casts,
            )
            if doc.get("created_at"):
                ep.created_at = _dt(doc["created_at"])  # type: ignore[assignment]
            s.add(ep)
            s.flush()
            for st in doc.get("steps", []):
                fields = {f: st[f] for f in _STEP_FIELDS if f in st}
                if fields.get("created_at"):
                    fields["created_at"] = _dt(fields["created_at"])
                else:
                    fields.pop("created_at", None)
                s.add(Step(episode_id=ep.id, **fields))  # type: ignore[arg-type]
        added += 1
    return added


__all__ = [
    "BATCH_PREFIX",
    "FORMAT",
    "SampleError",
    "export_sample",
    "load_samples",
    "read_sample",
    "sample_dirs",
]
