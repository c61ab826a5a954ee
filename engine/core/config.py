"""The workspace's optional ``bandpass.toml``: policy models, generator, image aliases, band defaults.

Parsed into plain dataclasses with every problem reported as ``bandpass.toml: [section].key: expected ...``
so a curator can fix the file without reading code. Unknown sections are errors (a typo silently ignored
would run rollouts against the wrong endpoint).
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


class ConfigError(ValueError):
    def __init__(self, path: Path, problems: list[str]) -> None:
        self.path = path
        self.problems = problems
        super().__init__("; ".join(f"{path.name}: {p}" for p in problems))


@dataclass
class PolicyModelConfig:
    """One policy model. ``context_window`` None means "what the server reports" (vLLM's
    ``max_model_len`` in ``/v1/models``): a window configured in two places is how limits drift apart.
    ``model_path`` is what ``policy serve`` loads (a local folder or hub id); ``served_name`` is the name
    requests use; each defaults to the other, as in ``vllm serve``."""

    name: str
    base_url: str = "http://127.0.0.1:8000/v1"
    served_name: str = ""
    temperature: float = 0.7
    max_tokens: int = 2048
    context_window: int | None = None
    api_key_env: str = "VLLM_API_KEY"
    model_path: str = ""

    def __post_init__(self) -> None:
        if not self.served_name:
            self.served_name = self.name
        if not self.model_path:
            self.model_path = self.served_name


@dataclass
class GeneratorConfig:
    model: str = "claude-sonnet-4-5"
    api_key_env: str = "ANTHROPIC_API_KEY"
    base_url: str | None = None


@dataclass
class BandConfig:
    lo: float = 0.1
    hi: float = 0.9
    k: int = 2
    min_samples: int = 4


@dataclass
class Config:
    models: dict[str, PolicyModelConfig] = field(default_factory=dict)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    image_aliases: dict[str, str] = field(default_factory=dict)
    band: BandConfig = field(default_factory=BandConfig)


_MODEL_KEYS: dict[str, type | tuple[type, ...]] = {
    "base_url": str,
    "served_name": str,
    "temperature": (int, float),
    "max_tokens": int,
    "context_window": int,
    "api_key_env": str,
    "model_path": str,
}
_GEN_KEYS: dict[str, type | tuple[type, ...]] = {"model": str, "api_key_env": str, "base_url": str}
_BAND_KEYS: dict[str, type | tuple[type, ...]] = {
    "lo": (int, float),
    "hi": (int, float),
    "k": int,
    "min_samples": int,
}


def _typed(
    table: Any, where: str, keys: dict[str, type | tuple[type, ...]], problems: list[str]
) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if not isinstance(table, dict):
        problems.append(f"[{where}]: expected a table, got {type(table).__name__}")
        return out
    for key, value in table.items():
        if key not in keys:
            problems.append(f"[{where}].{key}: unknown key (expected one of {', '.join(sorted(keys))})")
            continue
        want = keys[key]
        if isinstance(value, bool) or not isinstance(value, want):
            names = " or ".join(t.__name__ for t in (want if isinstance(want, tuple) else (want,)))
            problems.append(f"[{where}].{key}: expected {names}, got {value!r}")
            continue
        out[key] = value
    return out


def load_config(path: Path) -> Config:
    """Reads ``path`` if it exists; a missing file means all defaults."""
    cfg = Config()
    if not path.exists():
        return cfg
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(path, [f"not valid TOML ({exc})"]) from exc
    problems: list[str] = []
    for section, table in data.items():
        if section == "models":
            if not isinstance(table, dict):
                problems.append("[models]: expected tables like [models.NAME]")
                continue
            for name, mtable in table.items():
                kw = _typed(mtable, f"models.{name}", _MODEL_KEYS, problems)
                for key in ("max_tokens", "context_window"):
                    if key in kw and kw[key] <= 0:
                        problems.append(f"[models.{name}].{key}: expected an integer > 0, got {kw.pop(key)}")
                cfg.models[name] = PolicyModelConfig(name=name, **kw)
        elif section == "generator":
            cfg.generator = GeneratorConfig(**_typed(table, "generator", _GEN_KEYS, problems))
        elif section == "images":
            aliases = table.get("aliases", {}) if isinstance(table, dict) else None
            extra = set(table) - {"aliases"} if isinstance(table, dict) else set()
            for key in sorted(extra):
                problems.append(f"[images].{key}: unknown key (expected aliases)")
            if not isinstance(aliases, dict) or not all(isinstance(v, str) for v in aliases.values()):
                problems.append('[images.aliases]: expected a table of "image:tag" = "local-image:tag"')
            else:
                cfg.image_aliases = dict(aliases)
        elif section == "band":
            cfg.band = BandConfig(**_typed(table, "band", _BAND_KEYS, problems))
            if not 0 <= cfg.band.lo <= cfg.band.hi <= 1:
                problems.append(f"[band]: expected 0 <= lo <= hi <= 1, got lo={cfg.band.lo} hi={cfg.band.hi}")
        else:
            problems.append(f"[{section}]: unknown section (expected models, generator, images, band)")
    if problems:
        raise ConfigError(path, problems)
    return cfg
