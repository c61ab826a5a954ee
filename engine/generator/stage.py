"""Auditing a task folder *before* it is accepted: a throwaway staging workspace per generation.

``engine.audit.task_audit.audit_version`` audits an imported version, with its episodes, casts and image
builds in
a workspace's database. A generated task must not enter the curator's workspace until it is accepted,
so each generation imports its scratch folder into a private staging workspace and audits there. The
staging workspace copies the real one's ``bandpass.toml`` (image aliases), and because the task folder is
named by its ``[task] name`` in both, the image tag built while staging is the one the real workspace
uses later: nothing is rebuilt after acceptance.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import docker

from ...store import queries
from ...store.db import session
from ..audit.task_audit import AuditReport, audit_version
from ..core.errors import BandpassError
from ..core.events import EventBus
from ..core.workspace import CONFIG_NAME, Workspace
from ..run.episode import ensure_image
from ..tasks.images import BuildResult
from ..tasks.importer import import_one
from ..tasks.taskdir import TaskInvalid, TaskSpec, load_task, version_hash


class StageError(BandpassError, RuntimeError):
    """The folder could not be staged: invalid task (``problems`` lists all), or import failed."""

    def __init__(self, message: str, problems: list[str] | None = None) -> None:
        self.problems = problems or []
        super().__init__(message)


@dataclass
class Staged:
    version_id: int
    version_hash: str
    spec: TaskSpec


class StageWorkspace:
    """A private workspace at ``root`` mirroring ``real``'s configuration."""

    def __init__(self, real: Workspace, root: Path) -> None:
        root.mkdir(parents=True, exist_ok=True)
        if real.config_path.is_file():
            shutil.copy2(real.config_path, root / CONFIG_NAME)
        self.ws = Workspace.open(root)

    def stage(self, task_dir: Path) -> Staged:
        """Imports the folder's current content (idempotent per content hash) and returns its version."""
        try:
            load_task(task_dir)
        except TaskInvalid as exc:
            raise StageError(
                "the task folder is not a valid Harbor task", [str(p) for p in exc.problems]
            ) from exc
        item = import_one(self.ws, task_dir, origin="generated")
        if item.status == "invalid":
            raise StageError("the task folder is not a valid Harbor task", item.problems)
        with session(self.ws.engine) as s:
            version = queries.version_by_hash(s, item.version_hash)
            assert version is not None and version.id is not None
            vid, path = version.id, version.path
        return Staged(vid, item.version_hash, load_task(self.ws.abs(path)))

    def build(self, staged: Staged, client: docker.DockerClient, bus: EventBus | None = None) -> BuildResult:
        """Builds (or finds cached) the staged version's image; the tag is the real workspace's too."""
        with session(self.ws.engine) as s:
            version = queries.get_version(s, staged.version_id)
        assert version is not None
        return ensure_image(self.ws, client, version, staged.spec, bus)

    def audit(
        self,
        task_dir: Path,
        *,
        reruns: int = 2,
        client: docker.DockerClient | None = None,
        bus: EventBus | None = None,
    ) -> tuple[Staged, AuditReport]:
        staged = self.stage(task_dir)
        return staged, audit_version(self.ws, staged.version_id, reruns=reruns, client=client, bus=bus)

    def remove(self) -> None:
        self.ws.engine.dispose()
        shutil.rmtree(self.ws.root, ignore_errors=True)


def audit_dir(
    ws: Workspace,
    path: Path,
    *,
    stage_root: Path,
    reruns: int = 2,
    client: docker.DockerClient | None = None,
    bus: EventBus | None = None,
    keep: bool = False,
) -> AuditReport:
    """Audits a task folder that is not (yet) part of ``ws``; the staging workspace is removed unless
    ``keep``. The report's ``version_hash`` equals the hash the folder will have once imported."""
    stage = StageWorkspace(ws, stage_root)
    try:
        _, report = stage.audit(Path(path), reruns=reruns, client=client, bus=bus)
        return report
    finally:
        if not keep:
            stage.remove()


def current_hash(task_dir: Path) -> str:
    return version_hash(task_dir)
