"""One source for each default: the band, the gates' thresholds and the Settings template all come from
the engine's own definitions, so changing a default in one place changes it everywhere a curator sees."""

from __future__ import annotations

from dataclasses import asdict

from bandpass.engine.calibration.calibrate import DUPLICATE_THRESHOLD, INFRA_WARN_RATE, GateParams
from bandpass.engine.calibration.export import ExportParams
from bandpass.engine.core.config import BandConfig, GeneratorConfig
from bandpass.tui.screens.settings import TEMPLATE, parse_config_text


def test_gates_and_export_default_to_the_configured_band() -> None:
    band = asdict(BandConfig())
    gate, export = GateParams(), ExportParams(model="m")
    assert {k: getattr(gate, k) for k in band} == band
    assert {k: getattr(export, k) for k in band} == band
    assert export.gate_params().as_dict() == gate.as_dict()
    assert (export.duplicate_threshold, export.max_infra_rate) == (DUPLICATE_THRESHOLD, INFRA_WARN_RATE)


def test_settings_template_is_the_engine_defaults() -> None:
    cfg = parse_config_text(TEMPLATE)
    assert cfg.band == BandConfig()
    assert f'# model = "{GeneratorConfig().model}"' in TEMPLATE
