"""``node.app`` typed as what the Bandpass app gives its screens.

Textual types a node's ``app`` as the generic ``App``; the screens and widgets here run inside
:class:`tui.app.BandpassApp` and use the few things it adds (the event bus, live episodes, ``open_replay``,
the Tasks screen's scope). They are named here as a protocol rather than by importing the app, so the
screens never import the module that imports them (the TUI's imports stay one way: app → screens →
widgets), and ``tui.app`` checks once that the app gives every one of them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol, cast

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from ..engine.core.events import EventBus
    from .widgets.live_episodes import LiveEpisodes


class BandpassAppServices(Protocol):
    """What a screen may ask of the app beyond Textual's ``App``."""

    bus: EventBus
    live: LiveEpisodes
    #: the task ids the Tasks screen's filter shows (None: every task), scoping Runs' new batches
    task_scope: list[int] | None
    #: bumped when tasks were added, so the Tasks screen reloads when shown next
    tasks_changed: int

    def open_replay(self, episode_id: int) -> None: ...


def bandpass_app(node: DOMNode) -> BandpassAppServices:
    """``node.app``, as the Bandpass app it runs in."""
    return cast("BandpassAppServices", node.app)
