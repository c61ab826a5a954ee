"""``bandpass generations``: every generation attempt, and ``generations show ID``: one read turn by turn.

The list answers "what happened overnight" (outcome, reason, turns, tokens, cost, wall time per attempt);
``show`` answers "why": the transcript as :mod:`engine.app.generate` reads it — the same reading
the TUI's Generation screen shows.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ..cli import app, fail, open_workspace

generations_app = typer.Typer(
    help="List generation attempts; `show ID` prints one transcript turn by turn.",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(generations_app, name="generations")

OUTCOMES = ("running", "accepted", "rejected", "budget_exhausted", "error", "cancelled")


@generations_app.callback()
def generations_list(
    ctx: typer.Context,
    prompt: Annotated[str | None, typer.Option("--prompt", help="Only this prompt version.")] = None,
    outcome: Annotated[
        str | None, typer.Option("--outcome", help=f"Only this outcome: {'|'.join(OUTCOMES)}.")
    ] = None,
    model: Annotated[str | None, typer.Option("--model", "-m", help="Only this generator model.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Attempts, oldest first: id, prompt version, model, outcome, reason, turns, tokens, cost, wall time."""
    if ctx.invoked_subcommand is not None:
        return
    if outcome is not None and outcome not in OUTCOMES:
        raise fail(f"--outcome: expected one of {', '.join(OUTCOMES)}, got {outcome!r}", code=2)
    from ...engine.app import prices as pricing
    from ...engine.app import reads

    ws = open_workspace()
    prices = pricing.prices(ws)
    rows: list[dict[str, Any]] = [
        {
            "id": g.id,
            "prompt_version": g.prompt_version,
            "model": g.model,
            "outcome": g.outcome,
            "reason": g.reason,
            "detail": g.detail,
            "turns": g.turns,
            "tokens_in": g.tokens_in,
            "tokens_out": g.tokens_out,
            "lost_tokens_in": g.lost_tokens_in,
            "lost_tokens_out": g.lost_tokens_out,
            "cost_usd": g.cost_usd if prices.known(g.model) else None,  # unknown, never $0
            "wall_s": g.wall_s,
            "api_retries": g.api_retries,
            "task_version_id": g.task_version_id,
            "created_at": g.created_at.isoformat(timespec="seconds") if g.created_at else None,
        }
        for g in reads.generations(ws, prompt_version=prompt, model=model, outcome=outcome)
    ]
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title=f"Generation attempts ({len(rows)})")
    for col in (
        "id",
        "prompt",
        "model",
        "outcome",
        "reason",
        "turns",
        "tokens in/out",
        "cost $",
        "wall s",
        "retries",
    ):
        t.add_column(
            col, justify="right" if col in ("id", "turns", "cost $", "wall s", "retries") else "left"
        )
    for r in rows:
        t.add_row(
            str(r["id"]),
            r["prompt_version"],
            r["model"],
            r["outcome"],
            r["reason"] or "-",
            str(r["turns"]),
            f"{r['tokens_in']}/{r['tokens_out']}",
            "unknown" if r["cost_usd"] is None else f"{r['cost_usd']:.4f}",
            f"{r['wall_s']:.0f}",
            str(r["api_retries"]),
        )
    Console(width=200).print(t)
    for r in rows:
        if r["detail"] and r["outcome"] in ("error", "budget_exhausted"):
            typer.echo(f"  {r['id']}: {r['detail']}")


@generations_app.command("show")
def generations_show(
    generation_id: Annotated[int, typer.Argument(help="Generation id (see `bandpass generations`).")],
    as_json: Annotated[bool, typer.Option("--json", help="The turn-by-turn reading as JSON.")] = False,
    full: Annotated[bool, typer.Option("--full", help="Tool results whole, not cut.")] = False,
) -> None:
    """One attempt turn by turn: text, tool calls and results, audits, retries, errors, message ids."""
    from ...engine.app import reads
    from ...engine.app.generate import read_transcript, render_lines
    from ...engine.app.prices import price_known

    ws = open_workspace()
    g = reads.generation(ws, generation_id)
    if g is None:
        raise fail(f"generation {generation_id} does not exist (see `bandpass generations`)")
    view = read_transcript(g, cost_known=price_known(ws, g.model))
    if as_json:
        typer.echo(json.dumps(view.as_dict(), indent=2, default=str))
        return
    for _style, line in render_lines(view, full=full):
        typer.echo(line)
