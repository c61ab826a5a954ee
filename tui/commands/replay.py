"""``bandpass replay``, ``tag``, ``untag``, ``tags`` and ``queue``: the CLI face of replay and tagging.

Same engine objects as the Replay and Tag queue screens (``engine.review.replay.Player``,
``engine.review.tagging``),
so a script and the TUI can never disagree about what a cast shows at t or whether a tag is valid.
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated

import typer

from bandpass.tui.cli import app, fail, open_workspace, state
from bandpass.tui.commands.known import check_filters

if TYPE_CHECKING:
    from bandpass.engine.core.workspace import Workspace

QUEUE_STATES = ("pending", "tagged", "skipped")


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
    from bandpass.engine.review.replay import KeyframeIndex, ReplaySourceError, load_source
    from bandpass.engine.sandbox.asciicast import CastError, read_cast

    if not 0.25 <= speed <= 16:
        raise fail(f"--speed must be between 0.25 and 16, got {speed}")
    if idle_limit is not None and idle_limit <= 0:
        raise fail(f"--idle-limit must be positive, got {idle_limit}")
    ws = open_workspace() if ref.strip().isdigit() else _existing_workspace()
    try:
        source = load_source(ws, ref)
    except ReplaySourceError as e:
        raise fail(str(e)) from None
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
        try:
            cast = read_cast(path)
        except CastError as e:
            raise fail(str(e)) from None
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
    from bandpass.tui.cli import run_tui
    from bandpass.tui.screens.replay import ReplayApp

    run_tui(ReplayApp(ws, source, verifier=verifier, speed=speed, idle_limit=idle_limit, search=search))


def _existing_workspace() -> Workspace | None:  # imported lazily
    """The workspace ``-w`` / ``$BANDPASS_HOME`` / the current folder names when one is there (its
    ``cache/keyframes/`` keeps a bare cast's index), else None: replaying a file never makes a
    workspace, and never writes beside the curator's file."""
    from bandpass.engine.core.workspace import DB_NAME, Workspace, resolve_root

    root = resolve_root(state.workspace)
    return Workspace.open(root) if (root / DB_NAME).is_file() else None


def _find(source, query: str, nth: int, print_hit: bool):  # lazily imported types
    """The matches of ``query`` in the source's casts (``SearchHits`` for the Replay screen, starting at
    match ``nth``); with ``print_hit``, prints that frame's screen with the match marked and returns None."""
    from bandpass.engine.review.replay import KeyframeIndex
    from bandpass.engine.review.search import cast_hits
    from bandpass.engine.review.search_query import Matcher, QueryError
    from bandpass.engine.review.transcript import find_frame, frame_of, highlight_spans, screen_at, transcript
    from bandpass.engine.sandbox.asciicast import CastError, read_cast
    from bandpass.tui.screens.replay_search import SearchHits, clock

    try:
        matcher = Matcher.of(query)
    except QueryError as e:
        raise fail(f"--find: {e}", 2) from None
    casts = {}
    for kind, path in (("agent", source.agent_cast), ("verifier", source.verifier_cast)):
        if path is not None:
            try:
                casts[kind] = read_cast(path)
            except CastError as e:
                raise fail(str(e)) from None
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


@app.command("tag")
def tag_cmd(
    episode: Annotated[int, typer.Argument(help="Episode id.")],
    code: Annotated[str, typer.Argument(help="class.subclass from the taxonomy, e.g. harness.turn_limit.")],
    note: Annotated[str, typer.Option("--note", "-n", help="Free-text note.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the tag as JSON.")] = False,
) -> None:
    """Tag an episode with a failure class; invalidity and misalignment block the task's export."""
    from bandpass.engine.core.taxonomy import TaxonomyError
    from bandpass.engine.review.tagging import TagError, Tagger

    ws = open_workspace()
    tagger = Tagger(ws)
    try:
        (tag,) = tagger.tag(episode, code, note=note)
    except (TagError, TaxonomyError) as e:
        raise fail(str(e)) from None
    if as_json:
        added = bool(tagger.last_added)
        doc = {"id": tag.id, "episode_id": episode, "tag": code, "blocking": tag.blocking, "added": added}
        typer.echo(json.dumps(doc))
        return
    if not tagger.last_added:
        typer.echo(f"episode {episode} already carries {code} (tag {tag.id}): nothing added")
        return
    block = " (blocks export of its task until cleared)" if tag.blocking else ""
    typer.echo(f"tag {tag.id}: episode {episode} {code} by {tag.author}{block}")


@app.command("untag")
def untag_cmd(tag_id: Annotated[int, typer.Argument(help="Tag id (see bandpass tags).")]) -> None:
    """Clear a tag. It stays in the record as cleared; a cleared blocking tag readmits its task."""
    from bandpass.engine.core.taxonomy import TaxonomyError
    from bandpass.engine.review.tagging import TagError, Tagger

    ws = open_workspace()
    try:
        tag = Tagger(ws).clear(tag_id)
    except (TagError, TaxonomyError) as e:
        raise fail(str(e)) from None
    typer.echo(f"cleared tag {tag_id}: episode {tag.episode_id} {tag.tag_class}.{tag.subclass}")


@app.command("tags")
def tags_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    include_cleared: Annotated[bool, typer.Option("--all", help="Include cleared tags.")] = False,
) -> None:
    """List failure tags with their episode, task, author and time."""
    from bandpass.engine.app import reads

    rows = reads.tag_rows(open_workspace(), include_cleared=include_cleared)
    if as_json:
        typer.echo(json.dumps([r.as_dict() for r in rows], indent=2))
        return
    if not rows:
        typer.echo("no tags (bandpass queue lists episodes waiting for one)")
        return
    typer.echo(f"{'id':>5} {'ep':>5} {'task':<28} {'tag':<40} {'author':<12} {'when':<16} flags")
    for r in rows:
        t = r.tag
        flags = ",".join(f for f, on in (("blocking", t.blocking), ("cleared", t.cleared)) if on)
        when = t.created_at.strftime("%Y-%m-%d %H:%M") if t.created_at else ""
        typer.echo(
            f"{t.id:>5} {t.episode_id:>5} {r.task[:28]:<28} {t.tag_class + '.' + t.subclass:<40} "
            f"{t.author[:12]:<12} {when:<16} {flags}"
        )
        if t.note:
            typer.echo(f"{'':>11}note: {t.note}")


