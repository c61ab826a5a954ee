"""Plain text out of terminal output: what evidence quotes and what a screen may print safely.

Why: a verifier's or a policy's output is a byte stream written for a terminal. Shown raw in a widget or
printed by the CLI, its escape sequences reach the curator's real terminal (a stray ``og`` left on
screen; a task could set the window title or the clipboard with OSC 0/52). Stripping them is also what
makes two outputs comparable (a colour change is not a different failure).
"""

from __future__ import annotations

import re

# CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST), DCS/SOS/PM/APC (ESC P|X|^|_ ... ST), two-byte ESC x,
# and 8-bit C1 CSI/OSC introducers.
_ESCAPES = re.compile(
    r"\x1b\[[0-?]*[ -/]*[@-~]"
    r"|\x1b\][^\x07\x1b]*(?:\x07|\x1b\\)?"
    r"|\x1b[PX^_][^\x1b]*(?:\x1b\\)?"
    r"|\x1b[ -/]*[0-~]"
    r"|\x9b[0-?]*[ -/]*[@-~]"
    r"|\x9d[^\x07\x9c]*[\x07\x9c]?"
)
_CONTROLS = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x9f]")


def strip_controls(text: str) -> str:
    """``text`` with every escape sequence and control character removed, line breaks normalised, and
    carriage-return overwrites resolved (a progress bar keeps its last state)."""
    if not text:
        return ""
    if text.isascii() and "\x1b" not in text and "\r" not in text and _CONTROLS.search(text) is None:
        return text  # the common case: nothing to strip, no copy
    s = _ESCAPES.sub("", text).replace("\r\n", "\n")
    if "\r" in s:
        s = "\n".join(
            ln.rsplit("\r", 1)[-1] if "\r" in ln.rstrip("\r") else ln.rstrip("\r") for ln in s.split("\n")
        )
    return _CONTROLS.sub("", s)
