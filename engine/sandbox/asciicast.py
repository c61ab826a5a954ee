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
import zlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import IO, Any, Self, overload

from ..core.errors import BandpassError

#: The only environment variables a cast may carry: anything else risks recording a secret.
ALLOWED_ENV = ("TERM", "SHELL")


class CastError(BandpassError, ValueError):
    """A recording that cannot be read; the message says where and what was expected."""


@dataclass(frozen=True, slots=True)
class CastEvent:
    time: float  # absolute seconds since the start, whatever the file's version
    code: str  # "o" output, "i" input, "m" marker, "r" resize, "x" exit (v3), or unknown codes kept
    data: str


class EventLog(Sequence[CastEvent]):
    """A cast's events, held compactly: a read-only sequence of :class:`CastEvent` built once by the
    reader.

    Why: a one-hour agent session is tens of MB of output, and held as one Python string per event it cost
    the replay 2.7x the file in memory (issue 31). Here times, codes and data lengths sit in arrays and the
    data in zlib-compressed blocks of ~64 K characters (level 1: ~5x smaller on terminal output, ~0.2 ms
    to inflate a block); an event is materialised when asked for, and the last few inflated blocks are
    kept, so walking a range of events (a seek feeds at most one keyframe interval) inflates each block
    once. Thread-safe to read."""

    #: Characters of event data per compressed block.
    BLOCK = 64 * 1024
    #: Inflated blocks kept (a seek's range spans at most two; the index builder walks another).
    CACHED = 4

    def __init__(self, events: Iterable[CastEvent] = ()) -> None:
        self._times = array("d")
        self._codes: list[str] = []
        self._block = array("I")  # block of each event's data
        self._start = array("I")  # offset of each event's data in its block's text
        self._length = array("I")  # length of each event's data (characters)
        self._blocks: list[bytes] = []  # sealed blocks, compressed
        self._open: list[str] = []  # the block being filled
        self._open_len = 0
        self._cache: dict[int, str] = {}
        self._lock = threading.Lock()
        for ev in events:
            self.append(ev)
        self.seal()

    # --- building (the reader) --- #

    def append(self, ev: CastEvent) -> None:
        if self._open_len >= self.BLOCK:
            self.seal()
        self._times.append(ev.time)
        self._codes.append(_CODES.setdefault(ev.code, ev.code))
        self._block.append(len(self._blocks))
        self._start.append(self._open_len)
        self._length.append(len(ev.data))
        self._open.append(ev.data)
        self._open_len += len(ev.data)

    def seal(self) -> None:
        """Compresses the block being filled (the reader calls it at the end). Events whose data is empty
        may point at a block never sealed: it reads as ``""``."""
        if not self._open_len:
            self._open = []
            return
        text = "".join(self._open)
        self._blocks.append(zlib.compress(text.encode("utf-8", "surrogatepass"), 1))
        self._open, self._open_len = [], 0

    # --- reading --- #

    def _text(self, b: int) -> str:
        with self._lock:
            text = self._cache.get(b)
            if text is not None:
                return text
        if b == len(self._blocks):  # not sealed yet (a log being built)
            return "".join(self._open)
        text = zlib.decompress(self._blocks[b]).decode("utf-8", "surrogatepass")
        with self._lock:
            if len(self._cache) >= self.CACHED:
                self._cache.pop(next(iter(self._cache)))
            self._cache[b] = text
        return text

    def items(self, start: int, end: int) -> Iterator[tuple[str, str]]:
        """``(code, data)`` of events ``start..end-1``, fast: what feeding a range of events needs."""
        codes, block, first, length = self._codes, self._block, self._start, self._length
        b, text = -1, ""
        for i in range(start, end):
            if block[i] != b:
                b = block[i]
                text = self._text(b)
            s = first[i]
            yield codes[i], text[s : s + length[i]]

    def _event(self, i: int) -> CastEvent:
        start = self._start[i]
        text = self._text(self._block[i])
        return CastEvent(self._times[i], self._codes[i], text[start : start + self._length[i]])

    def __len__(self) -> int:
        return len(self._times)

    @overload
    def __getitem__(self, i: int) -> CastEvent: ...
    @overload
    def __getitem__(self, i: slice) -> list[CastEvent]: ...
    def __getitem__(self, i: int | slice) -> CastEvent | list[CastEvent]:
        if isinstance(i, slice):
            return [self._event(k) for k in range(*i.indices(len(self)))]
        n = len(self._times)
        if i < 0:
            i += n
        if not 0 <= i < n:
            raise IndexError("event index out of range")
        return self._event(i)

    def __iter__(self) -> Iterator[CastEvent]:
        for i in range(len(self._times)):
            yield self._event(i)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Sequence) and not isinstance(other, str | bytes):
            return len(self) == len(other) and all(a == b for a, b in zip(self, other, strict=True))
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]  # a mutable sequence compared by value: unhashable, as list

    def __repr__(self) -> str:
        return f"EventLog({len(self)} events, {len(self._blocks)} blocks)"

    # --- without inflating anything --- #

    def time(self, i: int) -> float:
        return self._times[i]

    def code(self, i: int) -> str:
        return self._codes[i]

    def length(self, i: int) -> int:
        """Characters of event ``i``'s data."""
        return self._length[i]

    @property
    def codes(self) -> list[str]:
        return self._codes

    def times(self) -> list[float]:
        return self._times.tolist()

    def lengths(self) -> list[int]:
        return self._length.tolist()

    def nbytes(self) -> int:
        """Memory held, roughly (compressed blocks and the per-event arrays)."""
        arrays = (self._times, self._block, self._start, self._length)
        return sum(map(len, self._blocks)) + sum(a.itemsize * len(a) for a in arrays) + 8 * len(self._codes)


