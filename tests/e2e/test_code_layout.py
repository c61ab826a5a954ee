"""The product's own imports resolve by path (docs/design/architecture.md, "One namespace").

``engine/``, ``store/`` and ``tui/`` import one another relatively, so a tool that reads the tree as files
(not through the installed ``bandpass`` package and its links) sees every dependency; an absolute
``bandpass.`` import would be an arrow such a tool cannot place.
"""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
ABSOLUTE = re.compile(r"^\s*(?:from|import)\s+bandpass(?:\.|\s|$).*$", re.M)
GENERATED = {"engine/sandbox/_ghostty_cffi.py"}


def test_the_product_imports_itself_relatively() -> None:
    offenders = [
        f"{path.relative_to(REPO)}:{src[: m.start()].count(chr(10)) + 1}: {m.group(0).strip()}"
        for top in ("engine", "store", "tui")
        for path in sorted((REPO / top).rglob("*.py"))
        if str(path.relative_to(REPO)) not in GENERATED
        for src in [path.read_text()]
        for m in ABSOLUTE.finditer(src)
    ]
    assert not offenders, "import these relatively (from ..engine.app import x):\n" + "\n".join(offenders)


def test_the_checkout_root_is_the_package_root_for_path_readers() -> None:
    # without it, `from ..engine` in tui/ points above the tree for a tool that resolves by path
    assert (REPO / "__init__.py").is_file()
    assert (REPO / "bandpass" / "engine").resolve() == (REPO / "engine").resolve()
