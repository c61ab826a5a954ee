"""``bandpass tag``, ``untag``, ``tags`` and ``queue``: the CLI face of tagging.

Same application-layer service as the Tag queue, Replay and Search screens (``engine.app.tagging``), so a
script and the TUI can never disagree about whether a tag is valid or what the queue holds.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from ..cli import app, fail, open_workspace
from .filters import check_filters
from .options import EpisodeArg, JsonOpt, ProbesOpt

QUEUE_STATES = ("pending", "tagged", "skipped")


@app.command("tag")
def tag_cmd(
    episode: EpisodeArg,
    code: Annotated[str, typer.Argument(help="class.subclass from the taxonomy, e.g. harness.turn_limit.")],
    note: Annotated[str, typer.Option("--note", "-n", help="Free-text note.")] = "",
    as_json: Annotated[bool, typer.Option("--json", help="Print the tag as JSON.")] = False,
) -> None:
    """Tag an episode with a failure class; invalidity and misalignment block the task's export."""
    from ...engine.app import tagging

    ws = open_workspace()
    tagged = tagging.tag(ws, episode, code, note=note)  # TagError, TaxonomyError: one line (cli.main)
    (tag,) = tagged.tags
    if as_json:
        added = bool(tagged.added)
        doc = {"id": tag.id, "episode_id": episode, "tag": code, "blocking": tag.blocking, "added": added}
        typer.echo(json.dumps(doc))
        return
    if not tagged.added:
        typer.echo(f"episode {episode} already carries {code} (tag {tag.id}): nothing added")
        return
    block = " (blocks export of its task until cleared)" if tag.blocking else ""
    typer.echo(f"tag {tag.id}: episode {episode} {code} by {tag.author}{block}")


@app.command("untag")
def untag_cmd(tag_id: Annotated[int, typer.Argument(help="Tag id (see bandpass tags).")]) -> None:
    """Clear a tag. It stays in the record as cleared; a cleared blocking tag readmits its task."""
    from ...engine.app import tagging

    ws = open_workspace()
    tag = tagging.clear(ws, tag_id)  # TagError, TaxonomyError: one line (cli.main)
    typer.echo(f"cleared tag {tag_id}: episode {tag.episode_id} {tag.tag_class}.{tag.subclass}")


@app.command("tags")
def tags_cmd(
    as_json: JsonOpt = False,
    include_cleared: Annotated[bool, typer.Option("--all", help="Include cleared tags.")] = False,
) -> None:
    """List failure tags with their episode, task, author and time."""
    from ...engine.app import reads

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
    as_json: JsonOpt = False,
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
    probes: ProbesOpt = False,
) -> None:
    """The tagging queue: finished episodes that did not pass, with their state, diagnosis and
    suggested tag. The audit's own probe episodes are left out unless --probes."""
    from ...engine.app.tagging import QueueFilter, load_queue

    if state is not None and state not in QUEUE_STATES:
        raise fail(f"--state must be one of {', '.join(QUEUE_STATES)}, got {state!r}")
    ws = open_workspace()
    check_filters(ws, task=task, agent=agent, outcome=outcome, cluster=cluster, probes=probes)
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
