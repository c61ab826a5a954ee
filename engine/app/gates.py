"""The gates' parameters, as a curator sets them: what ``bandpass report`` (calibration, compare) and
``bandpass export`` share.

Why here: the band a report or an export uses — the flags first, then the model's own ``band`` in
bandpass.toml, then ``[band]`` — was resolved in the command; :func:`gate_params` is the one place, and a
bad value is ``InvalidInput`` (one line). Apart from :mod:`engine.app.calibration` so that ``export``
resolves its gates without loading the report and the comparison.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..calibration.calibrate import GateParams, parse_band
from ..calibration.confidence import check_confidence
from ..core.errors import InvalidInput

if TYPE_CHECKING:
    from ..core.workspace import Workspace

__all__ = ["GateOptions", "GateParams", "gate_params"]


@dataclass(frozen=True)
class GateOptions:
    """What a curator set for the gates (None: not set, bandpass.toml decides)."""

    k: int | None = None
    #: ``LO:HI`` on pass@k.
    band: str | None = None
    min_samples: int | None = None
    allow_warning: bool = False
    confidence: float | None = None
    #: Whose band applies when ``band`` is not set (the model's own ``band`` in bandpass.toml).
    model: str | None = None


def gate_params(ws: Workspace, opts: GateOptions) -> GateParams:
    """The gates' parameters: the options win, then the model's own ``band`` in bandpass.toml, then the
    ``[band]`` section. Raises ``InvalidInput`` for a band, k or confidence that cannot be."""
    cfg = ws.config.band
    models = ws.config.models
    own = models[opts.model].band_edges() if opts.model in models else None
    try:
        lo, hi = parse_band(opts.band) if opts.band is not None else (own or (cfg.lo, cfg.hi))
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    k = cfg.k if opts.k is None else opts.k
    if k < 1:
        raise InvalidInput(f"--k: expected an integer >= 1, got {k}")
    try:
        conf = check_confidence(cfg.confidence if opts.confidence is None else opts.confidence)
    except ValueError as exc:
        raise InvalidInput(str(exc)) from None
    return GateParams(
        lo=lo,
        hi=hi,
        k=k,
        min_samples=cfg.min_samples if opts.min_samples is None else opts.min_samples,
        allow_warning=opts.allow_warning,
        confidence=conf,
    )
