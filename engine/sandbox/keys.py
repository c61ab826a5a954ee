"""Key names (tmux's spelling) to the bytes a terminal sends.

Policies trained on Terminal-Bench style harnesses emit tmux key names (``C-c``, ``Enter``); the harness
writes raw bytes to the pty, so this table is the single translation. Anything that is not a known name
passes through verbatim, which is how ordinary typed text travels.
"""

from __future__ import annotations

import re

NAMED_KEYS: dict[str, str] = {
    "Enter": "\r",
    "Escape": "\x1b",
    "Esc": "\x1b",
    "Tab": "\t",
    "BTab": "\x1b[Z",
    "BSpace": "\x7f",
    "Space": " ",
    "Up": "\x1b[A",
    "Down": "\x1b[B",
    "Right": "\x1b[C",
    "Left": "\x1b[D",
    "Home": "\x1b[H",
    "End": "\x1b[F",
    "PageUp": "\x1b[5~",
    "PPage": "\x1b[5~",
    "PageDown": "\x1b[6~",
    "NPage": "\x1b[6~",
    "Insert": "\x1b[2~",
    "IC": "\x1b[2~",
    "Delete": "\x1b[3~",
    "DC": "\x1b[3~",
    **{f"F{n}": seq for n, seq in zip(range(1, 5), ("\x1bOP", "\x1bOQ", "\x1bOR", "\x1bOS"), strict=True)},
}

_CTRL = re.compile(r"^C-([a-zA-Z@\[\\\]^_?])$")
_META = re.compile(r"^M-(.)$", re.DOTALL)


def translate_key(name: str) -> str:
    """One key name to bytes; an unknown name is literal text."""
    if name in NAMED_KEYS:
        return NAMED_KEYS[name]
    m = _CTRL.match(name)
    if m:
        ch = m.group(1)
        return "\x7f" if ch == "?" else chr(ord(ch.upper()) & 0x1F)
    m = _META.match(name)
    if m:
        return "\x1b" + m.group(1)
    return name


def translate_keys(keys: str | list[str]) -> str:
    """A key name, or a list of names and literal strings (tmux ``send-keys`` arguments), to bytes."""
    if isinstance(keys, str):
        return translate_key(keys)
    return "".join(translate_key(k) for k in keys)
