"""``bandpass show EPISODE``: one episode's record, including where it ran (local, or its Ray node)."""

from __future__ import annotations

import json
from typing import Annotated

import typer

from tui.cli import app, fail, open_workspace

_FIELDS = (
    "id",
    "batch_id",
    "agent",
    "attempt",
    "status",
    "outcome",
    "reward",
    "retries",
    "node_id",
    "node_address",
    "agent_cast",
    "verifier_cast",
    "started_at",
    "ended_at",
    "error",
)


@app.command("show")
def show_cmd(
    episode: Annotated[int, typer.Argument(help="Episode id (see bandpass batches / queue).")],
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object.")] = False,
) -> None:
    """Show one episode: task, outcome, tries, the node that ran it (Ray node id and address), casts."""
    from store import queries
    from store.db import session
    from store.models import Task, TaskVersion

    ws = open_workspace()
    with session(ws.engine) as s:
        ep = queries.get_episode(s, episode)
        if ep is None:
            raise fail(f"no episode {episode} in {ws.root}")
        tv = s.get(TaskVersion, ep.task_version_id)
        task = s.get(Task, tv.task_id) if tv else None
    row = {k: getattr(ep, k) for k in _FIELDS}
    row["task"] = task.name if task else ""
    row["version_hash"] = tv.hash if tv else ""
    if as_json:
        typer.echo(json.dumps(row, sort_keys=True, default=str))
        return
    node = f"ray node {ep.node_id} at {ep.node_address}" if ep.node_id else "this machine (local executor)"
    head = f"{row['task']} ({row['version_hash'][:12]}) · {ep.agent} · attempt {ep.attempt}"
    typer.echo(f"episode {ep.id}: {head}")
    typer.echo(f"  batch    {ep.batch_id or '-'}")
    typer.echo(f"  outcome  {ep.outcome or ep.status} (reward {ep.reward}) after {ep.retries} infra retries")
    typer.echo(f"  ran on   {node}")
    typer.echo(f"  casts    {ep.agent_cast or '-'}  {ep.verifier_cast or '-'}")
    if ep.error:
        typer.echo("  error    " + ep.error.replace("\n", "\n           "))
