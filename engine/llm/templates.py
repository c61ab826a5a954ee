"""Prompt templates: ``{{name}}`` placeholders, shared by every prompt family (generator, reviewer).

A placeholder with no value is an error, never an empty string: a silently empty seed axis or review field
would skew a whole batch without anyone seeing it.
"""

from __future__ import annotations

import re

from ..core.errors import BandpassError

_PLACEHOLDER = re.compile(r"\{\{(\w+)\}\}")


class PromptError(BandpassError, ValueError):
    """A prompt version is missing, malformed, or rendered with missing/unknown placeholders."""


def render(template: str, values: dict[str, str], *, where: str) -> str:
    wanted = set(_PLACEHOLDER.findall(template))
    missing = sorted(wanted - set(values))
    if missing:
        raise PromptError(f"{where}: no value for {', '.join('{{' + m + '}}' for m in missing)}")
    return _PLACEHOLDER.sub(lambda m: values[m.group(1)], template)
