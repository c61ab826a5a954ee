#!/bin/bash
# Verifier: starts a pristine copy of the service with the agent's /app/kv.ini and queries it.
mkdir -p /logs/verifier
if python3 -I /tests/check_service.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
