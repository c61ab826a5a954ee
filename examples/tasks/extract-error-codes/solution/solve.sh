#!/bin/bash
cd /app
grep -E '^[^ ]+ ERROR ' service.log | grep -oE '\[E[0-9]+\]' | tr -d '[]' | LC_ALL=C sort -u > /app/error_codes.txt
cat /app/error_codes.txt
