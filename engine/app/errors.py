"""The application layer's refusals: conditions a curator caused and can fix, each one line."""

from __future__ import annotations

from ..core.errors import BandpassError


class NothingToRun(BandpassError, LookupError):
    """No task, version or batch matches what was asked for (the message says what to do instead)."""


class EndpointNotReady(BandpassError, RuntimeError):
    """A policy endpoint does not answer or does not serve the model (``bandpass policy check``); the
    message is the check's one line: what failed and what to fix."""
