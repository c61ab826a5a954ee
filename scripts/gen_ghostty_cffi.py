"""Regenerates ``engine/sandbox/_ghostty_cffi.py``: libghostty-vt's C declarations, pre-parsed by cffi.

Why: pyghostty loads the library in cffi's in-line ABI mode, which parses its 80 KB of C declarations
with pycparser on every import (0.1-0.3 s here, more under load), so every process that touched a screen
paid it. cffi's *out-of-line* ABI mode does that parse once, here, and writes a Python module holding the
parsed types; importing it and ``dlopen``-ing the same bundled library takes ~10 ms, and no C compiler is
involved. The declarations are pyghostty's own (``pyghostty._cdef.CDEF``, the version pinned in
pyproject.toml, plus the struct twins its ``_ffi.py`` adds); ``tests/e2e/test_startup.py`` fails when the
committed module no longer matches them.

    .venv/bin/python scripts/gen_ghostty_cffi.py [--out engine/sandbox/_ghostty_cffi.py]
"""

from __future__ import annotations

import argparse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MODULE = "bandpass.engine.sandbox._ghostty_cffi"
DEFAULT_OUT = ROOT / "engine" / "sandbox" / "_ghostty_cffi.py"


def generate(out: Path) -> None:
    import sys

    from cffi import FFI
    from pyghostty._cdef import CDEF

    sys.path.insert(0, str(ROOT))
    from bandpass.engine.sandbox.ghostty import TWINS_CDEF

    builder = FFI()
    builder.cdef(CDEF)
    builder.cdef(TWINS_CDEF)  # pyghostty's struct twins of by-value unions (see engine/sandbox/ghostty.py)
    builder.set_source(MODULE, None)  # None: ABI mode, nothing to compile
    builder.emit_python_code(str(out))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=DEFAULT_OUT)
    args = ap.parse_args()
    generate(args.out)
    print(f"wrote {args.out} ({args.out.stat().st_size:,} bytes)")


if __name__ == "__main__":
    main()
