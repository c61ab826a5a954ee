"""Small helpers shared by the attribution modules (kept private to the package)."""

from __future__ import annotations

from typing import Any


def _int(value: Any) -> int | None:
    try:
        return int(value)
    except (TypeError, ValueError):
        return None
