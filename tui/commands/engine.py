"""Engine commands: ``doctor``, ``images base``, ``gc``, ``audit``, ``episode``."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from tui.cli import app, fail, open_workspace

images_app = typer.Typer(help="Local images: the offline base image and task images.", no_args_is_help=True)
app.add_typer(images_app, name="images")


@app.command("doctor")
def doctor_cmd(
    fix: Annotated[
        bool, typer.Option("--fix", help="Install/start a Docker engine when none answers.")
    ] = False,
) -> None:
    """Check the Docker engine, its storage driver, the base image and leftover containers."""
    from engine.sandbox.docker_engine import doctor, ensure_engine

    if fix:
        ensure_engine()
    checks = doctor()
    for c in checks:
        mark = "warn" if c.warning else ("ok" if c.ok else "FAIL")
        typer.echo(f"{mark:>4}  {c.name}: {c.detail}")
    if not all(c.ok for c in checks):
        raise typer.Exit(1)


@images_app.command("base")
def images_base_cmd(
    force: Annotated[bool, typer.Option("--force", help="Rebuild even when the tag exists.")] = False,
    tag: Annotated[
        str | None, typer.Option("--tag", help="Image tag (default bandpass/base:bookworm).")
    ] = None,
) -> None:
    """Build the offline base image (debootstrap minbase + docker import); cached by tag."""
    from engine.sandbox.docker_engine import get_client
    from engine.tasks.images import BASE_TAG, build_base_image

    tag = tag or BASE_TAG
    built = build_base_image(
        get_client(), tag, force=force, on_log=lambda line: typer.echo(f"  {line}", err=True)
    )
    typer.echo(built)


@app.command("gc")
def gc_cmd(
    batch: Annotated[
        str | None,
        typer.Option("--batch", help="Only this batch's containers (of --workspace, default this one)."),
    ] = None,
    workspace: Annotated[
        str | None, typer.Option("--workspace", help="Only this workspace's containers (its root path).")
    ] = None,
    ray_address: Annotated[
        str | None,
        typer.Option(
            "--ray-address", help="Also clean every live node of this Ray cluster (with --batch/--workspace)."
        ),
    ] = None,
    yes: Annotated[
        bool, typer.Option("--yes", "-y", help="Do not ask before touching live workspaces.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Without options: only count, per workspace, what would go.")
    ] = False,
) -> None:
    """Remove containers Bandpass left behind: of one batch or workspace (on every Ray node with
    --ray-address), or, without options, all of them, counted per workspace, asking before live ones."""
    from engine.sandbox import leftovers
    from engine.sandbox.docker_engine import DockerUnavailable, get_client

    if (batch or workspace) is None and ray_address:
        raise fail("--ray-address goes with --batch or --workspace")
    if batch or workspace:
        from pathlib import Path

        from engine.run.executors.node_cleanup import clean_node

        root = str(Path(workspace).resolve()) if workspace else str(open_workspace().root)
        if ray_address:
            from engine.run.executors import ExecutorError
            from engine.run.executors.node_cleanup import clean_cluster
            from engine.run.executors.ray_executor import RayExecutor

            try:
                ex = RayExecutor(address=ray_address)
                ex.connect()
            except ExecutorError as exc:
                raise fail(str(exc)) from None
            try:
                reports = clean_cluster(ex._ray, root, batch)
            finally:
                ex.close()
        else:
            reports = [clean_node(root, batch)]
        what = f"batch {batch} of {root}" if batch else root
        for r in reports:
            err = f" ({r['error']})" if r.get("error") else ""
            typer.echo(
                f"{r.get('host') or r.get('node_id', '?')}: removed {r['containers']} container(s), "
                f"{r['dirs']} scratch dir(s) of {what}{err}"
            )
        return
    try:
        client = get_client()
    except DockerUnavailable as exc:
        raise fail(str(exc)) from None
    total = 0
    for root, containers in sorted(leftovers.containers_by_workspace(client).items()):
        name = root or "(no workspace label)"
        live = leftovers.live_batches(root) if root else []
        if live:
            ask = f"{name}: {len(containers)} container(s), batch(es) {', '.join(live)} running now. Remove?"
            if dry_run or (not yes and not (sys.stdin.isatty() and typer.confirm(ask, default=False))):
                typer.echo(
                    f"{name}: kept {len(containers)} container(s) (live: {', '.join(live)}; --yes removes)"
                )
                continue
        if dry_run:
            typer.echo(f"{name}: would remove {len(containers)} container(s)")
            continue
        n = leftovers.remove(client, containers)
        total += n
        typer.echo(f"{name}: removed {n} container(s)")
    if not dry_run:
        typer.echo(f"removed {total} container(s)")


def _versions(refs: list[str] | None) -> list[tuple[int, str]]:
    from store import queries
    from store.db import session

    ws = open_workspace()
    with session(ws.engine) as s:
        if not refs:
            return [(r.version_id, r.name) for r in queries.task_rows(s)]
        out = []
        for ref in refs:
            v = queries.resolve_version(s, ref)
            if v is None:
                raise fail(f"no task or version matches {ref!r} (see bandpass tasks)")
            out.append((v.id, ref))
        return out


@app.command("audit")
def audit_cmd(
    tasks: Annotated[
        list[str] | None, typer.Argument(help="Task names or version-hash prefixes (default: all).")
    ] = None,
    reruns: Annotated[int, typer.Option("--reruns", min=1, help="Oracle runs in fresh containers.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per task version.")] = False,
) -> None:
    """Prove verifiers honest: build, oracle passes (r times), nop fails, cheats fail, static checks."""
    from engine.audit.task_audit import audit_version

    ws = open_workspace()
    bad = 0
    for version_id, name in _versions(tasks):
        if not as_json:
            typer.echo(f"auditing {name} …", err=True)
        rep = audit_version(ws, version_id, reruns=reruns)
        bad += rep.verdict == "rejected"
        if as_json:
            typer.echo(json.dumps(rep.as_dict(), sort_keys=True, default=str))
        else:
            reasons = ", ".join(rep.reasons) or "-"
            typer.echo(
                f"{rep.verdict:<9} {rep.task:<28} {rep.version_hash[:12]}  {reasons}  ({rep.duration_s:.1f}s)"
            )
    if bad:
        raise typer.Exit(1)


@app.command("episode")
def episode_cmd(
    task: Annotated[str, typer.Argument(help="Task name or version-hash prefix.")],
    agent: Annotated[str, typer.Option("--agent", help="Built-in agent: oracle, nop, cheat:*.")] = "oracle",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run one episode of a built-in agent and print its outcome (recordings land in the workspace)."""
    from engine.run.agents.builtin import builtin_agent
    from engine.run.episode import run_episode

    ws = open_workspace()
    ((version_id, _),) = _versions([task])
    try:
        agent_obj = builtin_agent(agent)
    except ValueError as exc:
        raise fail(str(exc)) from None
    res = run_episode(ws, version_id, agent_obj)
    if as_json:
        typer.echo(json.dumps(res.__dict__, default=str, sort_keys=True))
    else:
        typer.echo(f"episode {res.episode_id}: {res.outcome} (reward {res.reward})  {res.agent_cast}")
        if res.detail and res.outcome != "passed":
            typer.echo(res.detail)
