"""Episodes as they run: the terminal size every episode gets, the live screen a running episode keeps in
this process, and the tail that follows a recording another process is still writing (the Runs screen's
live panes, for batches of this TUI and of a ``bandpass run`` beside it).
"""

from __future__ import annotations

from ..run.episode import COLS, ROWS
from ..sandbox.asciicast import CastError
from ..sandbox.cast_tail import CastTail
from ..sandbox.terminal import live_screen

__all__ = ["COLS", "ROWS", "CastError", "CastTail", "live_screen"]
