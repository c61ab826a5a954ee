"""The documentation holds together: the README stays a five-minute read that starts with the two commands,
every page under docs/ is reachable from its index, and no link between them points at a page or a heading
that is not there.

Why: the README was one 2,300-line file; split into docs/, its sections now refer to each other by links,
and a page renamed or a heading reworded would otherwise leave a reader at a dead end without anyone
noticing. The CLI reference itself is checked against the code in tests/tui/test_cli_reference.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from tests.support.paths import REPO

DOCS = REPO / "docs"
README = REPO / "README.md"
#: [text](target) outside code; images and autolinks are not used in these pages.
_LINK = re.compile(r"\[[^\]]*\]\(([^)\s]+)\)")


def _pages() -> list[Path]:
    return [README, *sorted(DOCS.rglob("*.md"))]


def _prose(text: str) -> str:
    """The text without fenced blocks and code spans, where brackets are code, not links."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _anchors(page: Path) -> set[str]:
    """GitHub's anchors for the page's headings."""
    found = set()
    for line in _prose_lines(page):
        m = re.match(r"^#{1,6} (.+?)\s*$", line)
        if m:
            found.add(re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-"))
    return found


def _prose_lines(page: Path) -> list[str]:
    lines, fenced = [], False
    for line in page.read_text(encoding="utf-8").splitlines():
        if line.startswith("```"):
            fenced = not fenced
        elif not fenced:
            lines.append(line.replace("`", ""))
    return lines


def test_every_link_between_the_pages_reaches_a_page_and_heading_that_exist() -> None:
    broken = []
    for page in _pages():
        for target in _LINK.findall(_prose(page.read_text(encoding="utf-8"))):
            if re.match(r"^[a-z]+:", target):  # http(s):, mailto: - not ours to check offline
                continue
            path, _, anchor = target.partition("#")
            dest = (page.parent / path).resolve() if path else page
            where = f"{page.relative_to(REPO)}: {target}"
            if not dest.exists():
                broken.append(f"{where} (no such file)")
            elif anchor and dest.suffix == ".md" and anchor not in _anchors(dest):
                broken.append(f"{where} (no heading with that anchor in {dest.relative_to(REPO)})")
    assert broken == [], "\n".join(broken)


def test_the_index_reaches_every_page_under_docs() -> None:
    index = DOCS / "README.md"
    linked = {(index.parent / t.partition("#")[0]).resolve() for t in _LINK.findall(index.read_text())}
    orphans = [str(p.relative_to(REPO)) for p in sorted(DOCS.rglob("*.md")) if p != index and p not in linked]
    assert orphans == [], f"pages docs/README.md does not link: {orphans}"


def test_the_readme_starts_with_the_two_commands_and_stays_short() -> None:
    text = README.read_text(encoding="utf-8")
    first_block = text.split("```", 2)[1]
    commands = [line.split("#")[0].strip() for line in first_block.splitlines()[1:] if line.strip()]
    assert commands == ["./scripts/demo", "./scripts/test"]  # .ci/run runs the second, as it is
    lines = text.count("\n")
    assert lines <= 200, (
        f"README.md has {lines} lines: it is the five-minute read (the two commands, the first ten minutes, "
        "where to go next); put the detail in the docs/ page its section lives in (docs/README.md lists them)"
    )
    assert "docs/README.md" in text  # where to go next
