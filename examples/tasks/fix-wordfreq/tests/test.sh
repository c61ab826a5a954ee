#!/bin/bash
# Verifier: runs /app/wordfreq.py on documents the agent has not seen and compares with a reference.
mkdir -p /logs/verifier
if python3 -I /tests/check_wordfreq.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
