"""``BandpassError``: the root of every error a front end shows a person (defined in ``store.errors`` so
the store's errors share it; this is the name the engine and the front ends use)."""

from ...store.errors import BandpassError


class InvalidInput(BandpassError, ValueError):
    """A value the user gave (an option, a name, a field) that is not what was expected; the message names
    it and what was expected. A ``ValueError`` too, so callers that caught that still do."""


__all__ = ["BandpassError", "InvalidInput"]
