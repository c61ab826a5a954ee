"""``bandpass diagnose`` and ``clusters``: why episodes failed, and the failures grouped by signature.

Same application-layer functions as the Tag queue's diagnosis and cluster view (``engine.app.diagnosis``,
``engine.app.episodes``).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated

import typer

from ..cli import app, fail, open_workspace
from .filters import check_filters

if TYPE_CHECKING:
    pass


@app.command("diagnose")
def diagnose_cmd(
    episodes: Annotated[
        list[int] | None, typer.Argument(help="Episode ids (default: those not yet diagnosed).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Diagnose every finished episode again.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the diagnoses of the given episodes as JSON.")
    ] = False,
) -> None:
    """Diagnose finished episodes: a suggested tag, a confidence and evidence (stored; shown by show)."""
    from ...engine.app import reads
    from ...engine.app.diagnosis import diagnose_episodes

    ws = open_workspace()
    if episodes and all_:
        raise fail("give episode ids or --all, not both")
    if episodes:
        known = set(reads.finished_episode_ids(ws))
        missing = [e for e in episodes if e not in known]
        if missing:
            raise fail(f"not a finished episode: {', '.join(map(str, missing))} (see bandpass episodes)")
    t0 = time.perf_counter()
    n = diagnose_episodes(ws, episodes or None, missing_only=not (episodes or all_))
    took = time.perf_counter() - t0
    if as_json and episodes:
        from ...engine.app.episodes import episode_record

        out = [{"episode": e, **(episode_record(ws, e)["diagnosis"] or {})} for e in episodes]
        typer.echo(json.dumps(out, indent=2))
        return
    typer.echo(f"diagnosed {n} episode{'s' * (n != 1)} in {took:.2f} s")
    if episodes:
        from ...engine.app.episodes import episode_record

        for e in episodes:
            d = episode_record(ws, e)["diagnosis"] or {}
            tag = f" → {d['tag']}" if d.get("tag") else ""
            typer.echo(
                f"{e:>6} {d.get('code', '')} ({d.get('confidence', 0):.0%}){tag}: {d.get('summary', '')}"
            )


@app.command("clusters")
def clusters_cmd(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Only this task's failures.")] = None,
    probes: Annotated[
        bool, typer.Option("--probes", help="Include the audit's oracle/nop/cheat episodes.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Failures grouped by signature (task version, outcome, failing checks or diagnosis + last error).
    A cluster's id is the same in the tag queue (`bandpass queue --cluster ID`) and the reviewer
    (`bandpass review --cluster ID`)."""
    from ...engine.app.diagnosis import load_clusters

    ws = open_workspace()
    check_filters(ws, task=task)
    cl = load_clusters(ws, task=task, include_probes=probes)
    if as_json:
        typer.echo(json.dumps([c.as_dict() for c in cl], indent=2))
        return
    if not cl:
        typer.echo("no failures" + (f" for task {task}" if task else ""))
        return
    from ...engine.app.diagnosis import describe_signature as describe

    typer.echo(f"{'id':<10} {'size':>5} {'rep':>6} {'task':<24} {'diagnosis':<36} signature")
    for c in cl:
        label = c.verdict.label if c.verdict else c.code
        typer.echo(
            f"{c.id:<10} {c.size:>5} {c.representative.episode_id:>6} {c.task[:24]:<24} {label[:36]:<36} "
            f"{describe(c.signature)[:90]}"
        )
    n = sum(c.size for c in cl)
    typer.echo(f"{len(cl)} cluster{'s' * (len(cl) != 1)}, {n} failure{'s' * (n != 1)}")
