"""The one root of every error Bandpass reports to a person.

It is defined here, in the lowest layer, only so that the store's own errors can share it (the store
imports nothing of the engine); everything else imports it as ``engine.core.errors.BandpassError``. Front
ends (the CLI and the TUI) catch this root and show its message in one line; anything else is a bug and is
allowed to fail loudly (a test, a crash log), never swallowed into a toast.
"""

from __future__ import annotations


class BandpassError(Exception):
    """An error with a message written for the curator: what failed, where (file, field, id), and what was
    expected. Subclasses keep their historical built-in base too (``ValueError``...), so callers that catch
    those still do."""

    @property
    def message(self) -> str:
        return str(self)
