"""Failing checks out of a verifier's output: which tests failed, and the line that says why.

Why a parser per format: the failing checks are the strongest evidence a failure has (two episodes that
fail the same check usually fail for the same reason), and verifiers print them in many shapes. Only
pytest's short summary used to be read, so every other verifier looked like it failed "on nothing" and
grouping fell back to the outcome alone (mis-grouping, then mis-tagging). Read here: pytest (the short
summary, ``-v`` progress lines and ``-rA`` sections), a CTRF JSON report left in ``/logs/verifier``,
unittest, TAP, and a generic ``expected X, got Y`` fallback for hand-written shell verifiers. (The
reports themselves are kept beside the casts by the verifier: ``engine/run/verifier_reports.py``.)

Everything is pure text processing (no Docker, no store): the diagnosis runs it over 10,000 stored
episodes in seconds.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

from .signatures import normalise_line
from .text import strip_controls


@dataclass(frozen=True)
class FailedCheck:
    """One failing check. ``name`` is normalised (``file::test`` for pytest-like ids) so the same test
    reads the same across episodes; ``line`` is the verifier-output line it was found on (-1: a report
    file), so evidence can quote and seek to it."""

    name: str
    source: str  # pytest | ctrf | unittest | tap | generic
    message: str = ""
    line: int = -1

    def as_dict(self) -> dict[str, Any]:
        return {"name": self.name, "source": self.source, "message": self.message, "line": self.line}


_PYTEST_SUMMARY = re.compile(r"^(?:FAILED|ERROR)\s+(\S+::\S+?|\S+\.py)(?:\s+-\s+(.*))?$")
_PYTEST_PROGRESS = re.compile(r"^(\S+::\S+)\s+(?:FAILED|ERROR)\b")
_PYTEST_RA_HEADER = re.compile(r"^_{3,}\s+(?:ERROR at \w+ of )?(\S+?)\s+_{3,}$")
_PYTEST_E_LINE = re.compile(r"^E\s+(.*)$")
_UNITTEST = re.compile(r"^(FAIL|ERROR):\s+(\w+)\s+\(([\w.]+)\)")
_TAP = re.compile(r"^\s*not ok\s+(\d+)\s*(?:-\s*)?(.*?)(?:\s*#\s*(TODO|SKIP)\b.*)?$", re.IGNORECASE)
_GENERIC = (
    re.compile(
        r"\bexpected\b[=:\s]+(.{1,120}?)[,;]?\s+(?:but\s+)?(?:got|actual|found|was)\b[=:\s]+(.{1,120})",
        re.IGNORECASE,
    ),
    re.compile(r"\b(?:FAIL|FAILED|ERROR)\b[:\s-]+(.{3,160})$"),
    re.compile(r"^\s*AssertionError:?\s*(.*)$"),
)
_PARAMS = re.compile(r"\[[^\]]*\]$")


def normalise_name(name: str) -> str:
    """Stable id for a check: path separators unified, a leading ``/tests/`` or ``tests/`` kept as
    ``tests/``, whitespace collapsed. Parameter ids are kept (``test_x[3]`` and ``test_x[4]`` differ)."""
    n = name.strip().replace("\\", "/")
    n = re.sub(r"^(?:/+tests/|\./tests/)", "tests/", n)
    return " ".join(n.split())


def _pytest(lines: list[str]) -> list[FailedCheck]:
    found: dict[str, FailedCheck] = {}
    reasons: dict[str, str] = {}
    section: str | None = None
    for i, raw in enumerate(lines):
        line = raw.strip()
        m = _PYTEST_RA_HEADER.match(line)
        if m and ("::" in m.group(1) or m.group(1).startswith("test")):
            section = m.group(1)
            continue
        if section is not None:
            e = _PYTEST_E_LINE.match(raw)
            if e and section not in reasons:
                reasons[section] = e.group(1).strip()
            if line.startswith("=") or line.startswith("PASSED") or line.startswith("short test summary"):
                section = None
        m = _PYTEST_SUMMARY.match(line)
        if m:
            name = normalise_name(m.group(1))
            found.setdefault(name, FailedCheck(name, "pytest", (m.group(2) or "").strip(), i))
            continue
        m = _PYTEST_PROGRESS.match(line)
        if m:
            name = normalise_name(m.group(1))
            found.setdefault(name, FailedCheck(name, "pytest", "", i))
    out = []
    for name, check in found.items():
        if not check.message:
            short = name.rsplit("::", 1)[-1]
            why = reasons.get(short) or next((r for k, r in reasons.items() if k.endswith(short)), "")
            check = FailedCheck(name, check.source, why, check.line)
        out.append(check)
    return out


def _unittest(lines: list[str]) -> list[FailedCheck]:
    out: dict[str, FailedCheck] = {}
    for i, line in enumerate(lines):
        m = _UNITTEST.match(line.strip())
        if not m:
            continue
        # Python 3.11+ prints ``(module.Class.test)``, older ones ``(module.Class)``.
        where, test = m.group(3), m.group(2)
        name = where if where.endswith(f".{test}") else f"{where}.{test}"
        msg = ""
        for follow in lines[i + 1 : i + 40]:  # the traceback's last line is the reason
            s = follow.strip()
            if s.startswith(("AssertionError", "Error", "Exception")) or re.match(r"^\w+Error\b", s):
                msg = s
            if s.startswith(("FAIL:", "ERROR:", "Ran ", "---")) and msg:
                break
        out.setdefault(name, FailedCheck(name, "unittest", msg, i))
    return list(out.values())


def _tap(lines: list[str]) -> list[FailedCheck]:
    if not any(re.match(r"^\s*(?:ok|not ok)\s+\d+", ln) for ln in lines):
        return []
    out = []
    for i, line in enumerate(lines):
        m = _TAP.match(line)
        if not m or m.group(3):  # TODO/SKIP failures are not failures
            continue
        desc = m.group(2).strip()
        msg = ""
        for follow in lines[i + 1 : i + 12]:  # YAML diagnostics block: "message: ..."
            fm = re.match(r"^\s+(?:message|got|found):\s*(.*)$", follow)
            if fm:
                msg = fm.group(1).strip().strip("'\"")
                break
            if re.match(r"^\s*(?:ok|not ok)\s+\d+", follow):
                break
        out.append(FailedCheck(normalise_name(desc or f"test {m.group(1)}"), "tap", msg, i))
    return out


def _generic(lines: list[str]) -> list[FailedCheck]:
    out: dict[str, FailedCheck] = {}
    for i, line in enumerate(lines):
        s = line.strip()
        if not s or len(s) > 400:
            continue
        # A generic check is named by its line with the values that vary run to run taken out
        # (numbers, hex ids), so "expected 8, got 53" and "expected 8, got 51" are the same check.
        m = _GENERIC[0].search(s)
        if m:
            name = normalise_line(s[: m.start()].rstrip(" :-")) or "expected/got"
            out.setdefault(name, FailedCheck(name, "generic", s, i))
            continue
        for pat in _GENERIC[1:]:
            m = pat.search(s)
            if m and not s.startswith(("PASS", "ok ")):
                name = normalise_line(_PARAMS.sub("", m.group(1)).strip(" .:") or s)[:120]
                out.setdefault(name, FailedCheck(name, "generic", s, i))
                break
    return list(out.values())[:20]


def ctrf_checks(report: bytes | str | dict[str, Any]) -> list[FailedCheck]:
    """Failed tests of a CTRF report (``{"results": {"tests": [{"name", "status", "message"}...]}}``)."""
    try:
        data = report if isinstance(report, dict) else json.loads(report)
        tests = data["results"]["tests"]
    except (ValueError, KeyError, TypeError):
        return []
    out = []
    for t in tests if isinstance(tests, list) else []:
        if not isinstance(t, dict) or t.get("status") not in ("failed", "error"):
            continue
        name = str(t.get("name") or "")
        if t.get("filePath") and "::" not in name:
            name = f"{t['filePath']}::{name}"
        msg = str(t.get("message") or t.get("trace") or "").strip().splitlines()
        out.append(FailedCheck(normalise_name(name), "ctrf", msg[0][:300] if msg else "", -1))
    return out


def failed_checks(verifier_output: str, reports: dict[str, bytes] | None = None) -> list[FailedCheck]:
    """Every failing check the verifier reported, most structured source first: a CTRF report beats
    pytest's text, which beats unittest and TAP, which beat the generic fallback (used only when no
    framework spoke, so a pytest log's ``E  expected 42 got 41`` is not counted twice)."""
    for name, data in (reports or {}).items():
        if name.endswith(".json"):
            found = ctrf_checks(data)
            if found:
                return found
    lines = strip_controls(verifier_output).splitlines()
    for parser in (_pytest, _unittest, _tap):
        found = parser(lines)
        if found:
            return found
    return _generic(lines)


def check_names(checks: list[FailedCheck]) -> tuple[str, ...]:
    return tuple(sorted({c.name for c in checks}))
