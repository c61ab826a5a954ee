"""``bandpass report`` (calibration, compare, ledger; other areas add kinds) and the gates it shares with
``bandpass export``.

``report`` is a sub-app so other areas can add report kinds (``bandpass report generation``) by
registering on ``report_app``; ``bandpass report --model M`` is shorthand for
``bandpass report calibration --model M``.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from ..cli import app, fail, open_workspace
from .options import (
    AllowWarningOpt,
    BandOpt,
    ConfidenceOpt,
    JsonOpt,
    KOpt,
    KsOpt,
    MinSamplesOpt,
    ModelOpt,
)

if TYPE_CHECKING:
    from ...engine.app.calibration import CalibrationReport
    from ...engine.app.gates import GateOptions, GateParams
    from ...engine.core.workspace import Workspace

report_app = typer.Typer(
    name="report",
    help="Reports over the workspace (default: calibration for --model).",
    invoke_without_command=True,
    no_args_is_help=False,
)
app.add_typer(report_app, name="report")


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


def gate_params(ws: Workspace, opts: GateOptions) -> GateParams:
    """The gates' parameters (``engine.app.calibration.gate_params``: flags win, then the model's own
    ``band`` in bandpass.toml, then the ``[band]`` section); a bad value is one line, exit 1."""
    from ...engine.app.gates import gate_params as resolve
    from ...engine.core.errors import InvalidInput

    try:
        return resolve(ws, opts)
    except InvalidInput as exc:
        raise fail(str(exc)) from None


def require_model(ws: Workspace, model: str | None) -> str:
    """``model``, when it has finished episodes; else one line naming the models that do, exit 1."""
    from ...engine.app.errors import NothingToRun
    from ...engine.app.export import require_model as known

    try:
        return known(ws, model)
    except NothingToRun as exc:
        raise fail(str(exc)) from None


def _record(ws: Workspace, reports: list[CalibrationReport], source: str) -> None:
    """Every decision a report shows goes into the band ledger (new evidence only)."""
    from ...engine.app.calibration import record_decisions

    record_decisions(ws, reports, source)


def _calibration(opts: GateOptions, as_json: bool, ks: str | None = None) -> None:
    from rich.console import Console

    from ...engine.app.calibration import build_report, render_report

    ws = open_workspace()
    model = require_model(ws, opts.model)
    params = gate_params(ws, opts)
    rep = build_report(ws, model, params, _parse_ks(ks))
    _record(ws, [rep], "report")
    if as_json:
        typer.echo(json.dumps(rep.as_dict(), indent=2, sort_keys=True, default=str))
        return
    Console().print(render_report(rep))


def _gates(
    model: str | None,
    k: int | None,
    band: str | None,
    min_samples: int | None,
    allow_warning: bool,
    confidence: float | None,
) -> GateOptions:
    from ...engine.app.gates import GateOptions

    return GateOptions(
        k=k,
        band=band,
        min_samples=min_samples,
        allow_warning=allow_warning,
        confidence=confidence,
        model=model,
    )


# One function serves ``bandpass report calibration`` and ``bandpass report`` itself (the group's callback,
# whose help stays the group's): the shorthand takes the same options as the command, so they are written
# once. As the callback it reports only when no sub-command follows; as the command, a Context's
# ``invoked_subcommand`` is always None. (A docstring paragraph would show in ``--help``.)
@report_app.command("calibration")
@report_app.callback()
def report_calibration(
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
    """Pass-rate histogram with the band, band decisions with their intervals, mean pass@k, reward std,
    outcomes, tags, infra codes, yield."""
    if ctx.invoked_subcommand is None:
        _calibration(_gates(model, k, band, min_samples, allow_warning, confidence), as_json, ks)


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

    from ...engine.app.calibration import compare, render_comparison

    ws = open_workspace()
    names = [m.strip() for m in models.split(",") if m.strip()]
    if not names:
        raise fail("--models: expected a comma list of model names")
    for name in names:
        require_model(ws, name)
    params = gate_params(ws, _gates(None, k, band, min_samples, False, confidence))
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
    from ...engine.app import reads
    from .filters import check_filters

    ws = open_workspace()
    check_filters(ws, task=task, model=model)  # a typo is an error naming what exists, never "no decision"
    rows = [(r.task, r.entry, r.episodes) for r in reads.ledger_rows(ws, model=model, task=task)]
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
