"""The option types more than one command takes, declared once (typer ``Annotated`` aliases).

Why: the same flag spelled, typed and explained once reads the same in every ``--help`` and cannot drift
between commands (``report`` and ``export`` share the band's whole block). A command whose flag means
something else (``run --band`` is the adaptive sampler's band) keeps its own declaration. Imported at
start-up by the command modules: typer only, nothing of the engine.
"""

from __future__ import annotations

from typing import Annotated

import typer

#: ``--json`` as most listings and reports spell it.
JsonOpt = Annotated[bool, typer.Option("--json", help="Machine-readable output.")]
#: An episode id as a command's argument.
EpisodeArg = Annotated[int, typer.Argument(help="Episode id.")]
#: Listings of failures leave the audit's own probe episodes out unless asked.
ProbesOpt = Annotated[bool, typer.Option("--probes", help="Include the audit's oracle/nop/cheat episodes.")]
#: Generation listings and reports: one generator model.
GeneratorModelOpt = Annotated[str | None, typer.Option("--model", "-m", help="Only this generator model.")]

# --- the gates: ``report`` (calibration, compare) and ``export`` (engine.app.calibration.GateOptions) ---
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
KsOpt = Annotated[
    str | None,
    typer.Option("--ks", help="More pass@k values for --json per_task, e.g. 1,2,4,8 (1 and --k always)."),
]
