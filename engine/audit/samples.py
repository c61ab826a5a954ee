"""Sample episodes: real recorded episodes shipped as plain files, loadable into any workspace.

A newcomer without Docker (or a GPU, or a policy endpoint) must still be able to open, replay and tag
episodes that really failed in each of the ways Bandpass distinguishes. So ``scripts/record_samples.py``
runs real episodes once and ``export_sample`` writes each as a folder:

    recordings/samples/<slug>/episode.json   task, version hash, agent, outcome, reward, error, timings,
                                             every stored field of every step, the version's audit if any
    recordings/samples/<slug>/agent.cast     the agent's terminal (asciicast v2, plays in asciinema)
    recordings/samples/<slug>/verifier.cast  the verifier's terminal
    recordings/samples/<slug>/endstate.tar   what the policy changed, when small enough to ship

Format 2 also carries every other stored column of the episode (who ended the sandbox, phases, node,
prior tries), its end-state capture and tamper-guard findings, the curators' tags and the reviews: the
evidence a curator reads must survive the round trip, or the demo shows less than a real run does.
Diagnoses are not shipped: they are derived, and recomputed when the samples are loaded.

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

from sqlmodel import SQLModel

from ...store import queries
from ...store.db import session
from ...store.models import (
    STEP_FIELDS,
    Episode,
    EpisodeEndState,
    FailureTag,
    ReviewSuggestion,
    Step,
    pk,
)
from ...store.queries import endstate as endstate_store
from ...store.queries import reviews as rq
from ..core.errors import BandpassError
from ..core.workspace import Workspace

log = logging.getLogger(__name__)

FORMAT = "bandpass-sample/2"
READABLE = ("bandpass-sample/1", FORMAT)
#: Episode columns written by hand (identity, links into this workspace) rather than copied generically.
_EPISODE_OWN = frozenset(
    {"id", "task_version_id", "batch_id", "agent_cast", "verifier_cast", "source_episode_id", "created_at"}
)
_DATETIME_EPISODE = ("started_at", "ended_at")
#: End-state archives above this are not shipped (the listing with sizes and hashes still is).
ARCHIVE_SHIP_LIMIT = 512 * 1024
#: Episodes loaded from a sample carry this batch id prefix: it marks them as samples in every view.
#: Samples recorded in one rollout batch (a checkpoint's episodes) share ``sample:<batch>`` and its Batch
#: row; others get ``sample:<slug>``. Loading is idempotent: a sample is known by batch and created time.
BATCH_PREFIX = "sample:"
_STEP_FIELDS = (*STEP_FIELDS, "created_at")


class SampleError(BandpassError, ValueError):
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
        task = queries.task_by_id(s, version.task_id)
        steps = queries.steps(s, episode_id)
        audit = queries.latest_audit(s, pk(version))
        batch = queries.get_batch(s, ep.batch_id) if ep.batch_id else None
        end = endstate_store.get_endstate(s, episode_id)
        tags = queries.tags_for_episode(s, episode_id, include_cleared=True)
        reviews = list(reversed(rq.reviews_for_episode(s, episode_id)))  # oldest first, as written
        s.expunge_all()
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
    doc["episode"] = {
        f: (_iso(getattr(ep, f)) if f in _DATETIME_EPISODE else getattr(ep, f))
        for f in Episode.model_fields
        if f not in _EPISODE_OWN
    }
    doc["batch"] = (
        {
            "id": batch.id,
            "agent": batch.agent,
            "kind": batch.kind,
            "k": batch.k,
            "created_at": _iso(batch.created_at),
        }
        if batch is not None
        else None
    )
    tag_ids = {t.id: n for n, t in enumerate(tags)}
    doc["tags"] = [_row(t, drop=("id", "episode_id")) for t in tags]
    doc["reviews"] = [
        {
            **_row(r, drop=("id", "episode_id", "accepted_tag_id")),
            "accepted_tag": tag_ids.get(r.accepted_tag_id),
        }
        for r in reviews
    ]
    if dest_dir.exists():
        shutil.rmtree(dest_dir)
    dest_dir.mkdir(parents=True)
    if end is not None:
        doc["endstate"] = _row(end, drop=("episode_id", "archive"))
        archive = ws.abs(end.archive) if end.archive else None
        if archive is not None and archive.is_file() and archive.stat().st_size <= ARCHIVE_SHIP_LIMIT:
            shutil.copyfile(archive, dest_dir / "endstate.tar")
            doc["endstate"]["archive"] = "endstate.tar"
        else:
            doc["endstate"]["archive"] = ""
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


def _row(row: Any, *, drop: tuple[str, ...]) -> dict[str, Any]:
    """A stored row as plain JSON values, datetimes as ISO strings."""
    out: dict[str, Any] = {}
    for f in type(row).model_fields:
        if f in drop:
            continue
        v = getattr(row, f)
        out[f] = _iso(v) if isinstance(v, datetime) else v
    return out


def _revive(model: type[SQLModel], values: dict[str, Any]) -> dict[str, Any]:
    """The fields of ``values`` that ``model`` has, datetimes parsed back (unknown keys are dropped, so a
    sample written by a newer Bandpass still loads)."""
    out: dict[str, Any] = {}
    for f, info in model.model_fields.items():
        if f not in values:
            continue
        v = values[f]
        if v is not None and "datetime" in str(info.annotation):
            v = _dt(v)
        out[f] = v
    return out


def read_sample(folder: Path) -> dict[str, Any]:
    path = Path(folder) / "episode.json"
    try:
        doc: dict[str, Any] = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, json.JSONDecodeError) as exc:
        raise SampleError(f"{path}: unreadable sample ({exc})") from exc
    if doc.get("format") not in READABLE:
        raise SampleError(f"{path}: format {doc.get('format')!r}, expected one of {', '.join(READABLE)}")
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
        batch = doc.get("batch") or None
        batch_id = f"{BATCH_PREFIX}{batch['id'] if batch else slug}"
        with session(ws.engine) as s:
            if _already_loaded(s, batch_id, doc):
                continue
            task = queries.get_task(s, doc["task"])
            if task is None:
                warn(f"sample {slug}: task {doc['task']!r} is not in the workspace; skipped")
                continue
            version = queries.latest_version(s, pk(task))
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
            if batch and queries.get_batch(s, batch_id) is None:
                # The rollout batch the episode was recorded in: Runs lists it with its outcomes.
                row = queries.create_batch(
                    s,
                    batch_id,
                    agent=batch["agent"],
                    kind=batch["kind"],
                    base_url="",
                    k=batch["k"],
                    params={},
                )
                row.executor = "local"
                if batch.get("created_at"):
                    row.created_at = datetime.fromisoformat(batch["created_at"])
            ep = Episode(
                **{**_revive(Episode, _v1_episode(doc)), **_revive(Episode, _episode_columns(doc))},
                task_version_id=pk(version),
                batch_id=batch_id,
                agent_cast=casts["agent_cast"],
                verifier_cast=casts["verifier_cast"],
            )
            if doc.get("created_at"):
                ep.created_at = datetime.fromisoformat(doc["created_at"])
            s.add(ep)
            s.flush()
            for st in doc.get("steps", []):
                fields = {f: st[f] for f in _STEP_FIELDS if f in st}
                if fields.get("created_at"):
                    fields["created_at"] = _dt(fields["created_at"])
                else:
                    fields.pop("created_at", None)
                s.add(Step(episode_id=pk(ep), **fields))
            _load_evidence(s, ws, folder, pk(ep), doc)
            if doc.get("audit"):
                _record_audit(s, pk(version), version.hash, doc["task_version"], doc["audit"])
        added += 1
    load_sample_audits(ws, samples_dir, on_warning=warn)
    return added


def _already_loaded(s: Any, batch_id: str, doc: dict[str, Any]) -> bool:
    """A sample is one episode: loaded when its batch holds an episode created at the recorded time
    (samples of one recorded batch share its id), or, for a sample without that time, any episode."""
    if not doc.get("created_at"):
        return bool(queries.episodes(s, batch_id=batch_id))
    return queries.episode_created_at(s, batch_id, _dt(doc["created_at"])) is not None


def _v1_episode(doc: dict[str, Any]) -> dict[str, Any]:
    """The episode fields format 1 kept at the top level (format 2 keeps them there too, for readers)."""
    return {
        "agent": doc["agent"],
        "attempt": int(doc.get("attempt", 0)),
        "status": "done",
        "outcome": doc["outcome"],
        "reward": doc.get("reward"),
        "retries": int(doc.get("retries", 0)),
        "error": doc.get("error", ""),
        "verifier_output": doc.get("verifier_output", ""),
        "started_at": doc.get("started_at"),
        "ended_at": doc.get("ended_at"),
    }


def _episode_columns(doc: dict[str, Any]) -> dict[str, Any]:
    cols = {k: v for k, v in doc.get("episode", {}).items() if k not in _EPISODE_OWN}
    cols["status"] = "done"
    return cols


def _load_evidence(s: Any, ws: Workspace, folder: Path, episode_id: int, doc: dict[str, Any]) -> None:
    """End state, tags and reviews of a format-2 sample, linked to the new episode id."""
    end = doc.get("endstate")
    if end:
        values = _revive(EpisodeEndState, end)
        values["archive"] = ""
        if end.get("archive") and (folder / end["archive"]).is_file():
            dest = ws.recordings_dir / "samples" / folder.name / "endstate.tar"
            shutil.copyfile(folder / end["archive"], dest)
            values["archive"] = ws.rel(dest)
        s.add(EpisodeEndState(**{**values, "episode_id": episode_id}))
    tag_rows: list[FailureTag] = []
    for t in doc.get("tags", []):
        row = FailureTag(**{**_revive(FailureTag, t), "episode_id": episode_id})
        s.add(row)
        tag_rows.append(row)
    s.flush()
    for r in doc.get("reviews", []):
        n = r.get("accepted_tag")
        accepted = tag_rows[n].id if isinstance(n, int) and 0 <= n < len(tag_rows) else None
        s.add(
            ReviewSuggestion(
                **{**_revive(ReviewSuggestion, r), "episode_id": episode_id, "accepted_tag_id": accepted}
            )
        )


AUDITS_FILE = "audits.json"
AUDITS_FORMAT = "bandpass-sample-audits/1"


def _record_audit(
    s: Any, version_id: int, version_hash: str, recorded_hash: str, audit: dict[str, Any]
) -> bool:
    """Records a sample's audit on the version it was made for, once; False when it does not apply."""
    if version_hash != recorded_hash or queries.latest_audit(s, version_id) is not None:
        return False
    queries.record_audit(
        s,
        version_id,
        verdict=audit["verdict"],
        reasons=list(audit.get("reasons", [])),
        details=audit.get("details", {}),
    )
    return True


