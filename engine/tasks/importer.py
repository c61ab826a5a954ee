"""``bandpass import``: bring task directories into the workspace, idempotently, by content hash.

Each distinct content becomes a *task version* stored under ``tasks/<hash12>/<name>/`` in the workspace,
a frozen copy: results always refer to the exact files that produced them even when the source folder is
edited later. Broken directories are reported with all their problems and never stop the good ones.
"""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from engine.core.workspace import Workspace
from engine.tasks.taskdir import TaskInvalid, TaskSpec, find_task_dirs, is_tb1_dir, load_task, version_hash
from store import queries
from store.db import session


@dataclass
class ImportItem:
    source: str
    name: str = ""
    status: str = ""  # new | new_version | unchanged | invalid
    version_hash: str = ""
    origin: str = "import"
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class ImportReport:
    items: list[ImportItem] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for i in self.items if i.status == status)

    @property
    def ok(self) -> bool:
        return self.count("invalid") == 0


def _spec_for(src: Path, scratch: Path) -> tuple[TaskSpec, Path, str]:
    """Returns the validated spec, the Harbor directory to store, and the origin label."""
    if is_tb1_dir(src):
        from engine.tasks.tb1 import convert_tb1  # PyYAML only when a TB1 task is met

        dst = scratch / src.name
        spec = convert_tb1(src, dst)
        return spec, dst, "tb1"
    return load_task(src), src, "import"


def import_one(ws: Workspace, src: Path, *, origin: str | None = None) -> ImportItem:
    item = ImportItem(source=str(src))
    with tempfile.TemporaryDirectory(prefix="bandpass-import-") as tmp:
        try:
            spec, harbor_dir, detected = _spec_for(src, Path(tmp))
        except TaskInvalid as exc:
            item.status = "invalid"
            item.name = src.name
            item.problems = [str(p) for p in exc.problems]
            return item
        item.name = spec.name
        item.origin = origin or detected
        item.version_hash = version_hash(harbor_dir)
        with session(ws.engine) as s:
            if queries.version_by_hash(s, item.version_hash) is not None:
                item.status = "unchanged"
                return item
            task, created = queries.get_or_create_task(s, spec.name, source_path=str(src.resolve()))
            dest = ws.tasks_dir / item.version_hash[:12] / spec.name  # leaf keeps the task name
            if dest.exists():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(
                harbor_dir, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", ".DS_Store")
            )
            queries.add_task_version(
                s,
                task,
                version_hash=item.version_hash,
                path=ws.rel(dest),
                instruction=spec.instruction,
                category=spec.category or "",
                difficulty=spec.difficulty or "",
                tags=spec.tags,
                metadata=spec.metadata,
                origin=item.origin,
            )
            item.status = "new" if created else "new_version"
    return item


def import_paths(ws: Workspace, paths: list[Path]) -> ImportReport:
    report = ImportReport()
    for root in paths:
        root = Path(root)
        if not root.exists():
            report.items.append(
                ImportItem(source=str(root), status="invalid", problems=[f"{root}: no such path"])
            )
            continue
        dirs = find_task_dirs(root)
        if not dirs:
            report.items.append(
                ImportItem(
                    source=str(root),
                    status="invalid",
                    problems=[f"{root}: no task found (expected a folder with task.toml or task.yaml)"],
                )
            )
        for d in dirs:
            report.items.append(import_one(ws, d))
    return report
