"""The search query language: parsed once, then run three ways — as an SQLite FTS5 ``MATCH`` over the
index, against one line of text (which lines of a matching episode are the hits), and as spans to
highlight on a replayed screen.

Why our own parser in front of FTS5: FTS5's syntax rejects most of what a curator pastes from a terminal
(``kv.ini``, ``/app/kv.ini``, ``'x'``, ``--force`` are syntax errors there), and its errors name no position.
Here every bare word is split into the tokens FTS5 would make of it and searched as a phrase, so
``/app/kv.ini`` means the path, and a mistake is one line saying where and what was expected.

Syntax (documented in docs/guide/search.md):

- ``word`` — a word anywhere on the line (case and accents ignored); ``kv.ini`` or ``/app/kv.ini`` — those
  words next to each other;
- ``"command not found"`` — a phrase;
- ``modul*`` — a prefix (``"No module nam"*`` a phrase whose last word is a prefix);
- ``a b`` or ``a AND b``, ``a OR b``, ``a NOT b``, parentheses — boolean (AND/OR/NOT in capitals);
- ``>>>``, ``...``, ``&&`` — a word made only of symbols (2 to 8 of them) is searchable too: the index adds
  a token for each such word it sees, so a stuck Python prompt can be found.

Tokens follow FTS5's ``unicode61`` tokenizer (``remove_diacritics 2``): letters and digits form words,
everything else separates them, case and diacritics are folded.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cached_property
from typing import Union

from ..core.errors import BandpassError

#: Marks a symbol-word token in the index text (a private-use character, which FTS5's unicode61 tokenizer
#: keeps inside tokens and no terminal output contains): ``>>>`` is indexed as ``>>> \ue000x3e3e3e``.
SYMBOL_MARK = "\ue000"
_SYMBOL_TOKEN = re.compile(" " + SYMBOL_MARK + "x[0-9a-f]+")
_WORD = re.compile(r"[^\W_]+")
_SPACE_SPLIT = re.compile(r"\S+")
SYMBOL_MIN, SYMBOL_MAX = 2, 8


class QueryError(BandpassError, ValueError):
    """A query that cannot be parsed; the message says where and what was expected."""


def _fold(text: str) -> str:
    """Case and diacritics folded, as unicode61 with remove_diacritics does."""
    if text.isascii():
        return text.lower()
    decomposed = unicodedata.normalize("NFKD", text)
    return "".join(c for c in decomposed if not unicodedata.combining(c)).lower()


def _is_symbol_word(word: str) -> bool:
    return SYMBOL_MIN <= len(word) <= SYMBOL_MAX and _WORD.search(word) is None


def symbol_token(word: str) -> str:
    return SYMBOL_MARK + "x" + word.encode("utf-8").hex()


#: One pass over a line: a standalone word of 2-8 symbols, or a run of letters and digits.
_TOKEN = re.compile(rf"(?<!\S)(?:[^\w\s]|_){{{SYMBOL_MIN},{SYMBOL_MAX}}}(?!\S)|[^\W_]+")


def tokens(text: str) -> list[tuple[str, int, int]]:
    """``[(token, start, end)]`` of one line of (display) text, in order: words as FTS5 makes them, plus a
    token for each standalone symbol word (``>>>``)."""
    out: list[tuple[str, int, int]] = []
    ascii_line = text.isascii()
    for m in _TOKEN.finditer(text):
        w = m.group()
        if w[0].isalnum():
            out.append((w.lower() if ascii_line else _fold(w), m.start(), m.end()))
        else:
            out.append((symbol_token(w), m.start(), m.end()))
    return out


def index_text(line: str) -> str:
    """A display line as the index stores it: symbol words get their token appended in place."""
    if SYMBOL_MARK in line:
        line = line.replace(SYMBOL_MARK, " ")  # never let output forge a token
    if line.isalnum() or " " not in line and not _is_symbol_word(line):
        return line
    parts: list[str] = []
    last = 0
    for chunk in _SPACE_SPLIT.finditer(line):
        if _is_symbol_word(chunk.group()):
            parts.append(line[last : chunk.end()])
            parts.append(" " + symbol_token(chunk.group()))
            last = chunk.end()
    if not parts:
        return line
    parts.append(line[last:])
    return "".join(parts)


def display_text(stored: str) -> str:
    """The index's text of a line as the terminal showed it (symbol-word tokens removed)."""
    return _SYMBOL_TOKEN.sub("", stored) if SYMBOL_MARK in stored else stored


