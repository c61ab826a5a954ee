"""An OptionList whose page keys are safe before its first layout.

Textual 8.2's ``OptionList`` maps options to screen lines only when it lays them out, and its page keys
read that map unguarded: Page Down on a list filled a moment ago (the tag dialog as it opens, the
replay's evidence list) raised ``KeyError`` — found by the monkey test (tests/tui/test_tui_monkey.py). Until
the list has been laid out there is no page to move by, so the key does nothing.
"""

from __future__ import annotations

from textual.widgets import OptionList


class SteadyOptionList(OptionList):
    def _laid_out(self) -> bool:
        return (self.highlighted or 0) in self._index_to_line  # the map the page keys read

    def action_page_down(self) -> None:
        if self._laid_out():
            super().action_page_down()  # type: ignore[no-untyped-call]  # Textual 8.2 leaves it unannotated

    def action_page_up(self) -> None:
        if self._laid_out():
            super().action_page_up()  # type: ignore[no-untyped-call]  # Textual 8.2 leaves it unannotated


def guard_page_keys() -> None:
    """The same guard for every ``OptionList`` Textual makes itself (a ``Select``'s overlay, the command
    palette's list): their page keys hit the same unguarded map (the monkey test, seed 940442607, found
    ``KeyError`` in one). Until the list is laid out there is no page to move by: the key does nothing."""
    move_page = OptionList._move_page
    if getattr(move_page, "_bandpass_guarded", False):
        return

    def _move_page(self: OptionList, direction: int) -> None:
        if (self.highlighted or 0) in self._index_to_line:
            move_page(self, direction)  # type: ignore[arg-type]

    _move_page._bandpass_guarded = True  # type: ignore[attr-defined]
    OptionList._move_page = _move_page  # type: ignore[method-assign]
