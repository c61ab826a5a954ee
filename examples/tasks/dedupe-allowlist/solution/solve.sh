#!/bin/bash
cd /app
awk '{ d = tolower($0); gsub(/^[ \t\r]+|[ \t\r]+$/, "", d); if (d != "" && !seen[d]++) print d }' allowlist.txt > /tmp/allowlist.new
mv /tmp/allowlist.new /app/allowlist.txt
cat /app/allowlist.txt
