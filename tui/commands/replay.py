"""``bandpass replay``: an episode's recordings (or a bare .cast file) in the Replay screen, or one moment
or one match printed without a UI.

Same application-layer objects as the Replay screen (``engine.app.replay``, ``engine.app.search``), so a
script and the TUI can never disagree about what a cast shows at t.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from ..cli import app, fail, open_workspace, state

if TYPE_CHECKING:
    from ...engine.app.replay import ReplaySource
    from ...engine.core.workspace import Workspace
    from ..screens.replay_search import SearchHits


@app.command("replay")
def replay_cmd(
    ref: Annotated[str, typer.Argument(help="An episode id, or a path to a .cast file.")],
    print_at: Annotated[
        float | None,
        typer.Option(
            "--print-at", help="Print the screen text at SECONDS and exit (no UI).", metavar="SECONDS"
        ),
    ] = None,
    verifier: Annotated[bool, typer.Option("--verifier", help="Use the episode's verifier cast.")] = False,
    find: Annotated[
        str | None,
        typer.Option(
            "--find",
            help="Open on the frame where QUERY shows (bandpass search syntax; n/N: next/previous match).",
            metavar="QUERY",
        ),
    ] = None,
    hit: Annotated[int, typer.Option("--hit", help="With --find: start at this match (1 = first).")] = 1,
    print_hit: Annotated[
        bool, typer.Option("--print", help="With --find: print that frame's screen and exit (no UI).")
    ] = False,
    speed: Annotated[float, typer.Option("--speed", help="Initial speed, 0.25-16.")] = 1.0,
    idle_limit: Annotated[
        float | None, typer.Option("--idle-limit", "-i", help="Shorten pauses longer than this (seconds).")
    ] = None,
) -> None:
    """Replay an episode's recordings (agent and verifier, step-synced) or a bare .cast file."""
    from ...engine.app.replay import KeyframeIndex, load_source, read_cast

    if not 0.25 <= speed <= 16:
        raise fail(f"--speed must be between 0.25 and 16, got {speed}")
    if idle_limit is not None and idle_limit <= 0:
        raise fail(f"--idle-limit must be positive, got {idle_limit}")
    ws = open_workspace() if ref.strip().isdigit() else _existing_workspace()
    source = load_source(ws, ref)  # ReplaySourceError: one line (cli.main)
    search = None
    if find is not None:
        search = _find(source, find, hit, print_hit)
        if search is None:
            return
    elif print_hit:
        raise fail("--print goes with --find QUERY (--print-at SECONDS prints a moment)")
    if print_at is not None:
        path = source.verifier_cast if verifier else source.agent_cast
        if path is None:
            raise fail(f"{source.title}: has no {'verifier' if verifier else 'agent'} cast")
        cast = read_cast(path)  # CastError: one line (cli.main)
        if print_at < 0:
            raise fail(f"--print-at must be >= 0, got {print_at}")
        typer.echo(KeyframeIndex(cast).screen_at(print_at).text())
        return

    import sys

    if not (sys.stdin.isatty() and sys.stdout.isatty()):  # escape codes into a pipe, then a hang
        raise fail(
            "replay is interactive and needs a terminal (stdin and stdout are not both one); "
            "--print-at SECONDS prints the screen at a time without one"
        )
    from ..cli import run_tui
    from ..screens.replay import ReplayApp

    run_tui(ReplayApp(ws, source, verifier=verifier, speed=speed, idle_limit=idle_limit, search=search))


def _existing_workspace() -> Workspace | None:  # imported lazily
    """The workspace ``-w`` / ``$BANDPASS_HOME`` / the current folder names when one is there (its
    ``cache/keyframes/`` keeps a bare cast's index), else None: replaying a file never makes a
    workspace, and never writes beside the curator's file."""
    from ...engine.core.workspace import DB_NAME, Workspace, resolve_root

    root = resolve_root(state.workspace)
    return Workspace.open(root) if (root / DB_NAME).is_file() else None


def _find(source: ReplaySource, query: str, nth: int, print_hit: bool) -> SearchHits | None:
    """The matches of ``query`` in the source's casts (``SearchHits`` for the Replay screen, starting at
    match ``nth``); with ``print_hit``, prints that frame's screen with the match marked and returns None."""
    from ...engine.app.replay import (
        KeyframeIndex,
        find_frame,
        frame_of,
        highlight_spans,
        read_cast,
        screen_at,
        transcript,
    )
    from ...engine.app.search import Matcher, QueryError, cast_hits
    from ..screens.replay_search import SearchHits, clock

    try:
        matcher = Matcher.of(query)
    except QueryError as e:
        raise fail(f"--find: {e}", 2) from None
    casts = {}
    for kind, path in (("agent", source.agent_cast), ("verifier", source.verifier_cast)):
        if path is not None:
            casts[kind] = read_cast(path)  # CastError: one line (cli.main)
    hits = cast_hits({k: transcript(c) for k, c in casts.items()}, matcher, episode_id=source.episode_id)
    if not hits:
        raise fail(f"--find: nothing in {source.title} matches {query!r}")
    if not 1 <= nth <= len(hits):
        raise fail(f"--hit must be between 1 and {len(hits)} (the matches of {query!r}), got {nth}")
    if not print_hit:
        return SearchHits(matcher.query, hits, nth - 1)
    h = hits[nth - 1]
    index = KeyframeIndex(casts[h.terminal])
    frame = frame_of(index, h.line) or find_frame(index, h.text)
    if frame is None:
        raise fail(f"match {nth} ({h.text!r}) is not on any frame of the {h.terminal} recording")
    shown = screen_at(index, frame)
    step = f"step {h.step}" if h.step is not None else "no step"
    typer.echo(f"match {nth} of {len(hits)} · {h.terminal} · {step} · {clock(frame.time)}")
    marks: dict[int, list[tuple[int, int]]] = {}
    for y, a, b in highlight_spans(shown, matcher):
        marks.setdefault(y, []).append((a, b))
    rows = shown.lines()
    while rows and not rows[-1]:
        rows.pop()
    for y, row in enumerate(rows):
        out, last = [], 0
        for a, b in marks.get(y, []):  # columns: the rows hold one character per cell
            out += [row[last:a], typer.style(row[a:b], reverse=True, bold=True)]
            last = b
        typer.echo("".join([*out, row[last:]]))
    return None
