"""Per-model token prices (a data file) and the cost of a turn.

Dollar budgets and "cost per accepted task" are only as good as this table, so it lives in a file a
curator can correct (``engine/prompts/generator/prices.toml``, overridden per workspace by
``generator-prices.toml`` in the workspace root) instead of constants in code. An unknown model is an
error at the start of a batch, not a silent $0: a free-looking generator would defeat ``--budget-usd``.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from engine.generator.prompts import PROMPTS_DIR

PRICES_FILE = PROMPTS_DIR / "prices.toml"
WORKSPACE_PRICES = "generator-prices.toml"


class PriceUnknown(KeyError):
    def __init__(self, model: str, files: list[Path]) -> None:
        self.model = model
        super().__init__(
            f'no price for model {model!r}: add [models."{model}"] input/output (USD per million tokens) '
            f"to {' or '.join(str(f) for f in files)}"
        )

    def __str__(self) -> str:  # KeyError would quote the message
        return str(self.args[0])


@dataclass(frozen=True)
class Price:
    """US dollars per million tokens."""

    input: float
    output: float
    cache_write: float
    cache_read: float


@dataclass
class Usage:
    input_tokens: int = 0
    output_tokens: int = 0
    cache_write_tokens: int = 0
    cache_read_tokens: int = 0

    @property
    def tokens_in(self) -> int:
        """Every prompt token, cached or not: what the context actually held."""
        return self.input_tokens + self.cache_write_tokens + self.cache_read_tokens

    def add(self, other: Usage) -> None:
        self.input_tokens += other.input_tokens
        self.output_tokens += other.output_tokens
        self.cache_write_tokens += other.cache_write_tokens
        self.cache_read_tokens += other.cache_read_tokens


def _read(path: Path) -> dict[str, Price]:
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except tomllib.TOMLDecodeError as exc:
        raise ValueError(f"{path}: not valid TOML ({exc})") from exc
    out: dict[str, Price] = {}
    for model, row in (data.get("models") or {}).items():
        try:
            inp, outp = float(row["input"]), float(row["output"])
        except (KeyError, TypeError, ValueError) as exc:
            raise ValueError(f'{path}: [models."{model}"] needs numeric input and output') from exc
        out[model] = Price(
            input=inp,
            output=outp,
            cache_write=float(row.get("cache_write", inp * 1.25)),
            cache_read=float(row.get("cache_read", inp * 0.1)),
        )
    return out


class PriceTable:
    def __init__(self, workspace_root: Path | None = None) -> None:
        self.files = [PRICES_FILE]
        self.prices = _read(PRICES_FILE)
        if workspace_root is not None and (override := workspace_root / WORKSPACE_PRICES).is_file():
            self.files.append(override)
            self.prices.update(_read(override))

    def price(self, model: str) -> Price:
        """Exact name, else the longest key that prefixes it (dated snapshots price as their family)."""
        if model in self.prices:
            return self.prices[model]
        matches = [k for k in self.prices if model.startswith(k)]
        if not matches:
            raise PriceUnknown(model, self.files)
        return self.prices[max(matches, key=len)]

    def cost(self, model: str, usage: Usage) -> float:
        p = self.price(model)
        return (
            usage.input_tokens * p.input
            + usage.output_tokens * p.output
            + usage.cache_write_tokens * p.cache_write
            + usage.cache_read_tokens * p.cache_read
        ) / 1_000_000
