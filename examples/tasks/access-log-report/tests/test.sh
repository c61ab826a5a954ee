#!/bin/bash
# Verifier: compares /app/report.csv with the expected report; reward 1 only on an exact match.
mkdir -p /logs/verifier
if python3 -I /tests/check_report.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
