"""``bandpass import`` and ``bandpass tasks``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ...engine.core.plural import counted
from ..cli import app, fail, open_workspace


def _undo_new_workspace(ws: object, root: Path, missing: bool) -> None:
    """Removes what this command created in a folder that was missing or empty before, so an import that
    brought nothing in has no side effect (no workspace left behind)."""
    import shutil

    engine = getattr(ws, "engine", None)
    if engine is not None:
        engine.dispose()
    for child in list(root.iterdir()):
        if child.is_dir():
            shutil.rmtree(child)
        else:
            child.unlink()
    if missing:
        root.rmdir()


@app.command("import")
def import_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Task folders, or folders that contain task folders.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per task directory.")] = False,
    namespace: Annotated[
        str | None,
        typer.Option("--namespace", help="Import a task whose name is taken by another source as NS/name."),
    ] = None,
    new_version: Annotated[
        bool,
        typer.Option("--new-version", help="A task whose name is known is that task's next version."),
    ] = False,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Counts of warnings, not their text.")] = False,
) -> None:
    """Import Harbor (and Terminal-Bench 1) task directories; idempotent by content hash.

    Every warning (keys Bandpass ignores, Terminal-Bench conversion notes) and everything Bandpass cannot
    run as written is printed under its task and kept with the version. Exits 1 if a folder was invalid
    or its name conflicts with another source's task.
    """
    from ...engine.app.tasks import import_paths
    from ...engine.core.workspace import resolve_root
    from ..cli import state

    root = resolve_root(state.workspace)
    missing = not root.exists()
    made_here = missing or (root.is_dir() and not any(root.iterdir()))
    ws = open_workspace(create=True)
    try:
        report = import_paths(ws, paths, namespace=namespace, new_version=new_version)
    except ValueError as exc:
        if made_here:
            _undo_new_workspace(ws, root, missing)
        raise fail(str(exc)) from None
    if made_here and not any(i.status not in ("invalid", "conflict") for i in report.items):
        _undo_new_workspace(ws, root, missing)  # a failed import leaves no workspace behind
    if as_json:
        typer.echo(json.dumps([i.as_dict() for i in report.items], indent=2))
    else:
        for item in report.items:
            if item.status in ("invalid", "conflict"):
                typer.echo(f"{item.status:<12} {item.source}")
                for p in item.problems:
                    typer.echo(f"    {p}")
                continue
            typer.echo(f"{item.status:<12} {item.name}  {item.version_hash[:12]}  ({item.origin})")
            if quiet:
                if item.warnings or item.unsupported:
                    typer.echo(
                        f"    {counted(len(item.warnings), 'warning')}, {len(item.unsupported)} unsupported"
                    )
                continue
            for u in item.unsupported:
                typer.echo(f"    unsupported: {u}")
            for w in item.warnings:
                typer.echo(f"    warning: {w}")
        warned = sum(1 for i in report.items if i.warnings or i.unsupported)
        typer.echo(
            f"{report.count('new')} new, {counted(report.count('new_version'), 'new version')}, "
            f"{report.count('unchanged')} unchanged, {report.count('invalid')} invalid, "
            f"{counted(report.count('conflict'), 'conflict')}; {warned} with warnings"
        )
    if not report.ok:
        raise typer.Exit(1)


@app.command("tasks")
def tasks_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Each task's warnings, in full.")] = False,
) -> None:
    """List the workspace's tasks (latest version of each) with audit verdict, counts and warnings."""
    from ...engine.app import reads

    ws = open_workspace()
    rows = reads.task_rows(ws)
    if as_json:
        typer.echo(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
        return
    if not rows:
        typer.echo(f"no tasks in {ws.root} (bandpass import PATH)")
        return
    nw = max(32, *(len(r.name) for r in rows))  # a long imported name widens the column, never shifts a row
    cw = max(18, *(len(r.category) for r in rows))
    typer.echo(
        f"{'task':<{nw}} {'version':<12} {'category':<{cw}} {'diff':<7} {'audit':<15} {'eps':>4} {'pass':>4}"
        f" {'warn':>4}  verified"
    )
    for r in rows:
        warn = len(r.warnings) + len(r.unsupported)
        typer.echo(
            f"{r.name:<{nw}} {r.version_hash[:12]:<12} {r.category:<{cw}} {r.difficulty:<7} "
            f"{r.audit or '-':<15} {r.episodes:>4} {r.passed:>4} {warn or '':>4}  {reads.verified_label(r)}"
        )
    if verbose:
        for r in rows:
            if r.adopted_artifacts:  # what its oracle showed the verifier reads outside the declared ones
                typer.echo(f"{r.name}: adopted artifacts: {', '.join(r.adopted_artifacts)}")
            if r.footprint.get("why"):
                typer.echo(f"{r.name}: verified: {r.footprint['why']}")
            for u in r.unsupported:
                typer.echo(f"{r.name}: unsupported: {u}")
            for w in r.warnings:
                typer.echo(f"{r.name}: warning: {w}")
    elif any(r.warnings or r.unsupported for r in rows):
        typer.echo("(warn: the import's warnings and unsupported features; bandpass tasks -v lists them)")
    if not verbose and any(r.adopted_artifacts for r in rows):
        typer.echo(
            "(adopted: artifacts the oracle needs outside the declared ones; bandpass tasks -v names them)"
        )
