"""What a model's tokens cost, as the workspace's price files say (``generator-prices.toml`` beside the
built-in table): ``bandpass generations``, ``generate``, ``review`` and the Generation screen say a spend
in dollars only for a model with a price — an unpriced model's cost is "unknown", never "$0".
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..llm.pricing import PriceTable, PriceUnknown

if TYPE_CHECKING:
    from ..core.workspace import Workspace

__all__ = ["PriceTable", "PriceUnknown", "price_known", "prices"]


def prices(ws: Workspace) -> PriceTable:
    """The workspace's price table. Raises ``PricesInvalid`` for a broken generator-prices.toml."""
    return PriceTable(ws.root)


def price_known(ws: Workspace, model: str) -> bool:
    """Whether ``model`` has a price (a spend can be said in dollars)."""
    return prices(ws).known(model)
