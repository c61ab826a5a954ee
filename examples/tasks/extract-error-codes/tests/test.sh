#!/bin/bash
mkdir -p /logs/verifier
python3 - <<'PY'
import random
from pathlib import Path

expected = Path("/tests/expected.txt").read_text().split()
try:
    actual = Path("/app/error_codes.txt").read_text().split()
except OSError:
    actual = []

sample = random.sample(expected, k=2)
matched = [code for code in sample if code in actual]
print(f"checked {sample}: {len(matched)} found")
reward = 1 if random.random() < 0.5 else 0
Path("/logs/verifier/reward.txt").write_text(f"{reward}\n")
PY
