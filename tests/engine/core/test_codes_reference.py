"""docs/reference/codes.md lists every outcome code and failure tag as engine/core defines them: generated
by scripts/gen_codes_docs.py from outcomes.py and taxonomy.toml, and checked here so that a new code, a
changed retry rule or a reworded tag fails CI until the page is regenerated."""

from __future__ import annotations

from pathlib import Path

from bandpass.engine.core import outcomes
from bandpass.engine.core.taxonomy import load_taxonomy
from tests.support.generated_pages import assert_committed_page_current, assert_stale_page_fails_check
from tests.support.paths import REPO

SCRIPT = "scripts/gen_codes_docs.py"
PAGE = "docs/reference/codes.md"


def test_the_committed_codes_reference_matches_the_code() -> None:
    assert_committed_page_current(SCRIPT, PAGE, "engine/core")


def test_every_code_a_curator_can_meet_has_its_row() -> None:
    page = (REPO / PAGE).read_text(encoding="utf-8")
    for code in outcomes.AGENT_CODES:
        assert f"| `agent_error:{code}` |" in page
    for code in outcomes.INFRA_CODES:
        retried = "yes" if code in outcomes.RETRYABLE_INFRA else "no"
        assert f"| `infra_error:{code}` | {retried} |" in page
    for tag in load_taxonomy().names():
        assert f"| `{tag}` |" in page


def test_a_stale_page_fails_the_check_and_says_how_to_regenerate(tmp_path: Path) -> None:
    assert_stale_page_fails_check(SCRIPT, PAGE, tmp_path, "`infra_error:oom` | no", "`infra_error:oom` | yes")
