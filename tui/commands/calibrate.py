"""``bandpass report`` (calibration) and ``bandpass export``.

``report`` is a sub-app so other areas can add report kinds (``bandpass report generation``) by
registering on ``report_app``; ``bandpass report --model M`` is shorthand for
``bandpass report calibration --model M``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from bandpass.tui.cli import app, fail, open_workspace

if TYPE_CHECKING:
    from bandpass.engine.calibration.calibrate import GateParams
    from bandpass.engine.calibration.report import CalibrationReport
    from bandpass.engine.core.workspace import Workspace

report_app = typer.Typer(
    name="report",
    help="Reports over the workspace (default: calibration for --model).",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(report_app, name="report")

ModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Policy model (episode agent name).")]
KOpt = Annotated[int | None, typer.Option("--k", help="k of pass@k (default: bandpass.toml band.k).")]
BandOpt = Annotated[
    str | None, typer.Option("--band", help="LO:HI on pass@k, inclusive (default: bandpass.toml band.lo:hi).")
]
MinSamplesOpt = Annotated[
    int | None,
    typer.Option(
        "--min-samples",
        help="Fewer valid samples: band undecided (default: bandpass.toml band.min_samples).",
        min=1,
    ),
]
AllowWarningOpt = Annotated[
    bool,
    typer.Option("--allow-warning", help="Let tasks whose latest audit is 'warning' pass the audit gate."),
]
ConfidenceOpt = Annotated[
    float | None,
    typer.Option(
        "--confidence",
        help="Band decisions hold with this probability (default: bandpass.toml band.confidence, 0.9).",
    ),
]
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
KsOpt = Annotated[
    str | None,
    typer.Option("--ks", help="More pass@k values for --json per_task, e.g. 1,2,4,8 (1 and --k always)."),
]


def _parse_ks(text: str | None) -> list[int]:
    if not text:
        return []
    out = []
    for part in text.split(","):
        part = part.strip()
        if not part:
            continue
        if not part.isdigit() or int(part) < 1:
            raise fail(f"--ks: expected a comma list of integers >= 1, got {text}")
        out.append(int(part))
    return out


def _gate_params(
    ws: Workspace,
    *,
    k: int | None,
    band: str | None,
    min_samples: int | None,
    allow_warning: bool,
    model: str | None = None,
    confidence: float | None = None,
) -> GateParams:
    """Flags win, then the model's own ``band`` in bandpass.toml, then the ``[band]`` section."""
    from bandpass.engine.calibration.calibrate import GateParams, parse_band
    from bandpass.engine.calibration.confidence import check_confidence

    cfg = ws.config.band
    own = ws.config.models[model].band_edges() if model in ws.config.models else None
    try:
        lo, hi = parse_band(band) if band is not None else (own or (cfg.lo, cfg.hi))
    except ValueError as exc:
        raise fail(str(exc)) from None
    k = cfg.k if k is None else k
    if k < 1:
        raise fail(f"--k: expected an integer >= 1, got {k}")
    try:
        conf = check_confidence(cfg.confidence if confidence is None else confidence)
    except ValueError as exc:
        raise fail(str(exc)) from None
    return GateParams(
        lo=lo,
        hi=hi,
        k=k,
        min_samples=cfg.min_samples if min_samples is None else min_samples,
        allow_warning=allow_warning,
        confidence=conf,
    )


def _record(ws: Workspace, reports: list[CalibrationReport], source: str) -> None:
    """Every decision a report shows goes into the band ledger (new evidence only)."""
    from bandpass.engine.app.batches import config_or_none
    from bandpass.engine.calibration import ledger

    config = config_or_none(ws)  # a broken bandpass.toml: no checkpoint step recorded, nothing else
    for rep in reports:
        ledger.record(ws, rep.model, rep.estimates, rep.params, source, config)


def _require_model(ws: Workspace, model: str | None) -> str:
    from bandpass.engine.app.errors import NothingToRun
    from bandpass.engine.app.export import require_model

    try:
        return require_model(ws, model)
    except NothingToRun as exc:
        raise fail(str(exc)) from None


def _calibration(
    model: str | None,
    k: int | None,
    band: str | None,
    min_samples: int | None,
    allow_warning: bool,
    as_json: bool,
    ks: str | None = None,
    confidence: float | None = None,
) -> None:
    from rich.console import Console

    from bandpass.engine.calibration.report import build_report, render_report

    ws = open_workspace()
    model = _require_model(ws, model)
    params = _gate_params(
        ws,
        k=k,
        band=band,
        min_samples=min_samples,
        allow_warning=allow_warning,
        model=model,
        confidence=confidence,
    )
    rep = build_report(ws, model, params, _parse_ks(ks))
    _record(ws, [rep], "report")
    if as_json:
        typer.echo(json.dumps(rep.as_dict(), indent=2, sort_keys=True, default=str))
        return
    Console().print(render_report(rep))


