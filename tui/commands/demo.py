"""``bandpass demo``: a ready workspace of example tasks and real recorded episodes, no Docker needed.

The demo workspace is ``.bandpass-demo/`` in the repository root unless ``--workspace`` says otherwise.
It deliberately ignores ``$BANDPASS_HOME``: that names the curator's real workspace, and sample episodes
(whose model is ``demo-policy``) must never land among real results and skew a calibration.
"""

from __future__ import annotations

import json
import shutil
from collections import Counter
from pathlib import Path
from typing import Annotated

import typer

from tui.cli import app, fail, state

REPO = Path(__file__).resolve().parents[2]
DEMO_DIR = REPO / ".bandpass-demo"
EXAMPLE_TASKS = REPO / "examples" / "tasks"
SAMPLES_DIR = REPO / "recordings" / "samples"


@app.command("demo")
def demo_cmd(
    workspace: Annotated[
        Path | None,
        typer.Option(
            "--workspace", "-w", help="Demo workspace folder (default: .bandpass-demo/ in the repo)."
        ),
    ] = None,
    reset: Annotated[
        bool, typer.Option("--reset", help="Delete the demo workspace first and rebuild it.")
    ] = False,
    no_tui: Annotated[
        bool, typer.Option("--no-tui", help="Prepare and print a summary; do not open the TUI.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="With --no-tui: the summary as JSON.")] = False,
) -> None:
    """Open the demo: example tasks plus real sample episodes (pass, fail, harness and infra errors)."""
    from engine.audit.samples import load_samples
    from engine.core.workspace import DB_NAME, Workspace
    from engine.tasks.importer import import_paths
    from store import queries
    from store.db import session

    root = Path(workspace or state.workspace or DEMO_DIR).expanduser().resolve()
    if reset and root.exists():
        if any(root.iterdir()) and not (root / DB_NAME).exists():
            raise fail(f"--reset: {root} is not a Bandpass workspace (no {DB_NAME}); not deleting it")
        shutil.rmtree(root)
    ws = Workspace.open(root)
    report = import_paths(ws, [EXAMPLE_TASKS])
    if not report.ok:
        bad = [i.source for i in report.items if i.status == "invalid"]
        raise fail(f"example tasks failed to import: {', '.join(bad)}")
    warnings: list[str] = []
    added = load_samples(ws, SAMPLES_DIR, on_warning=warnings.append)
    with session(ws.engine) as s:
        rows = queries.task_rows(s)
        eps = queries.episodes(s, status="done")
    summary = {
        "workspace": str(ws.root),
        "tasks": len(rows),
        "tasks_new": report.count("new") + report.count("new_version"),
        "samples_loaded": added,
        "episodes": len(eps),
        "outcomes": dict(sorted(Counter(e.outcome for e in eps).items())),
        "warnings": warnings,
    }
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    if no_tui:
        if as_json:
            typer.echo(json.dumps(summary, sort_keys=True))
        else:
            typer.echo(
                f"demo workspace {ws.root}: {summary['tasks']} tasks, {summary['episodes']} episodes "
                f"({added} sample(s) loaded now)"
            )
            for outcome, n in summary["outcomes"].items():
                typer.echo(f"  {n:>3}  {outcome}")
        return
    from tui.app import BandpassApp

    BandpassApp(ws).run()
