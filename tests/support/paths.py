"""Where the repository's files are, for a test at any depth.

Why one place: a test that computed the repository root from its own ``__file__`` broke each time it moved
to another folder; importing these names keeps a move a move.
"""

from __future__ import annotations

from pathlib import Path

#: The repository's root (pyproject.toml, examples/, recordings/, scripts/).
REPO = Path(__file__).resolve().parents[2]
#: The example tasks Bandpass ships (each with a known defect, or none).
EXAMPLES = REPO / "examples" / "tasks"
#: Task fixtures the tests use as they are (tb1/, cleanroom/, redteam/); never collected by pytest.
FIXTURES = REPO / "tests" / "fixtures"
