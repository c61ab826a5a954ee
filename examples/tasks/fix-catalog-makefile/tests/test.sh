#!/bin/bash
# Verifier: builds a pristine copy of the project with the agent's Makefile, from clean, incrementally
# and in parallel, and compares the outputs with a reference computed from the sources.
mkdir -p /logs/verifier
if python3 -I /tests/check_build.py; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
