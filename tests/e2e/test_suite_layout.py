"""The suite's own layout holds: tests live in folders that mirror the packages, and share code only
through tests/support/ and conftest.py fixtures.

Why: a test that imports another test module drags that module's fixtures, marks and module-scoped state
into its own run (and breaks when the other file moves); a test file outside the mirrored folders is one a
newcomer cannot find from the code it tests. Both crept in once when the suite was one flat folder.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.support.paths import REPO

TESTS = REPO / "tests"
#: Folders under tests/ that mirror no package: cross-cutting tests, shared code, task data.
CROSS_CUTTING = TESTS / "e2e"
SUPPORT = TESTS / "support"
DATA = TESTS / "fixtures"  # task directories run inside containers, never imported or collected


def _python_files(*roots: Path) -> list[Path]:
    return sorted(p for root in roots for p in root.rglob("*.py") if DATA not in p.parents)


def _imported_modules(path: Path) -> list[tuple[int, str]]:
    """Every module the file imports, top-level or inside a function, as (line, dotted name)."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.append((node.lineno, node.module))
            # ``from tests.support import paths`` names a module too
            found += [(node.lineno, f"{node.module}.{alias.name}") for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level > 0:
            found.append((node.lineno, "." * node.level + (node.module or "")))
    return found


def test_every_test_file_lives_in_a_folder_that_mirrors_a_package_or_in_e2e() -> None:
    misplaced = []
    for path in _python_files(TESTS):
        if not path.name.startswith("test_"):
            continue
        folder = path.parent.relative_to(TESTS)
        mirrors = (
            folder.parts[:1] in {("engine",), ("store",), ("tui",)}
            and (REPO / folder / "__init__.py").is_file()
        )
        if not (mirrors or path.parent == CROSS_CUTTING):
            misplaced.append(str(path.relative_to(REPO)))
    assert misplaced == [], (
        "test files must sit in tests/<package path>/ (e.g. tests/engine/run/ for engine/run/) or, when they "
        f"test across packages, in tests/e2e/: {misplaced}"
    )


def test_every_folder_of_the_suite_is_a_package() -> None:
    """Without ``__init__.py`` two test files with one name in two folders would clash on import."""
    missing = sorted(
        str(folder.relative_to(REPO))
        for folder in {p.parent for p in _python_files(TESTS)}
        if not (folder / "__init__.py").is_file()
    )
    assert missing == [], f"add an empty __init__.py to: {missing}"


def test_no_test_module_imports_another_test_module_or_a_conftest() -> None:
    """Tests share code through tests/support/ (plain modules) and fixtures through conftest.py files,
    which pytest finds by folder; nothing imports a ``test_*`` module or a conftest."""
    bad: dict[str, str] = {}  # one finding per import statement
    for path in _python_files(TESTS):
        where = path.relative_to(REPO)
        for line, module in _imported_modules(path):
            if f"{where}:{line}" in bad:
                continue
            top, leaf = module.split(".")[0], module.rsplit(".", 1)[-1]
            if module.startswith("."):
                bad[f"{where}:{line}"] = f"relative import {module!r}"
            elif top == "tests" and (leaf.startswith("test_") or leaf == "conftest"):
                bad[f"{where}:{line}"] = f"imports {module}"
            elif (
                top == "tests"
                and module not in {"tests", "tests.support"}
                and not module.startswith("tests.support.")
            ):
                bad[f"{where}:{line}"] = f"imports {module} (shared code goes in tests/support/)"
    assert bad == {}, "\n".join(f"{at}: {what}" for at, what in bad.items())


def test_support_holds_no_tests_and_the_root_holds_only_conftest() -> None:
    assert [p.name for p in SUPPORT.rglob("test_*.py")] == []
    assert sorted(p.name for p in TESTS.glob("*.py")) == ["__init__.py", "conftest.py"]
