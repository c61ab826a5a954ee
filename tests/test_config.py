"""bandpass.toml: defaults, a full file, and errors that name section, key and expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.core.config import ConfigError, load_config


def test_missing_file_means_defaults(tmp_path: Path) -> None:
    cfg = load_config(tmp_path / "bandpass.toml")
    assert cfg.models == {} and (cfg.band.lo, cfg.band.hi, cfg.band.k) == (0.1, 0.9, 2)


def test_full_file(tmp_path: Path) -> None:
    p = tmp_path / "bandpass.toml"
    p.write_text(
        """
[models.qwen]
base_url = "http://127.0.0.1:8000/v1"
served_name = "Qwen/Qwen3-8B"
temperature = 0.6
context_window = 32768

[generator]
model = "claude-sonnet-4-5"

[images.aliases]
"ubuntu:24.04" = "bandpass/base:bookworm"

[band]
lo = 0.2
hi = 0.8
k = 4
"""
    )
    cfg = load_config(p)
    m = cfg.models["qwen"]
    assert (m.served_name, m.temperature, m.max_tokens) == ("Qwen/Qwen3-8B", 0.6, 2048)
    assert cfg.image_aliases == {"ubuntu:24.04": "bandpass/base:bookworm"}
    assert (cfg.band.lo, cfg.band.hi, cfg.band.k) == (0.2, 0.8, 4)


def test_errors_name_section_key_and_expectation(tmp_path: Path) -> None:
    p = tmp_path / "bandpass.toml"
    p.write_text('[models.x]\ntemperature = "hot"\nurl = "x"\n[band]\nlo = 0.9\nhi = 0.1\n[bogus]\n')
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert "bandpass.toml: [models.x].temperature: expected int or float, got 'hot'" in msg
    assert "[models.x].url: unknown key" in msg
    assert "[band]: expected 0 <= lo <= hi <= 1" in msg
    assert "[bogus]: unknown section" in msg


def test_bad_toml_is_reported_with_the_file(tmp_path: Path) -> None:
    p = tmp_path / "bandpass.toml"
    p.write_text("[band\n")
    with pytest.raises(ConfigError, match=r"bandpass.toml: not valid TOML \(.*line 1"):
        load_config(p)
