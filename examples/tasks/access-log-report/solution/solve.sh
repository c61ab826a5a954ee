#!/bin/bash
cd /app
awk '{ split($0, q, "\""); split(q[2], req, " "); path = req[2]; sub(/\?.*/, "", path); split(q[3], rest, " "); st = rest[1] + 0; if (st >= 200 && st < 300) { n[path]++; b[path] += (rest[2] == "-" ? 0 : rest[2]) } } END { for (p in n) printf "%s,%d,%d\n", p, n[p], b[p] }' access.log | sort -t, -k2,2nr -k1,1 > /tmp/rows.csv
{ echo "path,requests,bytes"; cat /tmp/rows.csv; } > /app/report.csv
