"""Per-model token prices (a data file) and the cost of a turn.

Dollar budgets and "cost per accepted task" are only as good as this table, so it lives in a file a
curator can correct (``engine/llm/prices.toml``, overridden per workspace by
``generator-prices.toml`` in the workspace root) instead of constants in code.

A model the table does not know is not refused: a new model must be usable the day it ships. Its cost is
*unknown* (``known()`` is False; ``cost()`` counts it as 0 and every display says "unknown", never "$0"),
the batch starts with a warning, and only a dollar budget refuses it, since a budget against an unknown
price could never stop anything.

Keys name model *families* and match exactly: a key prices the model of that exact name and its dated
snapshots (``claude-sonnet-4-5-20250929``, ``claude-sonnet-4-5@20250929``, ``claude-sonnet-4-5-latest``),
nothing else. A plain prefix rule priced ``claude-opus-4-8`` as ``claude-opus-4``, a new family silently
billed at an old family's rate.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass
from pathlib import Path

from ..core.errors import BandpassError

PRICES_FILE = Path(__file__).with_name("prices.toml")
WORKSPACE_PRICES = "generator-prices.toml"

#: What may follow a family key in a model name that is still that family: a snapshot date or an alias.
SNAPSHOT_SUFFIX = re.compile(r"(?:[-@]\d{8}|-latest)")


class PricesInvalid(BandpassError, ValueError):
    """A prices file a curator wrote (``generator-prices.toml``) that cannot be read: file and row named."""


class PriceUnknown(BandpassError, KeyError):
    def __init__(self, model: str, files: list[Path], workspace_file: Path | None = None) -> None:
        self.model = model
        # the file a curator can edit: the workspace's override, never the installed package's table
        where = (
            f"{workspace_file} (this workspace's prices; create it if absent)"
            if workspace_file is not None
            else " or ".join(str(f) for f in files)
        )
        super().__init__(
            f'no price for model {model!r}: add [models."{model}"] input = …, output = … '
            f"(USD per million tokens) to {where}"
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
        raise PricesInvalid(f"{path}: not valid TOML ({exc})") from exc
    out: dict[str, Price] = {}
    for model, row in (data.get("models") or {}).items():
        try:
            inp, outp = float(row["input"]), float(row["output"])
        except (KeyError, TypeError, ValueError) as exc:
            raise PricesInvalid(f'{path}: [models."{model}"] needs numeric input and output') from exc
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
        self.workspace_file = workspace_root / WORKSPACE_PRICES if workspace_root is not None else None
        if workspace_root is not None and (override := workspace_root / WORKSPACE_PRICES).is_file():
            self.files.append(override)
            self.prices.update(_read(override))

    def lookup(self, model: str) -> Price | None:
        """Exact name, else the family key of which ``model`` is a dated snapshot; None if neither."""
        if model in self.prices:
            return self.prices[model]
        for key in sorted(self.prices, key=len, reverse=True):
            if model.startswith(key) and SNAPSHOT_SUFFIX.fullmatch(model[len(key) :]):
                return self.prices[key]
        return None

    def known(self, model: str) -> bool:
        return self.lookup(model) is not None

    def price(self, model: str) -> Price:
        """``lookup`` that raises :class:`PriceUnknown` (naming the files to edit) for an unknown model."""
        p = self.lookup(model)
        if p is None:
            raise PriceUnknown(model, self.files, self.workspace_file)
        return p

    def cost(self, model: str, usage: Usage) -> float:
        """Dollars for ``usage``; 0.0 for a model without a price (shown as unknown, see module doc)."""
        p = self.lookup(model)
        if p is None:
            return 0.0
        return (
            usage.input_tokens * p.input
            + usage.output_tokens * p.output
            + usage.cache_write_tokens * p.cache_write
            + usage.cache_read_tokens * p.cache_read
        ) / 1_000_000
