"""asciicast recordings: a v2 writer and a v2/v3 reader.

We write v2 because it is what ``asciinema play`` 2.x and every Terminal-Bench / Harbor tool reads. Each
event is one JSON line written and flushed in one call under a lock, so several threads (the pty reader,
the step loop writing markers) can share a writer and a crashed process leaves at most a cut last line;
the reader accepts exactly that one defect and reports everything else as a :class:`CastError` that names
the file and line, because a silently half-read recording would mislead a curator during replay.
"""

from __future__ import annotations

import json
import math
import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any

#: The only environment variables a cast may carry: anything else risks recording a secret.
ALLOWED_ENV = ("TERM", "SHELL")


class CastError(ValueError):
    """A recording that cannot be read; the message says where and what was expected."""


@dataclass(frozen=True, slots=True)
class CastEvent:
    time: float  # absolute seconds since the start, whatever the file's version
    code: str  # "o" output, "i" input, "m" marker, "r" resize, "x" exit (v3), or unknown codes kept
    data: str


@dataclass
class Cast:
    header: dict[str, Any]
    version: int
    events: list[CastEvent] = field(default_factory=list)
    truncated: bool = False

    @property
    def cols(self) -> int:
        return int(self.header["term"]["cols"] if self.version == 3 else self.header["width"])

    @property
    def rows(self) -> int:
        return int(self.header["term"]["rows"] if self.version == 3 else self.header["height"])

    @property
    def duration(self) -> float:
        return self.events[-1].time if self.events else 0.0

    @property
    def markers(self) -> list[tuple[float, str]]:
        return [(e.time, e.data) for e in self.events if e.code == "m"]

    def output(self) -> str:
        """All terminal output concatenated: what a fresh emulator must be fed to rebuild the screen."""
        return "".join(e.data for e in self.events if e.code == "o")


