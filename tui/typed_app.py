"""``node.app`` typed as the Bandpass app.

Textual types a node's ``app`` as the generic ``App``; the screens and widgets here run inside
:class:`tui.app.BandpassApp` and use what it adds (the event bus, live episodes, ``open_replay``...).
This one cast says so once, so the type checker checks every use of those attributes.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from textual.dom import DOMNode

    from bandpass.tui.app import BandpassApp


def bandpass_app(node: DOMNode) -> BandpassApp:
    """``node.app``, as the Bandpass app it runs in."""
    return cast("BandpassApp", node.app)
