"""``bandpass search``: every episode whose terminals showed some text, and where.

The same application-layer functions as the TUI's search screen (``engine.app.search``); the index is
brought up to date first (``build_index``, resumable, progress on stderr).
"""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from ..cli import app, fail, open_workspace


def _clock(t: float | None) -> str:
    if t is None:
        return "—"
    m, s = divmod(t, 60)
    return f"{int(m)}:{s:06.3f}" if m else f"{s:.3f} s"


def _mark(text: str, spans: list[tuple[int, int]]) -> str:
    out, last = [], 0
    for a, b in spans:
        out.append(text[last:a])
        out.append(typer.style(text[a:b], bold=True, reverse=True))
        last = b
    out.append(text[last:])
    return "".join(out)


def _progress(done: int, total: int) -> None:
    if total:
        end = "\n" if done >= total or not sys.stderr.isatty() else "\r"
        sys.stderr.write(f"search index: {done}/{total} episodes{end}")
        sys.stderr.flush()


@app.command("search")
def search_cmd(
    query: Annotated[
        str | None,
        typer.Argument(
            help='Words, a "phrase", a prefix*, AND/OR/NOT, (…). Without a query: update the index only.'
        ),
    ] = None,
    task: Annotated[str | None, typer.Option("--task", "-t", help="Only this task's episodes.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="Only this agent's episodes.")] = None,
    model: Annotated[
        str | None, typer.Option("--model", help="Only episodes of this policy model (its runs' agent).")
    ] = None,
    outcome: Annotated[
        str | None,
        typer.Option("--outcome", help="passed, failed, agent_error, infra_error, or a full code."),
    ] = None,
    terminal: Annotated[
        str | None, typer.Option("--terminal", help="agent or verifier: only that terminal's text.")
    ] = None,
    limit: Annotated[int, typer.Option("--limit", "-n", help="Episodes to list (best first).")] = 20,
    hits: Annotated[int, typer.Option("--hits", help="Hits shown per episode (--json: all).")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
    no_build: Annotated[
        bool, typer.Option("--no-build", help="Search the index as it is; do not index new episodes first.")
    ] = False,
) -> None:
    """Search the text every terminal showed — screens, lines that scrolled away, typed keys, the verifier's
    output — across all episodes. Each hit names the terminal, the step and the cast time (bandpass replay
    EP opens it). Exit 1 when nothing matches."""
    from ...engine.app import reads
    from ...engine.app.search import (
        TRANSCRIPT_VERSION,
        Filters,
        Matcher,
        QueryError,
        build_index,
        search,
    )

    if terminal is not None and terminal not in reads.TERMINALS:
        raise fail(f"--terminal: expected agent or verifier, got {terminal!r}", 2)
    if limit < 1 or hits < 0:
        raise fail("--limit must be >= 1 and --hits >= 0", 2)
    matcher = None
    if query is not None:
        try:
            matcher = Matcher.of(query)
        except QueryError as exc:
            raise fail(f"query: {exc}", 2) from None
    ws = open_workspace()
    from .filters import check_filters

    check_filters(ws, task=task, agent=agent, model=model)  # a typo says what exists, not "no match"
    if not no_build:
        report = build_index(ws, progress=None if as_json else _progress)
        for note in report.notes[:5]:
            typer.echo(f"search index: {note}", err=True)
    if matcher is None:
        st = reads.search_index_status(ws, TRANSCRIPT_VERSION)
        status = {
            "episodes": st.episodes,
            "indexed": st.indexed,
            "terminals": st.documents,
            "lines": st.lines,
        }
        if as_json:
            typer.echo(json.dumps(status, indent=2))
        else:
            typer.echo(f"search index: {st.indexed} of {st.episodes} finished episodes, {st.lines} lines")
        return
    filters = Filters(task=task, agent=agent, model=model, outcome=outcome, terminal=terminal)
    result = search(ws, matcher, filters=filters, limit=limit)
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2))
        raise typer.Exit(0 if result.episodes else 1)
    if not result.episodes:
        where = f" ({filters.describe()})" if filters.describe() else ""
        typer.echo(f"no episode matches {query!r}{where}")
        raise typer.Exit(1)
    n = f"more than {result.matched_docs}" if result.matched_more else str(result.matched_docs)
    parts = [f"{n} terminal{'s' * (n != '1')} match {query!r}"]
    if filters.describe():
        parts.append(filters.describe())
    parts.append("ranked" if result.ranked_by == "bm25" else "newest first (too many to rank)")
    if len(result.episodes) >= limit:
        parts.append(
            f"the best {len(result.episodes)} episode{'s' * (len(result.episodes) != 1)} shown (--limit)"
        )
    parts.append(f"{result.seconds * 1000:.1f} ms")
    typer.echo(" · ".join(parts))
    for ep in result.episodes:
        typer.echo("")
        typer.echo(
            typer.style(f"episode {ep.episode_id}", bold=True)
            + f" · {ep.task} · {ep.agent} · {ep.outcome or 'unfinished'}"
            + f" · {len(ep.hits)} hit{'s' * (len(ep.hits) != 1)}"
        )
        for h in ep.hits[:hits]:
            step = f"step {h.step}" if h.step is not None else "—"
            kind = {"x": " (scrolled past)", "t": " (typed)", "o": " (output)"}.get(h.line.kind, "")
            typer.echo(f"  {h.terminal} · {step} · {_clock(h.time)}{kind}")
            for b in h.before:
                typer.echo(typer.style(f"      {b}", dim=True))
            typer.echo("    > " + _mark(h.text, result.matcher.spans(h.text)))
            for a in h.after:
                typer.echo(typer.style(f"      {a}", dim=True))
        if len(ep.hits) > hits:
            typer.echo(f"  … {len(ep.hits) - hits} more (--hits {len(ep.hits)})")