class CastWriter:
    """Writes an asciicast v2 file as events happen; safe to share between threads."""

    def __init__(
        self,
        path: str | os.PathLike[str],
        cols: int,
        rows: int,
        *,
        title: str | None = None,
        env: dict[str, str] | None = None,
        timestamp: int | None = None,
    ) -> None:
        self.path = Path(path)
        self._lock = threading.Lock()
        self._start = time.monotonic()
        header: dict[str, Any] = {
            "version": 2,
            "width": int(cols),
            "height": int(rows),
            "timestamp": int(time.time() if timestamp is None else timestamp),
        }
        safe_env = {k: v for k, v in (env or {}).items() if k in ALLOWED_ENV}
        if safe_env:
            header["env"] = safe_env
        if title is not None:
            header["title"] = title
        self._f: IO[str] | None = open(self.path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115
        self._write_line(json.dumps(header, ensure_ascii=False))

    def elapsed(self) -> float:
        """Current cast time, so callers (step markers, the store) can refer to a position in the cast."""
        return round(time.monotonic() - self._start, 6)

    def _write_line(self, line: str) -> None:
        if self._f is None:
            raise ValueError(f"{self.path}: cast writer is closed")
        self._f.write(line + "\n")
        self._f.flush()

    def _event(self, code: str, data: str) -> float:
        with self._lock:
            # Time is taken under the lock so events from different threads stay in time order.
            t = self.elapsed()
            self._write_line(json.dumps([t, code, data], ensure_ascii=False))
            return t

    def output(self, data: str) -> float:
        return self._event("o", data)

    def input(self, data: str) -> float:
        return self._event("i", data)

    def marker(self, label: str) -> float:
        return self._event("m", label)

    def resize(self, cols: int, rows: int) -> float:
        return self._event("r", f"{int(cols)}x{int(rows)}")

    @property
    def closed(self) -> bool:
        return self._f is None

    def close(self) -> None:
        with self._lock:
            if self._f is not None:
                self._f.close()
                self._f = None

    def __enter__(self) -> CastWriter:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# --------------------------------------------------------------------------------------------- reading


def _load_source(source: str | bytes | os.PathLike[str]) -> tuple[str, str]:
    """Return (name for messages, text). A ``str`` is content when it looks like a cast, else a path."""
    if isinstance(source, bytes):
        raw, name = source, "<bytes>"
    elif isinstance(source, str) and ("\n" in source or source.lstrip().startswith("{") or not source):
        return "<text>", source
    else:
        path = Path(source)
        name = path.name
        try:
            raw = path.read_bytes()
        except (OSError, ValueError) as e:
            raise CastError(f"{path}: cannot read cast: {e}") from e
    try:
        return name, raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise CastError(f"{name}: not UTF-8 text (byte {e.start})") from e


def _loads(text: str) -> Any:
    # NaN/Infinity are not JSON and a deep "[[[[" nest must not escape as RecursionError.
    def bad_constant(c: str) -> Any:
        raise ValueError(f"non-JSON constant {c}")

    return json.loads(text, parse_constant=bad_constant)


def _short(text: str, limit: int = 60) -> str:
    return repr(text if len(text) <= limit else text[:limit] + "...")


def _header(name: str, line: str) -> tuple[dict[str, Any], int]:
    try:
        header = _loads(line)
    except (ValueError, RecursionError) as e:
        raise CastError(f"{name} line 1: expected a JSON header object, got {_short(line)} ({e})") from None
    if not isinstance(header, dict):
        raise CastError(f"{name} line 1: expected a JSON header object, got {_short(line)}")
    version = header.get("version")
    if version == 2:
        for key in ("width", "height"):
            if not _is_size(header.get(key)):
                raise CastError(f"{name} line 1: expected a positive integer {key!r} in a v2 header")
    elif version == 3:
        term = header.get("term")
        if not isinstance(term, dict) or not all(_is_size(term.get(k)) for k in ("cols", "rows")):
            raise CastError(f'{name} line 1: expected "term": {{"cols": N, "rows": N}} in a v3 header')
    else:
        raise CastError(f"{name} line 1: expected asciicast version 2 or 3, got version {version!r}")
    return header, version


def _is_size(v: Any) -> bool:
    return isinstance(v, int) and not isinstance(v, bool) and v > 0


def _is_time(v: Any) -> bool:
    return isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0


def read_cast(source: str | bytes | os.PathLike[str]) -> Cast:
    """Read an asciicast v2 or v3 file (path, text or bytes). Unknown event codes are kept, not rejected,
    so recordings from other tools (Terminal-Bench, Harbor) with their own codes still replay."""
    name, text = _load_source(source)
    lines = text.split("\n")
    ends_with_newline = text.endswith("\n")
    if ends_with_newline:
        lines.pop()
    if not lines or not lines[0].strip():
        raise CastError(f"{name} line 1: expected a JSON header object, got an empty file")
    header, version = _header(name, lines[0])
    cast = Cast(header=header, version=version)
    now = 0.0
    last = len(lines)
    for lineno, line in enumerate(lines[1:], start=2):
        stripped = line.strip()
        if not stripped or (version == 3 and stripped.startswith("#")):
            continue
        try:
            ev = _loads(stripped)
        except (ValueError, RecursionError) as e:
            if lineno == last and not ends_with_newline and stripped.startswith("["):
                cast.truncated = True  # a writer died mid-line: keep everything before it
                break
            raise CastError(
                f"{name} line {lineno}: expected [time, code, data], got {_short(stripped)} ({e})"
            ) from None
        if not (isinstance(ev, list) and len(ev) == 3 and _is_time(ev[0]) and isinstance(ev[1], str)):
            raise CastError(f"{name} line {lineno}: expected [time, code, data], got {_short(stripped)}")
        t, code, data = ev
        if not isinstance(data, str):
            if code in ("o", "i", "m", "r"):
                raise CastError(f"{name} line {lineno}: expected a string as data of a {code!r} event")
            data = json.dumps(data)  # unknown code with structured data: keep it, losslessly
        now = now + t if version == 3 else float(t)
        cast.events.append(CastEvent(round(now, 6), code, data))
    return cast
