"""``present(x)``: a value the test expects to be there, as its type without ``None``.

Why: a lookup the product types as ``T | None`` (a marker, a step, a row by id) is, in a test that just
made it, expected to exist; ``present`` says so in one word inside an assertion, fails the test at the
lookup when it is missing (not with an AttributeError a line later), and gives the type checker the
``T`` it then reads.
"""

from __future__ import annotations

from typing import TypeVar

T = TypeVar("T")


def present(value: T | None) -> T:
    assert value is not None, "expected a value, got None"
    return value
