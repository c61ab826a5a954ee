"""The store's query package (store/queries/__init__.py) loads each aggregate's module only when it is used:
a listing on plain sqlite3 pays for no ORM, every re-exported name still resolves, and the two names that
are both a module and a function (``episodes``, ``batches``) stay the function in any import order."""

from __future__ import annotations

import ast
import subprocess
import sys

from tests.support.paths import REPO

PROBE = """
import sys
import bandpass.store.queries.diagnoses  # what `bandpass episodes` reads through
assert "sqlalchemy" not in sys.modules, "the plain listing loaded the ORM"
import bandpass.store.queries.episodes, bandpass.store.queries.batches  # the modules first, on purpose
from bandpass.store import queries
import importlib
assert callable(queries.episodes) and callable(queries.batches), (queries.episodes, queries.batches)
for name, module in queries._WHERE.items():
    assert getattr(queries, name) is getattr(importlib.import_module(module), name), name
from bandpass.store.queries import episodes, get_episode, Task
assert callable(episodes) and get_episode.__module__.endswith(".episodes") and Task.__name__ == "Task"
print(len(queries.__all__))
"""


def test_names_resolve_lazily_and_a_plain_listing_loads_no_orm() -> None:
    proc = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert int(proc.stdout) > 90  # every name of the eleven re-exporting modules


def test_the_type_checker_and_the_runtime_see_the_same_names() -> None:
    """The imports mypy reads (under TYPE_CHECKING) and the map the package loads from at run time are
    written twice; a name added to one only is an error here, not a surprise in a command."""
    from bandpass.store import queries

    tree = ast.parse((REPO / "store" / "queries" / "__init__.py").read_text())
    guarded = next(n for n in tree.body if isinstance(n, ast.If) and ast.unparse(n.test) == "TYPE_CHECKING")
    here = ["bandpass", "store", "queries"]  # relative imports (from ..models import X) resolve from here

    def absolute(imp: ast.ImportFrom) -> str | None:
        if not imp.level:
            return imp.module
        return ".".join(here[: len(here) - imp.level + 1] + ([imp.module] if imp.module else []))

    typed = {
        (absolute(imp), alias.name)
        for imp in guarded.body
        if isinstance(imp, ast.ImportFrom)
        for alias in imp.names
    }
    runtime = {(module, name) for name, module in queries._WHERE.items()}
    assert typed == runtime
    assert sorted(queries.__all__) == sorted(name for _, name in typed)
