"""``bandpass import``: bring task directories into the workspace, idempotently, by content hash.

Each distinct content becomes a *task version* stored under ``tasks/<hash12>/<name>/`` in the workspace,
a frozen copy: results always refer to the exact files that produced them even when the source folder is
edited later. Broken directories are reported with all their problems and never stop the good ones.

**Identity.** A task is its *source and name*: a folder imported again with new content is that task's new
version; a *different* folder whose task has a name the workspace already knows is a conflict — one line
naming ``[task].name`` and both sources — never a silent new version that would hide the first task's
results. ``--namespace NS`` imports it as ``NS/name`` instead; ``--new-version`` says it really is the
known task's next version (a moved checkout, an edited export).

**Warnings.** What the loader or the Terminal-Bench converter noticed (ignored keys, conversion notes) and
what Bandpass cannot run as written are stored with the version, so ``import``, ``tasks``, the TUI and the
audit all show them.
"""

from __future__ import annotations

import re
import shutil
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

from sqlmodel import Session

from ...store import queries
from ...store.db import session
from ..core.errors import InvalidInput
from ..core.workspace import Workspace
from .taskdir import (
    TaskInvalid,
    TaskSpec,
    find_task_dirs,
    is_tb1_dir,
    load_task,
    version_hash,
)

__all__ = ["ImportItem", "ImportReport", "import_one", "import_paths"]

#: A namespace must be a Harbor org: the result ``NS/name`` is then a name Harbor accepts.
_NAMESPACE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")


@dataclass
class ImportItem:
    source: str
    name: str = ""
    status: str = ""  # new | new_version | unchanged | invalid | conflict
    version_hash: str = ""
    origin: str = "import"
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    unsupported: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, object]:
        return dict(self.__dict__)


@dataclass
class ImportReport:
    items: list[ImportItem] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for i in self.items if i.status == status)

    @property
    def ok(self) -> bool:
        return self.count("invalid") == 0 and self.count("conflict") == 0


def _spec_for(src: Path, scratch: Path) -> tuple[TaskSpec, Path, str]:
    """Returns the validated spec, the Harbor directory to store, and the origin label."""
    if is_tb1_dir(src):
        from .tb1 import convert_tb1  # PyYAML only when a TB1 task is met

        dst = scratch / src.name
        spec = convert_tb1(src, dst)
        return spec, dst, "tb1"
    return load_task(src), src, "import"


def _short(name: str) -> str:
    return name.rsplit("/", 1)[-1]


def import_one(
    ws: Workspace,
    src: Path,
    *,
    origin: str | None = None,
    namespace: str | None = None,
    new_version: bool = False,
) -> ImportItem:
    """Imports one task folder. ``namespace`` renames a conflicting task ``NS/name``; ``new_version``
    accepts a same-named task from another source as the known task's next version."""
    if namespace is not None and not _NAMESPACE.match(namespace):
        raise InvalidInput(
            f"--namespace {namespace!r}: expected letters, digits, '.', '_', '-' (a Harbor org)"
        )
    item = ItemBuilder(src)
    source = str(Path(src).resolve())
    with tempfile.TemporaryDirectory(prefix="bandpass-import-") as tmp:
        try:
            spec, harbor_dir, detected = _spec_for(src, Path(tmp))
        except TaskInvalid as exc:
            return item.invalid([str(p) for p in exc.problems])
        it = item.item
        it.name, it.origin = spec.name, origin or detected
        it.warnings, it.unsupported = list(spec.warnings), list(spec.unsupported)
        it.version_hash = version_hash(harbor_dir)
        with session(ws.engine) as s:
            if queries.version_by_hash(s, it.version_hash) is not None:
                it.status = "unchanged"
                return it
            name, conflict = _identity(s, spec.name, source, namespace=namespace, new_version=new_version)
            it.name = name
            if conflict:
                it.status, it.problems = "conflict", [conflict]
                return it
            task, created = queries.get_or_create_task(s, name, source_path=source)
            dest = ws.tasks_dir / it.version_hash[:12] / name  # leaf keeps the task name
            if dest.exists():
                shutil.rmtree(dest)
            dest.parent.mkdir(parents=True, exist_ok=True)
            shutil.copytree(
                harbor_dir, dest, ignore=shutil.ignore_patterns(".git", "__pycache__", ".DS_Store")
            )
            queries.add_task_version(
                s,
                task,
                version_hash=it.version_hash,
                path=ws.rel(dest),
                instruction=spec.instruction,
                category=spec.category or "",
                difficulty=spec.difficulty or "",
                tags=spec.tags,
                metadata=spec.metadata,
                origin=it.origin,
                warnings=spec.warnings,
                unsupported=spec.unsupported,
            )
            it.status = "new" if created else "new_version"
    return it


def _identity(
    s: Session, name: str, source: str, *, namespace: str | None, new_version: bool
) -> tuple[str, str | None]:
    """(the name to store under, a conflict line or None). A task is its source and name: the same name
    from another source is another task unless the curator says otherwise."""
    known = queries.get_task(s, name)
    if known is None or not known.source_path or known.source_path == source or new_version:
        return name, None
    if namespace is None:
        return name, (
            f"task.toml: [task].name: {name!r} is already the name of a task imported from "
            f"{known.source_path}; this folder holds different files (import it with --namespace NS to "
            f"keep both, as NS/{_short(name)}, or with --new-version if it is that task's next version)"
        )
    spaced = f"{namespace}/{_short(name)}"
    other = queries.get_task(s, spaced)
    if other is not None and other.source_path and other.source_path != source:
        return spaced, (
            f"task.toml: [task].name: {spaced!r} is taken too, by a task imported from "
            f"{other.source_path}; choose another --namespace"
        )
    return spaced, None


class ItemBuilder:
    """Holds the item being filled while one folder is imported (keeps import_one's branches short)."""

    def __init__(self, src: Path) -> None:
        self.item = ImportItem(source=str(src))
        self.src = Path(src)

    def invalid(self, problems: list[str]) -> ImportItem:
        self.item.status = "invalid"
        self.item.name = self.src.name
        self.item.problems = problems
        return self.item


def import_paths(
    ws: Workspace, paths: list[Path], *, namespace: str | None = None, new_version: bool = False
) -> ImportReport:
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
            report.items.append(import_one(ws, d, namespace=namespace, new_version=new_version))
    return report
