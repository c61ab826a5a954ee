#!/bin/bash
cat > /app/wordfreq.py <<'PY'
#!/usr/bin/env python3
"""Print the most frequent words of a text file: wordfreq.py FILE [N]."""

import re
import sys
from collections import Counter

USAGE = "usage: wordfreq.py FILE [N]  (N: a positive integer, default 10)"


def main(argv):
    if len(argv) not in (2, 3):
        print(USAGE, file=sys.stderr)
        return 2
    n = 10
    if len(argv) == 3:
        if not re.fullmatch(r"[0-9]+", argv[2]) or int(argv[2]) < 1:
            print(USAGE, file=sys.stderr)
            return 2
        n = int(argv[2])
    with open(argv[1], encoding="utf-8") as fh:
        counts = Counter(w.lower() for w in re.findall(r"[A-Za-z]+", fh.read()))
    ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))
    for word, count in ranked[:n]:
        print(f"{word}\t{count}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
PY
python3 /app/wordfreq.py /app/sample.txt 5
