"""``bandpass demo``: a ready workspace of example tasks and real recorded episodes, no Docker needed.

The demo workspace is ``.bandpass-demo/`` in the repository root unless ``--workspace`` says otherwise.
It deliberately ignores ``$BANDPASS_HOME``: that names the curator's real workspace, and sample episodes
(of the ``demo-step10``/``demo-step40`` checkpoints) must never land among real results and skew a
calibration.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from ..cli import app, fail, run_tui, state

if TYPE_CHECKING:
    from ...engine.core.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
DEMO_DIR = REPO / ".bandpass-demo"
EXAMPLE_TASKS = REPO / "examples" / "tasks"
SAMPLES_DIR = REPO / "recordings" / "samples"


def prepare_demo(root: Path, *, reset: bool = False) -> tuple[Workspace, int, list[str]]:
    """Builds (or tops up) the demo workspace at ``root`` from the repository's example tasks and samples
    (``engine.app.demo.prepare``). Returns the workspace, how many episode samples were loaded now, and
    warnings."""
    from ...engine.app import demo

    made = demo.prepare(root, samples=SAMPLES_DIR, example_tasks=EXAMPLE_TASKS, reset=reset)
    return made.workspace, made.added, made.warnings


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
    """Open the demo: example tasks, two policy checkpoints' real recorded episodes, audits, tags and
    reviews; the TUI opens on the Overview (``--no-tui`` prints the same summary)."""
    from ...engine.app.overview import build_overview, overview_lines
    from ...engine.core.errors import BandpassError

    try:
        ws, added, warnings = prepare_demo(Path(workspace or state.workspace or DEMO_DIR), reset=reset)
    except BandpassError as exc:  # DemoError, a broken sample naming the file and the field
        raise fail(str(exc)) from None
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    if no_tui:
        ov = build_overview(ws)
        if as_json:
            doc = {**ov.as_dict(), "samples_loaded": added, "warnings": warnings}
            typer.echo(json.dumps(doc, sort_keys=True))
        else:
            typer.echo(f"demo: {added} sample episode{'s' * (added != 1)} loaded now")
            for line in overview_lines(ov):
                typer.echo(line)
            typer.echo("")
            typer.echo("next: bandpass demo (the TUI opens on this summary; ? lists every key)")
        return
    from ..app import BandpassApp

    run_tui(BandpassApp(ws, start="overview"))
