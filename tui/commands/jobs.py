"""``bandpass import-jobs DIR...``: Harbor job results in, as episodes (engine/tasks/harbor_jobs.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ...engine.core.plural import counted
from ..cli import app, open_workspace


@app.command("import-jobs")
def import_jobs_cmd(
    paths: Annotated[
        list[Path], typer.Argument(help="Harbor job directories, or folders of them (e.g. jobs/).")
    ],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object with every trial.")] = False,
) -> None:
    """Import Harbor job results: each trial becomes a finished episode (idempotent per trial).

    Exits 1 if any trial or directory could not be imported (the others are imported anyway).
    """
    from ...engine.app.tasks import import_jobs

    ws = open_workspace(create=True)
    res = import_jobs(ws, paths)
    if as_json:
        typer.echo(json.dumps(res.as_dict(), indent=2, sort_keys=True))
    else:
        for t in res.trials:
            if t.status == "imported":
                typer.echo(
                    f"imported  {t.trial}  -> episode {t.episode_id}  {t.task}  {t.agent}  {t.outcome}"
                )
            elif t.status == "unchanged":
                typer.echo(f"unchanged {t.trial}  (episode {t.episode_id})")
        for w in res.warnings:
            typer.echo(f"warning: {w}", err=True)
        for t in res.trials:
            if t.status == "error":
                typer.echo(f"error: {t.message}", err=True)
        for e in res.errors:
            typer.echo(f"error: {e}", err=True)
        if res.unknown_exceptions:
            listed = ", ".join(f"{k} ×{n}" for k, n in res.unknown_exceptions.items())
            typer.echo(
                f"unknown Harbor exception types kept as infra_error:<Type> (not samples): {listed}", err=True
            )
        usage = [t.usage for t in res.trials if t.usage]
        spent = ""
        if usage:
            tokens_in = sum(u.get("n_input_tokens", 0) for u in usage)
            tokens_out = sum(u.get("n_output_tokens", 0) for u in usage)
            costs = [u["cost_usd"] for u in usage if u.get("cost_usd") is not None]
            spent = f"; agents used {tokens_in:,} input / {tokens_out:,} output tokens"
            spent += f", ${sum(costs):.2f}" if costs else ""
        typer.echo(
            f"{counted(len(res.jobs), 'job')}: {counted(res.count('imported'), 'trial')} imported, "
            f"{res.count('unchanged')} already there, {res.count('error')} failed{spent}"
        )
    if not res.ok:
        raise typer.Exit(1)
