#!/usr/bin/env python3
"""Print the most frequent words of a text file: wordfreq.py FILE [N]."""

import sys
from collections import Counter


def words(text):
    for token in text.split():
        token = token.strip(".,;:")
        if token:
            yield token


def main(argv):
    if len(argv) not in (2, 3):
        print("usage: wordfreq.py FILE [N]", file=sys.stderr)
        return 2
    n = int(argv[2]) if len(argv) == 3 else 10
    with open(argv[1], encoding="utf-8") as fh:
        counts = Counter(words(fh.read()))
    width = max(len(w) for w in counts)
    ranked = sorted(counts.items(), key=lambda kv: kv[1], reverse=True)
    for word, count in ranked[:n]:
        print(f"{word:<{width}}\t{count}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
