"""The command line every docs generator in ``scripts/`` shares: write the generated page, or ``--check``
that the checked-in page is current.

Why shared: ``gen_cli_docs.py`` and ``gen_codes_docs.py`` each render one page from the code; how that page
is written, and how CI tells a stale one (exit 1, saying how to regenerate it), must be the same for both,
so a third generator gets it by calling :func:`main` rather than by copying it again.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def main(
    render: Callable[[], str],
    doc: str | None,
    default_out: Path,
    regenerate: str,
    *,
    changed: str,
    matches: str,
) -> int:
    """Parse ``[--out PATH] [--check]``, render the page and write it to ``--out``; with ``--check`` write
    nothing and exit 1 when ``--out`` differs from the render.

    ``doc`` is the script's docstring (its first line describes it in ``--help``); ``regenerate`` is the
    command the stale message tells to run; ``changed`` names what drifted in that message ("the codes
    changed") and ``matches`` what the page was checked against ("matches the code").
    """
    ap = argparse.ArgumentParser(description=(doc or "").partition("\n")[0])
    ap.add_argument("--out", type=Path, default=default_out)
    ap.add_argument("--check", action="store_true", help="exit 1 when --out is stale; write nothing")
    args = ap.parse_args()
    page = render()
    if args.check:
        current = args.out.read_text(encoding="utf-8") if args.out.is_file() else ""
        if current != page:
            print(
                f"{args.out} is stale: {changed} changed. Regenerate it with `{regenerate}`.", file=sys.stderr
            )
            return 1
        print(f"{args.out} matches {matches}")
        return 0
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(page, encoding="utf-8")
    print(f"wrote {args.out} ({page.count(chr(10))} lines)")
    return 0
