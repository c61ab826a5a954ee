"""``bandpass regrade``: a fixed verifier judges the end states earlier episodes left, without new rollouts.

When a task's latest version differs from an earlier one *only* in ``tests/`` (the verifier was fixed;
instruction, environment and solution identical), the policy's work is still valid evidence: every
finished episode of the earlier version whose end state was captured is verified again exactly as an
episode is: in a clean room, the artifacts chosen from the stored end state by the same plan
(engine/run/cleanroom.py) carried into a fresh container of the image; in place (a service task), the
whole end state put back into a fresh container and captured and guarded again. Each result is an
episode of the new version with ``origin = "regrade"`` linked to its source, so calibration counts it as
a sample of the new version. Harbor regrades recorded output; here the link is between content-hashed
versions, so an edit outside ``tests/`` cannot slip through.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import docker

from ...store import queries
from ...store.db import session
from ...store.models import Episode, TaskVersion, pk
from ...store.queries import endstate as endstate_store
from ..core import outcomes
from ..core.errors import BandpassError
from ..core.events import EventBus
from ..core.plural import counted
from ..core.workspace import Workspace
from ..tasks.artifacts import CLEAN_ROOM, IN_PLACE, SERVICE, under
from ..tasks.taskdir import TaskSpec, load_task, task_files
from .agents.builtin import NopAgent
from .endstate import DELETED, StoredEndState, change_from_dict
from .episode import run_episode, verify_mode_of, with_adopted

TESTS = "tests/"


class RegradeRefused(BandpassError, ValueError):
    """Regrade cannot be done for this pair of versions; the message is the one-line reason."""


@dataclass
class RegradeItem:
    source_episode: int
    episode: int | None
    old_reward: float | None
    new_reward: float | None
    outcome: str | None
    skipped: str = ""  # why no regrade episode was made

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass
class RegradePlan:
    task: str
    old: TaskVersion
    new: TaskVersion
    sources: list[Episode]
    already: int  # sources regraded by an earlier run: never twice


def differences_outside_tests(old_dir: Path, new_dir: Path) -> list[str]:
    """Relative paths (outside ``tests/``) whose presence, executable bit or content differ."""

    def files(root: Path) -> dict[str, tuple[bool, bytes]]:
        out = {}
        for f in task_files(root):
            rel = f.relative_to(root).as_posix()
            if not rel.startswith(TESTS):
                out[rel] = (bool(f.stat().st_mode & 0o111), f.read_bytes())
        return out

    a, b = files(old_dir), files(new_dir)
    return sorted(rel for rel in set(a) | set(b) if a.get(rel) != b.get(rel))


def plan(ws: Workspace, task_name: str, from_hash: str | None = None) -> RegradePlan:
    with session(ws.engine) as s:
        task = queries.get_task(s, task_name)
        if task is None:
            raise RegradeRefused(f"regrade: no task named {task_name!r} in this workspace")
        versions = queries.versions_of_task(s, pk(task))
        new = versions[-1]
        if from_hash:
            matches = [v for v in versions[:-1] if v.hash.startswith(from_hash.lower())]
            if not matches:
                latest = " (that is the latest version)" if new.hash.startswith(from_hash.lower()) else ""
                raise RegradeRefused(f"regrade: {task_name}: no earlier version {from_hash}{latest}")
            if len(matches) > 1:
                raise RegradeRefused(f"regrade: {task_name}: {from_hash} matches {len(matches)} versions")
            old = matches[0]
        elif len(versions) < 2:
            raise RegradeRefused(f"regrade: {task_name}: only one version, nothing to regrade from")
        else:
            old = versions[-2]
        changed = differences_outside_tests(ws.abs(old.path), ws.abs(new.path))
        if changed:
            shown = ", ".join(changed[:5]) + (f" … {len(changed) - 5} more" if len(changed) > 5 else "")
            raise RegradeRefused(
                f"regrade: {task_name}: {new.hash[:12]} differs from {old.hash[:12]} outside tests/ "
                f"({shown}); only a verifier fix can be regraded — run new rollouts instead"
            )
        done = endstate_store.regraded_sources(s, pk(new))
        finished = endstate_store.finished_episodes(s, pk(old))
        sources = [e for e in finished if e.id not in done]
        return RegradePlan(task_name, old, new, sources, already=len(finished) - len(sources))


def _stored(ws: Workspace, ep: Episode) -> tuple[StoredEndState | None, str]:
    """The source's end state, or why it cannot be regraded."""
    if not outcomes.is_valid_sample(ep.outcome):
        return None, f"no valid end state ({ep.outcome})"
    if ep.verify_mode == SERVICE:
        return None, "verified as a service: the process it left running is not in its end state"
    with session(ws.engine) as s:
        row = endstate_store.get_endstate(s, pk(ep))
        if row is None:
            return None, "end state missing (episode ran before capture, or capture failed)"
        listed = json.loads(row.changes_json)
    archive = ws.abs(row.archive) if row.archive else None
    changes = [change_from_dict(c) for c in listed]
    if row.over_cap:
        # the clean room carries artifacts only: a file over the cap elsewhere is evidence, not input
        with session(ws.engine) as s:
            version = queries.get_version(s, ep.task_version_id)
        spec = with_adopted(version, load_task(ws.abs(version.path))) if version is not None else None
        mode = verify_mode_of(version, spec) if version is not None and spec is not None else IN_PLACE
        missing = [
            c.path
            for c in changes
            if c.type == "file"
            and not c.archived
            and (mode == IN_PLACE or spec is None or _carried(c.path, spec))
        ]
        if missing:
            return None, (
                f"end state over the cap ({counted(row.over_cap, 'file')} listed with size and sha256 only"
                + (f", {len(missing)} of them artifacts" if mode == CLEAN_ROOM else "")
                + ")"
            )
    if any(c.get("archived") for c in listed) and (archive is None or not archive.is_file()):
        return None, f"end state archive missing: {row.archive or '(none)'}"
    code = outcomes.code_of(ep.outcome) if ep.outcome.startswith("agent_error:") else None
    if code == "verifier_tamper":
        code = None  # the guard judges the end state again, with the new version's allowances
    return (
        StoredEndState(
            source_episode=pk(ep),
            archive=archive,
            deleted=[c["path"] for c in listed if c["kind"] == DELETED],
            changes=changes,
            agent_cast=ep.agent_cast,
            error_code=code,
            detail=f"regraded from episode {ep.id}; its {ep.outcome} stands" if code else "",
        ),
        "",
    )


