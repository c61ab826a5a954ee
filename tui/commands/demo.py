"""``bandpass demo``: a ready workspace of example tasks and real recorded episodes, no Docker needed.

The demo workspace is ``.bandpass-demo/`` in the repository root unless ``--workspace`` says otherwise.
It deliberately ignores ``$BANDPASS_HOME``: that names the curator's real workspace, and sample episodes
(of the ``demo-step10``/``demo-step40`` checkpoints) must never land among real results and skew a
calibration.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bandpass.engine.core.errors import BandpassError
from bandpass.tui.cli import app, fail, run_tui, state

if TYPE_CHECKING:
    from bandpass.engine.core.workspace import Workspace

REPO = Path(__file__).resolve().parents[2]
DEMO_DIR = REPO / ".bandpass-demo"
EXAMPLE_TASKS = REPO / "examples" / "tasks"
SAMPLES_DIR = REPO / "recordings" / "samples"


def prepare_demo(root: Path, *, reset: bool = False) -> tuple[Workspace, int, list[str]]:
    """Builds (or tops up) the demo workspace at ``root``: the example tasks, the sample episodes with
    their audits, tags and reviews, the generation attempts, the checkpoints' config, and the diagnoses
    (derived, so recomputed here rather than shipped). Returns the workspace, how many episode samples
    were loaded now, and warnings."""
    from bandpass.engine.audit.samples import load_samples
    from bandpass.engine.core.workspace import CONFIG_NAME, DB_NAME, Workspace
    from bandpass.engine.generator.generation_samples import load_generation_samples
    from bandpass.engine.review.diagnoser import diagnose_episodes
    from bandpass.engine.tasks.importer import import_paths

    root = Path(root).expanduser().resolve()
    if reset and root.exists():
        if any(root.iterdir()) and not (root / DB_NAME).exists():
            raise DemoError(f"--reset: {root} is not a Bandpass workspace (no {DB_NAME}); not deleting it")
        shutil.rmtree(root)
    root.mkdir(parents=True, exist_ok=True)
    if not (root / CONFIG_NAME).exists() and (SAMPLES_DIR / CONFIG_NAME).is_file():
        # The checkpoints as one training series, so Calibration's compare orders them by step.
        shutil.copyfile(SAMPLES_DIR / CONFIG_NAME, root / CONFIG_NAME)
    ws = Workspace.open(root)
    report = import_paths(ws, [EXAMPLE_TASKS])
    if not report.ok:
        bad = [i.source for i in report.items if i.status == "invalid"]
        raise DemoError(f"example tasks failed to import: {', '.join(bad)}")
    warnings: list[str] = []
    added = load_samples(ws, SAMPLES_DIR, on_warning=warnings.append)
    load_generation_samples(ws, SAMPLES_DIR, on_warning=warnings.append)
    diagnose_episodes(ws, missing_only=True)
    return ws, added, warnings


class DemoError(BandpassError, RuntimeError):
    """The demo workspace cannot be prepared; the message says why."""


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
    from bandpass.engine.audit.samples import SampleError
    from bandpass.engine.calibration.overview import build_overview, overview_lines
    from bandpass.engine.generator.generation_samples import GenerationSampleError

    try:
        ws, added, warnings = prepare_demo(Path(workspace or state.workspace or DEMO_DIR), reset=reset)
    except (DemoError, SampleError, GenerationSampleError) as exc:  # each names the file and the field
        raise fail(str(exc)) from None
    for w in warnings:
        typer.echo(f"warning: {w}", err=True)
    if no_tui:
        ov = build_overview(ws)
        if as_json:
            doc = {**ov.as_dict(), "samples_loaded": added, "warnings": warnings}
            typer.echo(json.dumps(doc, sort_keys=True))
        else:
            typer.echo(f"demo: {added} sample episode(s) loaded now")
            for line in overview_lines(ov):
                typer.echo(line)
            typer.echo("")
            typer.echo("next: bandpass demo (the TUI opens on this summary; ? lists every key)")
        return
    from bandpass.tui.app import BandpassApp

    run_tui(BandpassApp(ws, start="overview"))