# --- the parsed query ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Phrase:
    """Consecutive tokens; ``prefix``: the last one only has to start the word."""

    words: tuple[str, ...]
    prefix: bool = False
    text: str = ""  # as the curator wrote it


@dataclass(frozen=True)
class And:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Or:
    parts: tuple[Node, ...]


@dataclass(frozen=True)
class Not:
    keep: Node
    drop: Node


Node = Union[Phrase, And, Or, Not]  # noqa: UP007 - a runtime alias of dataclasses


_LEX = re.compile(r'\s+|(?P<q>"(?:[^"]*)"\*?)|(?P<open>\()|(?P<close>\))|(?P<bad>")|(?P<w>[^\s()"]+)')


@dataclass
class _Tok:
    kind: str  # word | phrase | op | ( | )
    text: str
    pos: int


def _lex(query: str) -> list[_Tok]:
    out: list[_Tok] = []
    pos = 0
    while pos < len(query):
        m = _LEX.match(query, pos)
        assert m is not None  # every character is matched by one branch
        if m.group("q") is not None:
            out.append(_Tok("phrase", m.group("q"), pos))
        elif m.group("open"):
            out.append(_Tok("(", "(", pos))
        elif m.group("close"):
            out.append(_Tok(")", ")", pos))
        elif m.group("bad"):
            raise QueryError(f'unclosed quote at column {pos + 1}: {query[pos:][:30]!r} (close it with ")')
        elif m.group("w"):
            w = m.group("w")
            out.append(_Tok("op" if w in ("AND", "OR", "NOT") else "word", w, pos))
        pos = m.end()
    return out


class _Parser:
    def __init__(self, query: str) -> None:
        self.query = query
        self.toks = _lex(query)
        self.i = 0

    def peek(self) -> _Tok | None:
        return self.toks[self.i] if self.i < len(self.toks) else None

    def where(self, tok: _Tok | None) -> str:
        return f"at column {tok.pos + 1}" if tok is not None else "at the end"

    def parse(self) -> Node:
        if not self.toks:
            raise QueryError('the query is empty: give a word, a "phrase", a prefix* or a boolean of them')
        node = self.or_expr()
        tok = self.peek()
        if tok is not None:
            raise QueryError(f"unexpected {tok.text!r} {self.where(tok)} (a ')' without its '('?)")
        return node

    def or_expr(self) -> Node:
        parts = [self.and_expr()]
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.text == "OR":
            self.i += 1
            parts.append(self.and_expr())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def and_expr(self) -> Node:
        parts = [self.not_expr()]
        while (tok := self.peek()) is not None and (tok.kind in ("word", "phrase", "(") or tok.text == "AND"):
            if tok.text == "AND":
                self.i += 1
            parts.append(self.not_expr())
        return parts[0] if len(parts) == 1 else And(tuple(parts))

    def not_expr(self) -> Node:
        node = self.unary()
        while (tok := self.peek()) is not None and tok.kind == "op" and tok.text == "NOT":
            self.i += 1
            node = Not(node, self.unary())
        return node

    def unary(self) -> Node:
        tok = self.peek()
        if tok is None:
            raise QueryError(f"expected a word, a \"phrase\" or '(' {self.where(tok)}")
        if tok.kind == "op":
            hint = " (NOT excludes: write `a NOT b`)" if tok.text == "NOT" else ""
            raise QueryError(f"{tok.text} needs a word or phrase before it, {self.where(tok)}{hint}")
        if tok.kind == ")":
            raise QueryError(f"unexpected ')' {self.where(tok)}")
        self.i += 1
        if tok.kind == "(":
            node = self.or_expr()
            close = self.peek()
            if close is None or close.kind != ")":
                raise QueryError(f"'(' at column {tok.pos + 1} is never closed")
            self.i += 1
            return node
        if tok.kind == "phrase":
            prefix = tok.text.endswith("*")
            body = tok.text[1 : -2 if prefix else -1]
            return self.phrase(body, prefix, tok)
        word = tok.text
        prefix = word.endswith("*") and len(word) > 1 and not _is_symbol_word(word)
        return self.phrase(word[:-1] if prefix else word, prefix, tok)

    def phrase(self, text: str, prefix: bool, tok: _Tok) -> Phrase:
        words = tuple(t for t, _s, _e in tokens(text))
        if not words:
            what = "an empty phrase" if tok.kind == "phrase" else f"{tok.text!r} has no letters or digits"
            raise QueryError(
                f"{what} {self.where(tok)}: nothing to search for (a word of symbols only is searched "
                f"when it has {SYMBOL_MIN}-{SYMBOL_MAX} of them, like >>>)"
            )
        if prefix and words[-1].startswith(SYMBOL_MARK):
            raise QueryError(f"a prefix* must end in letters or digits {self.where(tok)}")
        return Phrase(words, prefix, tok.text)