def _carried(path: str, spec: TaskSpec) -> bool:
    return any(under(path, r) for r in spec.artifact_roots)


def regrade(
    ws: Workspace,
    task_name: str,
    *,
    from_hash: str | None = None,
    client: docker.DockerClient | None = None,
    bus: EventBus | None = None,
    on_item: Callable[[RegradeItem], None] | None = None,
) -> tuple[RegradePlan, list[RegradeItem]]:
    """Regrades every not-yet-regraded finished episode of the earlier version; idempotent."""
    p = plan(ws, task_name, from_hash)
    items: list[RegradeItem] = []
    for ep in p.sources:
        stored, why = _stored(ws, ep)
        if stored is None:
            item = RegradeItem(pk(ep), None, ep.reward, None, None, skipped=why)
        else:
            with session(ws.engine) as s:
                new_ep = queries.create_episode(
                    s, pk(p.new), ep.agent, attempt=ep.attempt, batch_id=f"regrade-{p.new.hash[:12]}"
                )
                endstate_store.mark_regrade(s, pk(new_ep), pk(ep))
                new_id = pk(new_ep)
            res = run_episode(
                ws, pk(p.new), NopAgent, client=client, bus=bus, episode_id=new_id, replay=stored
            )
            item = RegradeItem(pk(ep), res.episode_id, ep.reward, res.reward, res.outcome)
        items.append(item)
        if on_item is not None:
            on_item(item)
    return p, items
