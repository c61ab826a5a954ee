"""CursorRest: a text field's cursor stops blinking when nobody types, as a terminal's cursor does.

Why: a focused ``Input`` or ``TextArea`` blinks twice a second for as long as it has the focus, and each
blink repaints the field and writes to the terminal: left open on the Search screen (its query field has
the focus) the app used 0.6% of a core doing nothing but blinking (``bench/bench_idle.py``). With this
mixin the focused field blinks as before while the curator works, and ``REST_AFTER_S`` seconds after the
last key, click or paste its cursor stays shown, steady, until the next one (or until another field
takes the focus). Only Textual's public ``cursor_blink`` is used, and only on the focused widget: a
widget whose blink is turned back on resumes its blink timer, focused or not.
"""

from __future__ import annotations

import weakref
from typing import TYPE_CHECKING, Any

from textual import events

if TYPE_CHECKING:
    from textual.app import App
    from textual.timer import Timer
    from textual.widget import Widget

    _Base = App[Any]
else:
    _Base = object


class CursorRest(_Base):
    """App mixin, before ``App`` in the bases (``class BandpassApp(SafeApp, CursorRest, App[None])``)."""

    #: Seconds after the last key, click or paste at which the focused field's cursor stops blinking.
    REST_AFTER_S = 10.0

    _rest_timer: Timer | None = None

    @property
    def _rested(self) -> weakref.WeakSet[Widget]:
        """Fields whose blink this mixin turned off (it turns on no other)."""
        rested: weakref.WeakSet[Widget] | None = self.__dict__.get("_rested_fields")
        if rested is None:
            rested = self.__dict__["_rested_fields"] = weakref.WeakSet()
        return rested

    async def on_event(self, event: events.Event) -> None:
        if isinstance(event, events.Key | events.MouseDown | events.Paste) and not event.is_forwarded:
            self._stir()
        await super().on_event(event)

    def on_descendant_focus(self, event: events.DescendantFocus) -> None:
        self._stir()

    def _stir(self) -> None:
        """Someone is here: the focused field blinks again, and rests ``REST_AFTER_S`` from now."""
        widget = self.focused
        if widget is not None and widget in self._rested:
            self._rested.discard(widget)
            widget.cursor_blink = True  # type: ignore[attr-defined]  # in _rested: it has one
        if self._rest_timer is not None:
            self._rest_timer.stop()
        self._rest_timer = self.set_timer(self.REST_AFTER_S, self._rest, name="cursor rest")

    def _rest(self) -> None:
        self._rest_timer = None
        widget = self.focused
        if widget is not None and getattr(widget, "cursor_blink", None) is True:
            widget.cursor_blink = False  # type: ignore[attr-defined]  # shown steady, timer paused
            self._rested.add(widget)
