#!/bin/bash
mkdir -p /logs/verifier
if cmp -s /app/allowlist.txt /tests/expected.txt; then
  echo "allowlist matches"
  echo 1 > /logs/verifier/reward.txt
else
  diff /tests/expected.txt /app/allowlist.txt | head -20
  echo 0 > /logs/verifier/reward.txt
fi