#: Event codes interned, so a million events share a handful of strings.
_CODES: dict[str, str] = {}


@dataclass
class Cast:
    header: dict[str, Any]
    version: int
    #: What :func:`read_cast` returns here is an :class:`EventLog`; a plain list works everywhere too.
    events: Sequence[CastEvent] = field(default_factory=list)
    truncated: bool = False

    @property
    def cols(self) -> int:
        return int(self.header["term"]["cols"] if self.version == 3 else self.header["width"])

    @property
    def rows(self) -> int:
        return int(self.header["term"]["rows"] if self.version == 3 else self.header["height"])

    @property
    def duration(self) -> float:
        if isinstance(self.events, EventLog):
            return self.events.time(-1) if self.events else 0.0
        return self.events[-1].time if self.events else 0.0

    @property
    def markers(self) -> list[tuple[float, str]]:
        ev = self.events
        if isinstance(ev, EventLog):
            return [(ev.time(i), ev[i].data) for i, c in enumerate(ev.codes) if c == "m"]
        return [(e.time, e.data) for e in ev if e.code == "m"]

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
        self._f: IO[str] | None = open(self.path, "w", encoding="utf-8", newline="\n")  # noqa: SIM115 - the writer holds the file open until close()
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

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


# --------------------------------------------------------------------------------------------- reading


def _source_lines(source: str | bytes | os.PathLike[str]) -> tuple[str, Iterator[str], IO[bytes] | None]:
    """(name for messages, the lines without their newline, the file to close). A ``str`` is content when
    it looks like a cast, else a path. A file is read line by line: a recording is never held whole."""
    if isinstance(source, bytes):
        return "<bytes>", _decoded_lines("<bytes>", iter(source.split(b"\n"))), None
    if isinstance(source, str) and ("\n" in source or source.lstrip().startswith("{") or not source):
        return "<text>", iter(source.split("\n")), None
    path = Path(source)
    try:
        f = open(path, "rb")  # noqa: SIM115 - read_cast closes it
    except (OSError, ValueError) as e:
        raise CastError(f"{path}: cannot read cast: {e}") from e
    return path.name, _decoded_lines(path.name, _split_file(f)), f


def _split_file(f: IO[bytes]) -> Iterator[bytes]:
    """The file's lines split on ``\\n`` exactly as ``bytes.split`` would (the last one may be empty)."""
    tail = b""
    for line in f:
        if line.endswith(b"\n"):
            yield tail + line[:-1]
            tail = b""
        else:
            tail += line
    yield tail


def _decoded_lines(name: str, raw_lines: Iterator[bytes]) -> Iterator[str]:
    offset = 0
    for raw in raw_lines:
        try:
            yield raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise CastError(f"{name}: not UTF-8 text (byte {offset + e.start})") from e
        offset += len(raw) + 1


def _bad_constant(c: str) -> Any:
    raise ValueError(f"non-JSON constant {c}")


#: One decoder for every line (``json.loads`` with options builds a new one per call).
_DECODER = json.JSONDecoder(parse_constant=_bad_constant)


def _loads(text: str) -> Any:
    # NaN/Infinity are not JSON and a deep "[[[[" nest must not escape as RecursionError.
    return _DECODER.decode(text)


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
    so recordings from other tools (Terminal-Bench, Harbor) with their own codes still replay. The events
    come as a compact :class:`EventLog`; a file is read line by line, never held whole."""
    name, lines, f = _source_lines(source)
    try:
        return _read_lines(name, lines)
    except OSError as e:  # opened, then reading failed: a disk error, a file that cannot be read (/proc/...)
        raise CastError(f"{name}: cannot read cast: {e}") from e
    finally:
        if f is not None:
            f.close()


def _read_lines(name: str, lines: Iterator[str]) -> Cast:
    first = next(lines, "")
    nxt = next(lines, None)
    if not first.strip():
        raise CastError(f"{name} line 1: expected a JSON header object, got an empty file")
    header, version = _header(name, first)
    events = EventLog()
    cast = Cast(header=header, version=version, events=events)
    now = 0.0
    lineno = 1
    while nxt is not None:
        line, nxt = nxt, next(lines, None)
        lineno += 1
        is_last = nxt is None  # split() leaves "" after a final newline: then this is that ""
        stripped = line.strip()
        if not stripped or (version == 3 and stripped.startswith("#")):
            continue
        try:
            ev = _loads(stripped)
        except (ValueError, RecursionError) as e:
            if is_last and stripped.startswith("["):
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
        events.append(CastEvent(round(now, 6), code, data))
    events.seal()
    return cast
