"""``bandpass import`` and ``bandpass tasks``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from tui.cli import app, open_workspace


@app.command("import")
def import_cmd(
    paths: Annotated[list[Path], typer.Argument(help="Task folders, or folders that contain task folders.")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per task directory.")] = False,
) -> None:
    """Import Harbor (and Terminal-Bench 1) task directories; idempotent by content hash."""
    from engine.tasks.importer import import_paths

    ws = open_workspace()
    report = import_paths(ws, paths)
    if as_json:
        typer.echo(json.dumps([i.as_dict() for i in report.items], indent=2))
    else:
        for item in report.items:
            if item.status == "invalid":
                typer.echo(f"invalid      {item.source}")
                for p in item.problems:
                    typer.echo(f"    {p}")
            else:
                typer.echo(f"{item.status:<12} {item.name}  {item.version_hash[:12]}  ({item.origin})")
        typer.echo(
            f"{report.count('new')} new, {report.count('new_version')} new version(s), "
            f"{report.count('unchanged')} unchanged, {report.count('invalid')} invalid"
        )
    if not report.ok:
        raise typer.Exit(1)


@app.command("tasks")
def tasks_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List the workspace's tasks (latest version of each) with audit verdict and counts."""
    from store import queries
    from store.db import session

    ws = open_workspace()
    with session(ws.engine) as s:
        rows = queries.task_rows(s)
    if as_json:
        typer.echo(json.dumps([r.as_dict() for r in rows], indent=2, default=str))
        return
    if not rows:
        typer.echo(f"no tasks in {ws.root} (bandpass import PATH)")
        return
    typer.echo(
        f"{'task':<32} {'version':<12} {'category':<18} {'diff':<7} {'audit':<9} {'eps':>4} {'pass':>4}"
    )
    for r in rows:
        typer.echo(
            f"{r.name:<32} {r.version_hash[:12]:<12} {r.category[:18]:<18} {r.difficulty:<7} "
            f"{r.audit or '-':<9} {r.episodes:>4} {r.passed:>4}"
        )
