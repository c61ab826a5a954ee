"""The application layer's refusals: conditions a curator caused and can fix, each one line."""

from __future__ import annotations

from bandpass.engine.core.errors import BandpassError


class NothingToRun(BandpassError, LookupError):
    """No task, version or batch matches what was asked for (the message says what to do instead)."""
