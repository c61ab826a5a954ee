"""A key's two names: the short label the footer has room for, and the full name help and palette show.

A footer at 100 columns fits about nine keys; Replay and the tag queue have more that matter. Where a
label is shortened ("Step"), this table holds the full name ("Next step"), which the help page and the
command palette show and search (the binding's ``tooltip`` says it on hover in the footer). Keyed by
label and action, so that a short label another screen uses for something else ("Search" on Tasks is
``/``) keeps its own name. Textual's own tooltips are sentences ("Quit the app and return to…") and are
never used as names.
"""

from __future__ import annotations

from textual.binding import Binding

FULL_NAMES: dict[tuple[str, str], str] = {
    ("Play", "toggle_play"): "Play/Pause",
    ("Step", "next_marker"): "Next step",
    ("Evidence", "next_evidence"): "Next evidence",
    ("Suggested", "accept_suggestion"): "Suggested tag",
    ("Open", "open"): "Replay / open",
    ("Search", "search"): "Search all",
}


def full_name(binding: Binding) -> str:
    return FULL_NAMES.get((binding.description, binding.action), binding.description)
