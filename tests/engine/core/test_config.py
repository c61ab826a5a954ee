"""bandpass.toml: defaults, a full file, and errors that name section, key and expectation."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandpass.engine.core.config import ConfigError, load_config


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


def test_every_invalid_value_is_reported_with_its_key(tmp_path: Path) -> None:
    """A value of the right type that no run can use is a problem too, and all of them come at once."""
    p = tmp_path / "bandpass.toml"
    p.write_text(
        '[models.a]\nmax_tokens = 0\ntemperature = -1\nbase_url = "localhost:8000"\ncheckpoint_step = -5\n'
        '[images.aliases]\n"ubuntu:24.04" = 3\n'
        "[band]\nk = 0\nmin_samples = -3\nlo = 1.5\n"
    )
    with pytest.raises(ConfigError) as err:
        load_config(p)
    problems = err.value.problems
    for expected in (
        "[models.a].max_tokens: expected an integer >= 1, got 0",
        "[models.a].temperature: expected a number between 0 and 2, got -1",
        "[models.a].base_url: expected an http:// or https:// URL, got 'localhost:8000'",
        "[models.a].checkpoint_step: expected an integer >= 0, got -5",
        '[images.aliases]."ubuntu:24.04": expected a local image name, got 3',
        "[band].k: expected an integer >= 1, got 0",
        "[band].min_samples: expected an integer >= 1, got -3",
        "[band].lo: expected a number between 0 and 1, got 1.5",
    ):
        assert expected in problems, problems
    assert not any("--k" in m for m in problems)


def test_checkpoint_series(tmp_path: Path) -> None:
    p = tmp_path / "bandpass.toml"
    p.write_text('[models.q-step20]\nserved_name = "q"\nseries = "grpo-run"\ncheckpoint_step = 20\n')
    m = load_config(p).models["q-step20"]
    assert (m.series, m.checkpoint_step) == ("grpo-run", 20)


def test_ray_address_defaults_to_auto_and_refuses_ray_client(tmp_path: Path) -> None:
    p = tmp_path / "bandpass.toml"
    assert load_config(p).ray.address == "auto"
    p.write_text('[ray]\naddress = "10.0.0.5:6379"\n')
    assert load_config(p).ray.address == "10.0.0.5:6379"
    p.write_text('[ray]\naddress = "ray://head:10001"\nport = 1\n')
    with pytest.raises(ConfigError) as err:
        load_config(p)
    msg = str(err.value)
    assert "[ray].address: expected auto or HOST:PORT (the GCS address; ray:// is not supported)" in msg
    assert "[ray].port: unknown key" in msg
