#!/bin/bash
cd /app
cat > /tmp/summarize.py <<'PY'
import csv, json
from collections import defaultdict
values = defaultdict(list)
with open("/app/measurements.csv", newline="") as fh:
    for row in csv.DictReader(fh):
        try:
            values[row["sensor"]].append(float(row["value"]))
        except (TypeError, ValueError):
            pass
summary = {s: {"count": len(v), "mean": round(sum(v) / len(v), 3), "min": min(v), "max": max(v)} for s, v in values.items()}
with open("/app/summary.json", "w") as fh:
    json.dump(summary, fh, indent=2)
PY
python3 /tmp/summarize.py
cat /app/summary.json
