#!/usr/bin/env python3
"""merge.py OUT.json IN.json...: merge per-category part lists into the catalog."""

import json
import sys
from pathlib import Path

parts = []
for p in sys.argv[2:]:
    parts.extend(json.loads(Path(p).read_text(encoding="utf-8")))
parts.sort(key=lambda r: r["sku"])
catalog = {
    "count": len(parts),
    "total_value_cents": sum(r["price_cents"] * r["qty"] for r in parts),
    "parts": parts,
}
Path(sys.argv[1]).write_text(json.dumps(catalog, indent=1) + "\n", encoding="utf-8")