def parse(query: str) -> Node:
    """The query's tree; raises :class:`QueryError` with the column and what was expected."""
    return _Parser(query.strip()).parse()


# --- as FTS5 ------------------------------------------------------------------------------------


def to_fts(node: Node) -> str:
    """The query as an FTS5 expression (every phrase quoted: tokens are letters and digits only)."""
    if isinstance(node, Phrase):
        return '"' + " ".join(node.words) + '"' + ("*" if node.prefix else "")
    if isinstance(node, And):
        return "(" + " AND ".join(to_fts(p) for p in node.parts) + ")"
    if isinstance(node, Or):
        return "(" + " OR ".join(to_fts(p) for p in node.parts) + ")"
    return "(" + to_fts(node.keep) + " NOT " + to_fts(node.drop) + ")"


# --- against one line ---------------------------------------------------------------------------


def _phrase_spans(p: Phrase, toks: list[tuple[str, int, int]]) -> list[tuple[int, int]]:
    n = len(p.words)
    out: list[tuple[int, int]] = []
    last = n - 1
    for i in range(len(toks) - n + 1):
        ok = True
        for j, w in enumerate(p.words):
            t = toks[i + j][0]
            if not (t == w or (p.prefix and j == last and t.startswith(w))):
                ok = False
                break
        if ok:
            out.append((toks[i][1], toks[i + n - 1][2]))
    return out


def _eval(node: Node, toks: list[tuple[str, int, int]]) -> bool:
    if isinstance(node, Phrase):
        return bool(_phrase_spans(node, toks))
    if isinstance(node, And):
        return all(_eval(p, toks) for p in node.parts)
    if isinstance(node, Or):
        return any(_eval(p, toks) for p in node.parts)
    return _eval(node.keep, toks) and not _eval(node.drop, toks)


def positive_phrases(node: Node) -> list[Phrase]:
    """The phrases a match shows (everything but what NOT excludes): what to highlight."""
    if isinstance(node, Phrase):
        return [node]
    if isinstance(node, And | Or):
        return [p for part in node.parts for p in positive_phrases(part)]
    return positive_phrases(node.keep)


@dataclass(frozen=True)
class Matcher:
    """A parsed query, ready to test lines and find what to highlight in them."""

    query: str
    node: Node

    @classmethod
    def of(cls, query: str) -> Matcher:
        return cls(query.strip(), parse(query))

    @property
    def fts(self) -> str:
        return to_fts(self.node)

    @cached_property
    def _needles(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """Per positive phrase, one substring a matching line must contain: its longest word (folded), or
        for a phrase of symbol words only, the symbols as printed."""
        folded: list[str] = []
        raw: list[str] = []
        for p in positive_phrases(self.node):
            words = [w for w in p.words if not w.startswith(SYMBOL_MARK)]
            if words:
                folded.append(max(words, key=len))
            else:
                raw.append(bytes.fromhex(p.words[0][len(SYMBOL_MARK) + 1 :]).decode("utf-8"))
        return tuple(folded), tuple(raw)

    def _quick(self, line: str) -> bool:
        """A cheap pre-test (no tokenizing): some phrase's needle is in the line."""
        folded, raw = self._needles
        if any(r in line for r in raw):
            return True
        if not folded:
            return False
        low = _fold(line)
        return any(w in low for w in folded)

    def matches(self, line: str) -> bool:
        """The whole query holds on this one line."""
        if not self._quick(line):
            return False
        return _eval(self.node, tokens(line))

    def touches(self, line: str) -> bool:
        """Some phrase the query looks for is on this line (for a query whose parts sit on several lines
        of one episode, e.g. ``a AND b`` with a and b printed apart)."""
        if not self._quick(line):
            return False
        return bool(self.spans(line))

    def spans(self, line: str) -> list[tuple[int, int]]:
        """``[(start, end)]`` character ranges of ``line`` to highlight, sorted, not overlapping."""
        toks = tokens(line)
        found = sorted({s for p in positive_phrases(self.node) for s in _phrase_spans(p, toks)})
        out: list[tuple[int, int]] = []
        for a, b in found:
            if out and a <= out[-1][1]:
                out[-1] = (out[-1][0], max(out[-1][1], b))
            else:
                out.append((a, b))
        return out
