"""``counted(n, "check")`` -> ``"1 check"`` / ``"2 checks"``: one way to write a count in a message.

Why: the curator reads these counts in the TUI, the CLI and exports; ``1 check(s) failed`` reads as a
template nobody finished (issue 42: "plurals").
"""

from __future__ import annotations

from collections.abc import Iterable


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """``n`` and ``noun``, plural unless ``n`` is 1 (``plural`` when it is not ``noun + "s"``)."""
    return f"{n} {noun if n == 1 else (plural or noun + 's')}"


def listed(noun: str, items: Iterable[object], plural: str | None = None) -> str:
    """``noun`` and the items named, comma-separated: ``"episode 3"`` / ``"episodes 3, 4"``.

    Why: a message that names what it counts reads better with the noun agreeing with the list than with
    ``episode(s) 3, 4``.
    """
    names = [str(i) for i in items]
    return f"{noun if len(names) == 1 else (plural or noun + 's')} {', '.join(names)}"
