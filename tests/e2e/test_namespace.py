"""Bandpass installs as one package, ``bandpass``: an environment it is installed into gains no generic
top-level ``engine``, ``store`` or ``tui`` (docs/design/architecture.md: One namespace)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from tests.support.paths import REPO


def _python(code: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {"PATH": "/usr/bin:/bin", "HOME": str(cwd)}  # no PYTHONPATH: only what is installed
    return subprocess.run([sys.executable, "-c", code], cwd=cwd, env=env, capture_output=True, text=True)


def test_only_the_bandpass_namespace_is_importable_outside_the_repository(tmp_path: Path) -> None:
    ok = _python("import bandpass.engine.core.outcomes, bandpass.store.db, bandpass.tui.cli", tmp_path)
    assert ok.returncode == 0, ok.stderr
    for name in ("engine", "store", "tui"):
        res = _python(f"import {name}", tmp_path)
        assert res.returncode != 0 and "No module named" in res.stderr, (name, res.stdout, res.stderr)


def test_python_dash_m_bandpass_is_the_command(tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "bandpass", "--help"], cwd=tmp_path, capture_output=True, text=True
    )
    assert res.returncode == 0 and "Usage: python -m bandpass" in res.stdout, res.stderr


def test_the_package_links_to_the_top_level_folders() -> None:
    for name in ("engine", "store", "tui"):
        link = REPO / "bandpass" / name
        assert link.is_symlink() and link.resolve() == (REPO / name).resolve(), link