def load_sample_audits(
    ws: Workspace, samples_dir: Path, *, on_warning: Callable[[str], None] | None = None
) -> int:
    """Records the audits in ``<samples_dir>/audits.json`` (real audits of the example tasks) on the
    workspace's versions with the same hash, so the demo's flawed tasks show their verdicts. Versions
    already audited keep theirs; returns how many were recorded."""
    warn = on_warning or (lambda msg: log.warning("%s", msg))
    path = Path(samples_dir) / AUDITS_FILE
    if not path.is_file():
        return 0
    try:
        doc = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        warn(f"{path}: not readable as JSON ({exc}); sample audits skipped")
        return 0
    if doc.get("format") != AUDITS_FORMAT:
        warn(f"{path}: format {doc.get('format')!r}, expected {AUDITS_FORMAT!r}; sample audits skipped")
        return 0
    recorded = 0
    with session(ws.engine) as s:
        for name, audit in sorted(doc.get("audits", {}).items()):
            task = queries.get_task(s, name)
            version = queries.latest_version(s, pk(task)) if task is not None else None
            if version is None:
                continue
            if version.hash != audit.get("version_hash"):
                warn(
                    f"sample audit of {name}: made for version {str(audit.get('version_hash'))[:12]}, "
                    f"the workspace has {version.hash[:12]}; not applied"
                )
                continue
            recorded += _record_audit(s, pk(version), version.hash, audit["version_hash"], audit)
    return recorded


__all__ = [
    "BATCH_PREFIX",
    "FORMAT",
    "SampleError",
    "export_sample",
    "load_sample_audits",
    "load_samples",
    "read_sample",
    "sample_dirs",
]
