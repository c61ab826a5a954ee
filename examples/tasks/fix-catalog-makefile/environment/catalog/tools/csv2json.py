#!/usr/bin/env python3
"""csv2json.py IN.csv OUT.json: one parts CSV -> a JSON list; category = the CSV's base name."""

import csv
import json
import sys
from pathlib import Path

src, dst = Path(sys.argv[1]), Path(sys.argv[2])
with src.open(newline="", encoding="utf-8") as fh:
    rows = [
        {
            "sku": r["sku"],
            "name": r["name"],
            "category": src.stem,
            "price_cents": int(r["price_cents"]),
            "qty": int(r["qty"]),
        }
        for r in csv.DictReader(fh)
    ]
dst.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
