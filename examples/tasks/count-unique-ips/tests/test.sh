#!/bin/bash
mkdir -p /logs/verifier
expected=$(tr -d '[:space:]' < /tests/expected_count)
actual=$(tr -d '[:space:]' < /app/unique_ips.txt 2>/dev/null)
echo "expected=$expected actual=$actual"
if [ -n "$actual" ] && [ "$actual" = "$expected" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