@app.command("queue")
def queue_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    state: Annotated[
        str | None, typer.Option("--state", help="Only pending, tagged or skipped episodes.")
    ] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent.")] = None,
    task: Annotated[str | None, typer.Option("--task", help="Only this task.")] = None,
    outcome: Annotated[
        str | None,
        typer.Option("--outcome", help="An outcome, or its kind (failed, agent_error, infra_error)."),
    ] = None,
    cluster: Annotated[
        str | None,
        typer.Option(
            "--cluster", help="Only this failure cluster: its id or signature (see bandpass clusters)."
        ),
    ] = None,
    probes: Annotated[
        bool, typer.Option("--probes", help="Include the audit's oracle/nop/cheat episodes.")
    ] = False,
) -> None:
    """The tagging queue: finished episodes that did not pass, with their state, diagnosis and
    suggested tag. The audit's own probe episodes are left out unless --probes."""
    from bandpass.engine.review.tagging import QueueFilter, load_queue

    if state is not None and state not in QUEUE_STATES:
        raise fail(f"--state must be one of {', '.join(QUEUE_STATES)}, got {state!r}")
    ws = open_workspace()
    check_filters(ws, task=task, agent=agent, outcome=outcome, cluster=cluster, probes=True)
    filt = QueueFilter(agent=agent, task=task, outcome=outcome, cluster=cluster, include_probes=probes)
    items = load_queue(ws, states=None if state is None else {state}, filt=filt)
    if as_json:
        typer.echo(json.dumps([i.as_dict() for i in items], indent=2))
        return
    if not items:
        typer.echo("the queue is empty")
        return
    counts = {s: sum(i.state == s for i in items) for s in QUEUE_STATES}
    width = max(len("outcome"), *(len(i.outcome) for i in items))  # never cut: the outcome is the fact
    typer.echo(f"{'ep':>5} {'state':<8} {'task':<28} {'outcome':<{width}} {'diagnosis':<28} suggested / tags")
    for i in items:
        shown = ", ".join(i.tags) if i.tags else (f"({i.suggestion}?)" if i.suggestion else "")
        typer.echo(
            f"{i.episode_id:>5} {i.state:<8} {i.task[:28]:<28} {i.outcome:<{width}} "
            f"{i.diagnosis[:28]:<28} {shown}"
        )
        if i.attribution:  # who ended the sandbox: the outcome's evidence, in one line
            typer.echo(f"{'':>5} why: {i.attribution}")
    typer.echo(", ".join(f"{n} {s}" for s, n in counts.items()))
