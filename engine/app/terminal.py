"""What a terminal shows, for painting it: the emulator's screen and its cells' styles (the terminal view
of Replay, Compare and the live panes).

Apart from :mod:`engine.app.live` because painting a recording needs only the emulator (light, and its
native library loads when the first screen is made), not the rollout machinery a live episode comes from.
"""

from __future__ import annotations

from ..sandbox.emulator import DEFAULT_STYLE, CellStyle, Screen

__all__ = ["DEFAULT_STYLE", "CellStyle", "Screen"]
