"""Following an asciicast file while another process writes it.

An episode run by another process on this host (``bandpass run`` in a terminal, another TUI) writes its
terminals to ``recordings/episode-<id>/agent.cast`` and ``verifier.cast`` as they happen: ``CastWriter``
writes and flushes one JSON line per event. :class:`CastTail` reads such a file incrementally: each
:meth:`CastTail.poll` returns the complete events written since the last one, never a half-written last
line (it waits for its newline), and a file that does not exist yet is simply "nothing new". A file that
is replaced or shortened (a new ``CastWriter`` on the same path) is read again from its header.

Times are absolute seconds since the start, as :func:`~engine.sandbox.asciicast.read_cast` gives them (v3's
relative times are summed). A line that is complete but not an event is a :class:`CastError` naming the
file and line, as for the reader: a follower that silently skipped output would show a wrong screen.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from .asciicast import CastError, CastEvent, _header, _is_time, _loads, _short

#: Most bytes one poll reads, so a large recording is caught up in slices (and memory stays bounded).
READ_CHUNK = 1 << 20


class CastTail:
    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self.header: dict[str, Any] | None = None
        self.version = 0
        self.offset = 0  # bytes consumed: the end of the last complete line read
        self._line = 0  # complete lines read (the header is line 1)
        self._now = 0.0  # v3: the running sum of relative times
        self._ident: tuple[int, int] | None = None  # (device, inode) of the file being read

    @property
    def started(self) -> bool:
        """The header has been read: the file exists and its writer has begun."""
        return self.header is not None

    def _reset(self) -> None:
        self.header, self.version, self.offset, self._line, self._now = None, 0, 0, 0, 0.0

    def poll(self) -> list[CastEvent]:
        """The events completed since the last call (``[]`` while the file is missing or unchanged)."""
        events: list[CastEvent] = []
        while True:
            chunk = self._read()
            if chunk is None:
                return events
            events.extend(chunk)

    def _read(self) -> list[CastEvent] | None:
        """One slice of at most ``READ_CHUNK`` bytes parsed; None when nothing complete is left."""
        try:
            f = open(self.path, "rb")  # noqa: SIM115 - closed below, also on the early returns
        except FileNotFoundError:
            return None
        except OSError as e:
            raise CastError(f"{self.path}: cannot read cast: {e}") from e
        with f:
            st = os.fstat(f.fileno())
            ident = (st.st_dev, st.st_ino)
            if ident != self._ident or st.st_size < self.offset:  # replaced or rewritten: start over
                self._ident = ident
                self._reset()
            if st.st_size <= self.offset:
                return None
            f.seek(self.offset)
            data = f.read(READ_CHUNK)
        end = data.rfind(b"\n")
        if end < 0:
            if len(data) >= READ_CHUNK:
                raise CastError(f"{self.path} line {self._line + 1}: a line longer than {READ_CHUNK} bytes")
            return None  # the writer is mid-line: wait for its newline
        self.offset += end + 1
        return self._parse(data[: end + 1])

    def _parse(self, data: bytes) -> list[CastEvent]:
        name = str(self.path)
        bad = f"{name} line {{}}: expected [time, code, data], got {{}}"
        out: list[CastEvent] = []
        for raw in data.split(b"\n")[:-1]:
            self._line += 1
            try:
                line = raw.decode("utf-8")
            except UnicodeDecodeError as e:
                raise CastError(f"{name} line {self._line}: not UTF-8 text (byte {e.start})") from None
            if self.header is None:
                self.header, self.version = _header(name, line)
                continue
            stripped = line.strip()
            if not stripped or (self.version == 3 and stripped.startswith("#")):
                continue
            try:
                ev = _loads(stripped)
            except (ValueError, RecursionError) as e:
                raise CastError(bad.format(self._line, f"{_short(stripped)} ({e})")) from None
            if not (isinstance(ev, list) and len(ev) == 3 and _is_time(ev[0]) and isinstance(ev[1], str)):
                raise CastError(bad.format(self._line, _short(stripped)))
            t, code, payload = ev
            if not isinstance(payload, str):
                if code in ("o", "i", "m", "r"):
                    what = f"expected a string as data of a {code!r} event"
                    raise CastError(f"{name} line {self._line}: {what}")
                payload = json.dumps(payload)  # unknown code with structured data, as the reader
            self._now = self._now + t if self.version == 3 else float(t)
            out.append(CastEvent(round(self._now, 6), code, payload))
        return out

    def output(self) -> str:
        """The terminal output (``o`` events) completed since the last poll, concatenated."""
        return "".join(e.data for e in self.poll() if e.code == "o")
