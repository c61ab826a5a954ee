#!/bin/bash
cd /app
cut -d' ' -f1 access.log | uniq | wc -l > /app/unique_ips.txt
cat /app/unique_ips.txt
