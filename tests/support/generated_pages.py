"""Checks for a docs page that a script in ``scripts/`` generates from the code (``docs/reference/cli.md``
by ``gen_cli_docs.py``, ``docs/reference/codes.md`` by ``gen_codes_docs.py``).

Why shared: each such page has the same two promises, checked the same way through the script's own
``--check`` (what CI and a developer run): the committed page matches the code, and a stale page fails the
check with a message that says how to regenerate it. Each page's test module calls these with its script
and page, and keeps only the checks of what that page says.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO


def run_check(script: str, page: Path) -> subprocess.CompletedProcess[str]:
    """``script --check --out page`` (``script`` relative to the repository), as CI runs it."""
    return subprocess.run(
        [sys.executable, str(REPO / script), "--check", "--out", str(page)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )


def assert_committed_page_current(script: str, page: str, source: str) -> None:
    """The committed ``page`` (relative to the repository) is what ``script`` renders now; on failure the
    message names ``source`` (what the page no longer matches) and the command that regenerates it."""
    res = run_check(script, REPO / page)
    assert res.returncode == 0, (
        f"{page} no longer matches {source} ({res.stderr.strip()}). Regenerate it: .venv/bin/python {script}"
    )


def assert_stale_page_fails_check(script: str, page: str, tmp_path: Path, old: str, new: str) -> None:
    """A copy of the committed ``page`` with ``old`` replaced by ``new`` fails ``script --check`` (exit 1),
    and the message says the page is stale and names the script that regenerates it."""
    stale = tmp_path / Path(page).name
    stale.write_text((REPO / page).read_text(encoding="utf-8").replace(old, new))
    res = run_check(script, stale)
    assert res.returncode == 1
    assert "is stale" in res.stderr and script in res.stderr
