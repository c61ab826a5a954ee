"""The reports a verifier leaves beside its reward, kept beside the episode's casts.

Why here, in run: the verifier is what keeps them (``engine/run/verifier.py`` picks them out of
``/logs/verifier`` as it reads the reward), and the diagnosis (``engine/review``, above run) reads them
back from the recording folder to name the failing checks (``engine/review/checks.py`` parses them). Plain
files and names: no Docker, no store.
"""

from __future__ import annotations

from pathlib import Path

#: Reports the verifier may leave beside its reward (CTRF is what pytest-json-ctrf and others write).
REPORT_NAMES = ("ctrf.json", "ctrf-report.json", "report.json", "results.json")
#: Reports are kept beside an episode's casts as ``verifier-report-<name>``: flat, so they travel with the
#: casts wherever those go (a Ray node ships the recording folder's files).
REPORT_PREFIX = "verifier-report-"
MAX_REPORT_BYTES = 2 * 1024 * 1024


def pick_reports(files: dict[str, bytes]) -> dict[str, bytes]:
    """The files of ``/logs/verifier`` worth keeping as evidence: known report names, not too large."""
    return {n: b for n, b in files.items() if Path(n).name in REPORT_NAMES and len(b) <= MAX_REPORT_BYTES}


def save_reports(rec_dir: Path, reports: dict[str, bytes]) -> None:
    """Keeps the verifier's reports beside the episode's casts (``<rec_dir>/verifier-report-<name>``)."""
    for name, data in reports.items():
        (Path(rec_dir) / f"{REPORT_PREFIX}{Path(name).name}").write_bytes(data)


def load_reports(rec_dir: Path) -> dict[str, bytes]:
    """The reports saved beside the casts, by their original names."""
    return {
        p.name.removeprefix(REPORT_PREFIX): p.read_bytes()
        for p in sorted(Path(rec_dir).glob(f"{REPORT_PREFIX}*"))
        if p.is_file()
    }


__all__ = [
    "MAX_REPORT_BYTES",
    "REPORT_NAMES",
    "REPORT_PREFIX",
    "load_reports",
    "pick_reports",
    "save_reports",
]
