"""Watch an episode's recordings: what ``bandpass replay``, the Replay screen, its find bar and the
Compare screen play, seek and align.

Why here: the player (keyframes, instant seek, the step under the cursor), the casts, their transcripts
(which frame shows a line) and the step alignment of two episodes are the review stage's; the front ends
reach them through this module. Nothing here loads the terminal emulator's native library: that happens
when the first screen is made.
"""

from __future__ import annotations

from ..review.compare import (
    KEYSTROKES,
    OBSERVATION,
    ONLY_LEFT,
    ONLY_RIGHT,
    AlignedStep,
    align,
    keys_text,
)
from ..review.replay import (
    KeyframeIndex,
    Player,
    ReplaySource,
    ReplaySourceError,
    StepView,
    index_path_in,
    load_source,
    settle_gc,
    time_of_text,
)
from ..review.transcript import (
    INSIDE,
    Line,
    find_frame,
    frame_of,
    highlight_spans,
    screen_at,
    transcript,
)
from ..sandbox.asciicast import CastError, read_cast

__all__ = [
    "INSIDE",
    "KEYSTROKES",
    "OBSERVATION",
    "ONLY_LEFT",
    "ONLY_RIGHT",
    "AlignedStep",
    "CastError",
    "KeyframeIndex",
    "Line",
    "Player",
    "ReplaySource",
    "ReplaySourceError",
    "StepView",
    "align",
    "find_frame",
    "frame_of",
    "highlight_spans",
    "index_path_in",
    "keys_text",
    "load_source",
    "read_cast",
    "screen_at",
    "settle_gc",
    "time_of_text",
    "transcript",
]
