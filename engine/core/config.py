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

from .errors import BandpassError


class ConfigError(BandpassError, ValueError):
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
    #: Training step of this checkpoint: entries of one ``series`` sort by it in ``report compare``.
    checkpoint_step: int | None = None
    #: The run a checkpoint belongs to (default: none); compare orders a series by ``checkpoint_step``.
    series: str = ""
    #: This model's band as "LO:HI" (solvability is model-specific); "" = the [band] section's.
    band: str = ""

    def band_edges(self) -> tuple[float, float] | None:
        if not self.band:
            return None
        lo, hi = (float(x) for x in self.band.split(":"))
        return lo, hi

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
    """The band defaults: the one place they are written (calibration's ``GateParams``, export's
    ``ExportParams``, the Tasks screen and the Settings template all read them from here)."""

    lo: float = 0.1
    hi: float = 0.9
    k: int = 2
    min_samples: int = 4
    #: The probability with which a band decision must hold (engine/calibration/confidence.py).
    confidence: float = 0.9


@dataclass
class EndstateConfig:
    """End-state capture (``[endstate]``): how much changed-file content each episode archives."""

    cap_mb: float = 20.0

    @property
    def cap_bytes(self) -> int:
        return int(self.cap_mb * 1024 * 1024)


@dataclass
class RayConfig:
    """``[ray]``: the cluster the TUI's Runs screen offers (``bandpass run`` takes ``--ray-address``).

    ``address`` is what ``ray.init`` takes: ``auto`` (a cluster this machine is a node of) or the GCS
    ``HOST:6379``; never ``ray://`` (refused: see ``engine.run.executors.ray_executor``)."""

    address: str = "auto"


@dataclass
class RewardsConfig:
    """``[rewards]``: which key of a task's multi-key ``reward.json`` is its score, when the task itself
    does not say (``[rewards.primary] task-name = "success"``; engine/tasks/rewards.py has the rule)."""

    primary: dict[str, str] = field(default_factory=dict)


@dataclass
class Config:
    models: dict[str, PolicyModelConfig] = field(default_factory=dict)
    generator: GeneratorConfig = field(default_factory=GeneratorConfig)
    image_aliases: dict[str, str] = field(default_factory=dict)
    band: BandConfig = field(default_factory=BandConfig)
    endstate: EndstateConfig = field(default_factory=EndstateConfig)
    ray: RayConfig = field(default_factory=RayConfig)
    rewards: RewardsConfig = field(default_factory=RewardsConfig)


_MODEL_KEYS: dict[str, type | tuple[type, ...]] = {
    "base_url": str,
    "served_name": str,
    "temperature": (int, float),
    "max_tokens": int,
    "context_window": int,
    "api_key_env": str,
    "model_path": str,
    "checkpoint_step": int,
    "series": str,
    "band": str,
}
_ENDSTATE_KEYS: dict[str, type | tuple[type, ...]] = {"cap_mb": (int, float)}
_RAY_KEYS: dict[str, type | tuple[type, ...]] = {"address": str}
_GEN_KEYS: dict[str, type | tuple[type, ...]] = {"model": str, "api_key_env": str, "base_url": str}
_BAND_KEYS: dict[str, type | tuple[type, ...]] = {
    "lo": (int, float),
    "hi": (int, float),
    "k": int,
    "min_samples": int,
    "confidence": (int, float),
}


def _band_ok(text: str) -> bool:
    parts = text.split(":")
    if len(parts) != 2:
        return False
    try:
        lo, hi = float(parts[0]), float(parts[1])
    except ValueError:
        return False
    return 0 <= lo <= hi <= 1


#: Value rules beyond the type, per ``section.key`` (section ``models`` for every model): a predicate and
#: what the message says was expected. A value of the right type that no run could use (``k = 0``,
#: ``min_samples = -3``, a negative temperature) is as much a problem as a string where a number goes.
_RULES: dict[str, tuple[Any, str]] = {
    "models.base_url": (lambda v: v.startswith(("http://", "https://")), "an http:// or https:// URL"),
    "models.temperature": (lambda v: 0 <= v <= 2, "a number between 0 and 2"),
    "models.max_tokens": (lambda v: v >= 1, "an integer >= 1"),
    "models.context_window": (lambda v: v >= 1, "an integer >= 1"),
    "models.checkpoint_step": (lambda v: v >= 0, "an integer >= 0"),
    "models.band": (lambda v: _band_ok(v), '"LO:HI" with 0 <= LO <= HI <= 1'),
    "band.lo": (lambda v: 0 <= v <= 1, "a number between 0 and 1"),
    "band.hi": (lambda v: 0 <= v <= 1, "a number between 0 and 1"),
    "band.k": (lambda v: v >= 1, "an integer >= 1"),
    "band.min_samples": (lambda v: v >= 1, "an integer >= 1"),
    "band.confidence": (lambda v: 0 < v < 1, "a number strictly between 0 and 1"),
    "ray.address": (
        lambda v: bool(v.strip()) and not v.strip().lower().startswith("ray://"),
        "auto or HOST:PORT (the GCS address; ray:// is not supported)",
    ),
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
        rule = _RULES.get(f"{where.split('.', 1)[0]}.{key}")
        if rule is not None and not rule[0](value):
            problems.append(f"[{where}].{key}: expected {rule[1]}, got {value!r}")
            continue
        out[key] = value
    return out


def _rewards(table: Any, problems: list[str]) -> RewardsConfig:
    out = RewardsConfig()
    if not isinstance(table, dict):
        problems.append("[rewards]: expected a table")
        return out
    for key in sorted(set(table) - {"primary"}):
        problems.append(f"[rewards].{key}: unknown key (expected primary)")
    primary = table.get("primary", {})
    if not isinstance(primary, dict):
        problems.append('[rewards.primary]: expected a table of task-name = "reward key"')
        return out
    for task, key in primary.items():
        if isinstance(key, str) and key:
            out.primary[task] = key
        else:
            problems.append(f'[rewards.primary]."{task}": expected a key of its reward.json, got {key!r}')
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
            if not isinstance(aliases, dict):
                problems.append('[images.aliases]: expected a table of "image:tag" = "local-image:tag"')
            else:
                for key, value in aliases.items():
                    if isinstance(value, str) and value:
                        cfg.image_aliases[key] = value
                    else:
                        problems.append(
                            f'[images.aliases]."{key}": expected a local image name, got {value!r}'
                        )
        elif section == "band":
            cfg.band = BandConfig(**_typed(table, "band", _BAND_KEYS, problems))
            if not cfg.band.lo <= cfg.band.hi:
                problems.append(f"[band]: expected 0 <= lo <= hi <= 1, got lo={cfg.band.lo} hi={cfg.band.hi}")
        elif section == "endstate":
            cfg.endstate = EndstateConfig(**_typed(table, "endstate", _ENDSTATE_KEYS, problems))
            if cfg.endstate.cap_mb < 0:
                problems.append(f"[endstate].cap_mb: expected a size in MB >= 0, got {cfg.endstate.cap_mb!r}")
        elif section == "ray":
            cfg.ray = RayConfig(**_typed(table, "ray", _RAY_KEYS, problems))
        elif section == "rewards":
            cfg.rewards = _rewards(table, problems)
        else:
            problems.append(
                f"[{section}]: unknown section "
                "(expected models, generator, images, band, endstate, ray, rewards)"
            )
    if problems:
        raise ConfigError(path, problems)
    return cfg
