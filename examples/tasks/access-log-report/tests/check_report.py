"""Compare the agent's report with the expected one, row by row, and explain any difference."""

import sys
from pathlib import Path

EXPECTED = Path("/tests/expected.csv")
ACTUAL = Path("/app/report.csv")


def rows(path: Path) -> list[str]:
    text = path.read_text(encoding="utf-8")
    return [line.rstrip("\r") for line in text.rstrip("\n").split("\n")]


def main() -> int:
    if not ACTUAL.is_file():
        print(f"FAIL: {ACTUAL} does not exist")
        return 1
    try:
        got = rows(ACTUAL)
    except UnicodeDecodeError:
        print(f"FAIL: {ACTUAL} is not UTF-8 text")
        return 1
    want = rows(EXPECTED)
    if got == want:
        print(f"PASS: {len(want) - 1} rows match")
        return 0
    if not got or got[0] != want[0]:
        print(f"FAIL: header is {got[:1]!r}, expected {want[0]!r}")
        return 1
    for i, (g, w) in enumerate(zip(got, want, strict=False), start=1):
        if g != w:
            print(f"FAIL: line {i} is {g!r}, expected {w!r}")
            return 1
    print(f"FAIL: {len(got)} lines, expected {len(want)}")
    return 1


if __name__ == "__main__":
    sys.exit(main())
