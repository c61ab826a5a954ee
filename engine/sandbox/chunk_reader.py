"""A readable file object over an iterator of byte chunks.

The engine's archive API hands back tar streams as chunk iterators (docker-py's ``get_archive`` and a raw
``iter_content``); ``tarfile``'s streaming mode (``mode="r|"``) wants a file object. Wrapping the
iterator keeps the archive streaming: nothing is held beyond the chunk being read.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from typing import Any


class ChunkReader(io.RawIOBase):
    """``readinto`` from the next chunk(s); end of file when the iterator is exhausted."""

    def __init__(self, chunks: Iterator[bytes]) -> None:
        self._chunks, self._buf = chunks, b""

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        while not self._buf:
            try:
                self._buf = next(self._chunks)
            except StopIteration:
                return 0
        n = min(len(b), len(self._buf))
        b[:n], self._buf = self._buf[:n], self._buf[n:]
        return n