@report_app.callback()
def report_root(
    ctx: typer.Context,
    model: ModelOpt = None,
    k: KOpt = None,
    band: BandOpt = None,
    min_samples: MinSamplesOpt = None,
    allow_warning: AllowWarningOpt = False,
    as_json: JsonOpt = False,
    ks: KsOpt = None,
    confidence: ConfidenceOpt = None,
) -> None:
    """Calibration report for --model (same as ``bandpass report calibration``)."""
    if ctx.invoked_subcommand is None:
        _calibration(model, k, band, min_samples, allow_warning, as_json, ks, confidence)


@report_app.command("calibration")
def report_calibration(
    model: ModelOpt = None,
    k: KOpt = None,
    band: BandOpt = None,
    min_samples: MinSamplesOpt = None,
    allow_warning: AllowWarningOpt = False,
    as_json: JsonOpt = False,
    ks: KsOpt = None,
    confidence: ConfidenceOpt = None,
) -> None:
    """Pass-rate histogram with the band, band decisions with their intervals, mean pass@k, reward std,
    outcomes, tags, infra codes, yield."""
    _calibration(model, k, band, min_samples, allow_warning, as_json, ks, confidence)


@report_app.command("compare")
def report_compare(
    models: Annotated[
        str,
        typer.Option(
            "--models", help="Comma list of models; a bandpass.toml series sorts by checkpoint_step."
        ),
    ],
    k: KOpt = None,
    band: BandOpt = None,
    min_samples: MinSamplesOpt = None,
    as_json: JsonOpt = False,
    confidence: ConfidenceOpt = None,
) -> None:
    """Tasks × models matrix of pass@k with each cell's band decision, mean pass@k, paired tests between
    consecutive models, and the tasks that left the band beyond noise."""
    from rich.console import Console

    from bandpass.engine.calibration.compare import compare, render_comparison

    ws = open_workspace()
    names = [m.strip() for m in models.split(",") if m.strip()]
    if not names:
        raise fail("--models: expected a comma list of model names")
    for name in names:
        _require_model(ws, name)
    params = _gate_params(
        ws, k=k, band=band, min_samples=min_samples, allow_warning=False, confidence=confidence
    )
    try:
        cmp = compare(ws, names, params, config=ws.config, band_override=band is not None)
    except ValueError as exc:
        raise fail(str(exc)) from None
    _record(ws, [cmp.reports[m] for m in cmp.models], "compare")
    if as_json:
        typer.echo(json.dumps(cmp.as_dict(), indent=2, sort_keys=True, default=str))
        return
    Console(width=max(100, 28 + 18 * len(names))).print(render_comparison(cmp))


@report_app.command("ledger")
def report_ledger(
    model: ModelOpt = None,
    task: Annotated[
        str | None, typer.Option("--task", "-t", help="One task's history (any version).")
    ] = None,
    as_json: JsonOpt = False,
) -> None:
    """The band ledger: every band decision recorded, oldest first (of one model and/or one task)."""
    from bandpass.engine.app import reads

    rows = [
        (r.task, r.entry, r.episodes) for r in reads.ledger_rows(open_workspace(), model=model, task=task)
    ]
    if as_json:
        for name, e, episodes in rows:
            d = {k: v for k, v in e.model_dump().items() if k != "episodes_json"}
            d.update(task=name, episodes=episodes)
            typer.echo(json.dumps(d, sort_keys=True, default=str))
        return
    if not rows:
        typer.echo("no band decision recorded yet (bandpass report or run --adaptive records them)")
        return
    for name, e, _episodes in rows:
        step = f"@{e.checkpoint_step}" if e.checkpoint_step is not None else ""
        typer.echo(
            f"{e.created_at:%Y-%m-%d %H:%M:%S}  {name:<28} {e.model}{step:<6} {e.decision:<9} "
            f"pass@{e.k} in [{e.pass_lo:.3f}, {e.pass_hi:.3f}] band [{e.lo:g}, {e.hi:g}] at "
            f"{e.confidence:g}  n={e.n} c={e.c} infra={e.infra_errors}  {e.source}"
        )


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
    from bandpass.engine.app.export import export_dataset
    from bandpass.engine.calibration.export import ExportError, ExportParams

    ws = open_workspace()
    model = _require_model(ws, model)
    gp = _gate_params(
        ws,
        k=k,
        band=band,
        min_samples=min_samples,
        allow_warning=allow_warning,
        model=model,
        confidence=confidence,
    )
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
        f"exported {len(result.tasks)} task(s) for {model} to {result.out_dir} "
        f"(train {splits['train']}, validation {splits['validation']}; export #{result.export_id})"
    )
    typer.echo(f"manifest sha256 {result.manifest_sha256}  ({len(result.files)} files)")
    if "traces" in params.formats:
        typer.echo(
            f"traces: {result.traces} episode(s) ({trace_filter}, {traces_schema} schema) in "
            "traces/traces.{jsonl,parquet}"
        )
    for name, hit in result.decontaminated.items():
        typer.echo(f"decontaminated: {name} ~ {hit['reference']} (similarity {hit['similarity']:.2f})")
    if result.excluded:
        typer.echo(f"excluded {len(result.excluded)} task(s):")
        for name, why in result.excluded.items():
            typer.echo(f"    {name:<32} {', '.join(why)}")
    if not result.tasks:
        typer.echo("warning: no task passed every gate; the files hold zero rows", err=True)
