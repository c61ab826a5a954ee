"""Just enough of a Dockerfile reader to know what a build puts where, without building it.

The Terminal-Bench converter needs the files a ``COPY``/``ADD`` takes from the build context (TB1 built
from the task's root, so ``COPY tests/ …`` must still find ``tests/``), and the audit's static checks need
to know *which stage* a copy lands in: ``COPY tests/gen.py`` into a builder stage whose output alone reaches
the final image leaks nothing, while the same line in the final stage puts the tests where the agent can
read them. Continuation lines, comments, ``--from``/``--chown`` flags and the JSON form are handled; ARG
substitution is not (a source with ``$`` is reported as written).
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

__all__ = ["Copy", "Instruction", "Stage", "context_roots", "copies", "instructions", "stages"]


@dataclass(frozen=True)
class Instruction:
    line: int  # 1-based line where it starts
    keyword: str  # upper case: FROM, RUN, COPY...
    args: str  # the rest, continuation lines joined
    text: str  # as written (first line), for messages


@dataclass
class Stage:
    index: int
    base: str
    name: str | None
    instructions: list[Instruction] = field(default_factory=list)


@dataclass(frozen=True)
class Copy:
    stage: int
    final: bool  # lands in the image the agent runs in
    sources: tuple[str, ...]
    dest: str
    from_ref: str | None  # --from=...: the sources are another stage's or image's, not the context's
    line: int
    text: str


def instructions(text: str) -> list[Instruction]:
    out: list[Instruction] = []
    buf: list[str] = []
    start = 0
    first = ""
    for n, raw in enumerate(text.splitlines(), start=1):
        stripped = raw.strip()
        if not buf and (not stripped or stripped.startswith("#")):
            continue
        if buf and stripped.startswith("#"):
            continue  # comments inside a continued instruction are dropped by Docker too
        if not buf:
            start, first = n, stripped
        if stripped.endswith("\\"):
            buf.append(stripped[:-1])
            continue
        buf.append(stripped)
        joined = " ".join(b.strip() for b in buf)
        buf = []
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(start, keyword.upper(), args.strip(), first))
    if buf:
        joined = " ".join(b.strip() for b in buf)
        keyword, _, args = joined.partition(" ")
        out.append(Instruction(start, keyword.upper(), args.strip(), first))
    return out


def stages(text: str) -> list[Stage]:
    out: list[Stage] = []
    for ins in instructions(text):
        if ins.keyword == "FROM":
            words = [w for w in ins.args.split() if not w.startswith("--")]
            base = words[0] if words else ""
            name = words[2] if len(words) >= 3 and words[1].upper() == "AS" else None
            out.append(Stage(len(out), base, name))
        elif out:
            out[-1].instructions.append(ins)
    return out


def _split_args(args: str) -> list[str]:
    if args.startswith("["):
        try:
            parsed = json.loads(args)
            if isinstance(parsed, list):
                return [str(a) for a in parsed]
        except json.JSONDecodeError:
            pass
    try:
        return shlex.split(args)
    except ValueError:
        return args.split()


def copies(text: str) -> list[Copy]:
    """Every COPY/ADD with its stage; ``final`` marks the stage the image is built from (the last)."""
    st = stages(text)
    out: list[Copy] = []
    for stage in st:
        for ins in stage.instructions:
            if ins.keyword not in ("COPY", "ADD"):
                continue
            words = _split_args(ins.args)
            from_ref = None
            rest: list[str] = []
            for w in words:
                if w.startswith("--"):
                    if w.startswith("--from="):
                        from_ref = w.split("=", 1)[1]
                    continue
                rest.append(w)
            if len(rest) < 2:
                continue
            out.append(
                Copy(
                    stage=stage.index,
                    final=stage.index == len(st) - 1,
                    sources=tuple(rest[:-1]),
                    dest=rest[-1],
                    from_ref=from_ref,
                    line=ins.line,
                    text=ins.text,
                )
            )
    return out


def context_roots(text: str) -> set[str]:
    """First path components the build takes from its context (``.`` when it copies the whole context)."""
    roots: set[str] = set()
    for c in copies(text):
        if c.from_ref is not None:
            continue
        for src in c.sources:
            if "://" in src:
                continue  # ADD of a URL
            clean = src
            while clean.startswith("./") or clean.startswith("/"):
                clean = clean[2:] if clean.startswith("./") else clean[1:]
            if clean in (".", "", "*"):
                roots.add(".")
                continue
            roots.add(clean.split("/", 1)[0])
    return roots
