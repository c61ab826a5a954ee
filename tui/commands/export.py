"""``bandpass export``: the tasks that pass every gate (audit, tags, band, duplicates, infra), written for a
trainer (harbor, verl, skyrl, jsonl, traces), with a manifest."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from ..cli import app, fail, open_workspace
from .options import (
    AllowWarningOpt,
    BandOpt,
    ConfidenceOpt,
    JsonOpt,
    KOpt,
    MinSamplesOpt,
    ModelOpt,
)
from .report import gate_params, require_model


@app.command("export")
def export_cmd(
    model: ModelOpt = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Output folder (default: exports/<model>-<band>).")
    ] = None,
    band: BandOpt = None,
    k: KOpt = None,
    formats: Annotated[
        str,
        typer.Option(
            "--format", help="Comma list of harbor,verl,skyrl,jsonl,traces (traces: episodes as chats)."
        ),
    ] = "harbor,verl,skyrl,jsonl",
    trace_filter: Annotated[
        str,
        typer.Option(
            "--filter",
            help="With --format traces: all, success (passed) or failure (the rest, infra flagged).",
        ),
    ] = "all",
    traces_schema: Annotated[
        str,
        typer.Option(
            "--traces-schema",
            help="With --format traces: bandpass (masking columns) or harbor (Harbor's traces schema).",
        ),
    ] = "bandpass",
    against: Annotated[
        list[str] | None,
        typer.Option(
            "--against",
            help="Reference task folder (a benchmark checkout); repeatable. Near-duplicates are left out.",
        ),
    ] = None,
    curriculum: Annotated[
        bool, typer.Option("--curriculum", help="Order rows easy→hard by pass rate.")
    ] = False,
    val_fraction: Annotated[
        float, typer.Option("--val-fraction", help="Validation share, 0 <= F < 1.")
    ] = 0.1,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the stratified split.")] = 0,
    min_samples: MinSamplesOpt = None,
    allow_warning: AllowWarningOpt = False,
    confidence: ConfidenceOpt = None,
    max_infra_rate: Annotated[
        float | None,
        typer.Option(
            "--max-infra-rate",
            help="Exclude tasks whose infra-error rate is above this (default: the report's warning rate).",
        ),
    ] = None,
    env_class: Annotated[str, typer.Option("--env-class", help="SkyRL env_class value.")] = "harbor",
    overwrite: Annotated[
        bool, typer.Option("--overwrite", help="Replace --out when it holds a previous Bandpass export.")
    ] = False,
    as_json: JsonOpt = False,
) -> None:
    """Export the tasks that pass every gate (audit, tags, band, duplicates, infra) for a trainer."""
    from ...engine.app.export import ExportError, ExportParams, export_dataset
    from ...engine.app.gates import GateOptions

    ws = open_workspace()
    model = require_model(ws, model)
    gp = gate_params(ws, GateOptions(k, band, min_samples, allow_warning, confidence, model))
    if max_infra_rate is not None and not 0 <= max_infra_rate <= 1:
        raise fail(f"--max-infra-rate: expected 0 <= R <= 1, got {max_infra_rate}")
    try:
        params = ExportParams(
            model=model,
            lo=gp.lo,
            hi=gp.hi,
            k=gp.k,
            formats=tuple(f.strip() for f in formats.split(",") if f.strip()),
            curriculum=curriculum,
            val_fraction=val_fraction,
            seed=seed,
            min_samples=gp.min_samples,
            allow_warning=allow_warning,
            confidence=gp.confidence,
            env_class=env_class,
            trace_filter=trace_filter,
            trace_schema=traces_schema,
            against=tuple(against or ()),
            **({} if max_infra_rate is None else {"max_infra_rate": max_infra_rate}),
        )
        result = export_dataset(ws, params, out, overwrite=overwrite)
    except ExportError as exc:
        raise fail(str(exc)) from None
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, sort_keys=True, default=str))
        return
    splits = {sp: sum(1 for t in result.tasks if t.split == sp) for sp in ("train", "validation")}
    typer.echo(
        f"exported {len(result.tasks)} task{'s' * (len(result.tasks) != 1)} for {model} to {result.out_dir} "
        f"(train {splits['train']}, validation {splits['validation']}; export #{result.export_id})"
    )
    typer.echo(f"manifest sha256 {result.manifest_sha256}  ({len(result.files)} files)")
    if "traces" in params.formats:
        typer.echo(
            f"traces: {result.traces} episode{'s' * (result.traces != 1)}"
            f" ({trace_filter}, {traces_schema} schema) in "
            "traces/traces.{jsonl,parquet}"
        )
    for name, hit in result.decontaminated.items():
        typer.echo(f"decontaminated: {name} ~ {hit['reference']} (similarity {hit['similarity']:.2f})")
    if result.excluded:
        typer.echo(f"excluded {len(result.excluded)} task{'s' * (len(result.excluded) != 1)}:")
        for name, why in result.excluded.items():
            typer.echo(f"    {name:<32} {', '.join(why)}")
    if not result.tasks:
        typer.echo("warning: no task passed every gate; the files hold zero rows", err=True)
