"""This machine's Docker engine: ``doctor`` (is it ready), ``images base`` (the offline base image) and
``gc`` (what Bandpass left behind, here or on every node of a Ray cluster)."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from ...engine.core.plural import counted, listed
from ..cli import app, fail, open_workspace

images_app = typer.Typer(help="Local images: the offline base image and task images.", no_args_is_help=True)
app.add_typer(images_app, name="images")


@app.command("doctor")
def doctor_cmd(
    fix: Annotated[
        bool, typer.Option("--fix", help="Install/start a Docker engine when none answers.")
    ] = False,
) -> None:
    """Check the Docker engine, its storage driver, the base image and leftover containers."""
    from ...engine.app.machine import doctor, ensure_engine

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
    from ...engine.app.machine import BASE_TAG, build_base_image, get_client

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
        bool,
        typer.Option(
            "--dry-run", help="Remove nothing: list what the next start would reap, count what gc removes."
        ),
    ] = False,
) -> None:
    """Remove containers Bandpass left behind: of one batch or workspace (on every Ray node with
    --ray-address), or, without options, all of them, counted per workspace, asking before live ones.

    Every Bandpass command that reaches the engine already reaps, on its own, the containers whose owner
    process is gone; --dry-run lists those first."""
    from ...engine.app import leftovers
    from ...engine.app.machine import DockerUnavailable, get_client

    if (batch or workspace) is None and ray_address:
        raise fail("--ray-address goes with --batch or --workspace")
    if dry_run and ray_address:
        raise fail("--dry-run looks at this machine's engine only: drop --ray-address")
    client = None
    if dry_run or not (batch or workspace):  # (a cluster's head needs no engine of its own)
        try:
            client = get_client(reap=False)  # this command says itself what it removes (or would)
        except DockerUnavailable:
            if not (dry_run and (batch or workspace)):
                raise  # one line (cli.main)
            # a dry run of one workspace without an engine: nothing of it can be running, say 0
    if dry_run and client is not None:
        stale = leftovers.stale(client)
        head = f"a start would reap {counted(len(stale), 'container')} whose owner is gone"
        typer.echo(head + (":" if stale else ""))
        for s in stale:
            typer.echo(f"  {s.line()}")
    if batch or workspace:
        from pathlib import Path

        root = str(Path(workspace).resolve()) if workspace else str(open_workspace().root)
        what = f"batch {batch} of {root}" if batch else root
        if dry_run:
            r = leftovers.clean_node(root, batch, dry_run=True)
            typer.echo(
                f"{what}: would remove {counted(r['containers'], 'container')}, "
                f"{counted(r['dirs'], 'scratch dir')}"
            )
            return
        if ray_address:
            reports = leftovers.clean_cluster(ray_address, root, batch)  # ExecutorError: one line (cli.main)
        else:
            reports = [leftovers.clean_node(root, batch)]
        for r in reports:
            err = f" ({r['error']})" if r.get("error") else ""
            typer.echo(
                f"{r.get('host') or r.get('node_id', '?')}: removed {counted(r['containers'], 'container')}, "
                f"{counted(r['dirs'], 'scratch dir')} of {what}{err}"
            )
        return
    total = 0
    for root, containers in sorted(leftovers.containers_by_workspace(client).items()):
        name = root or "(no workspace label)"
        live = leftovers.live_batches(root) if root else []
        if live:
            ask = (
                f"{name}: {counted(len(containers), 'container')}, {listed('batch', live, 'batches')} "
                "running now. Remove?"
            )
            if dry_run or (not yes and not (sys.stdin.isatty() and typer.confirm(ask, default=False))):
                typer.echo(
                    f"{name}: kept {counted(len(containers), 'container')} (live: {', '.join(live)}; --yes "
                    "removes)"
                )
                continue
        if dry_run:
            typer.echo(f"{name}: would remove {counted(len(containers), 'container')}")
            continue
        n = leftovers.remove(client, containers)
        total += n
        typer.echo(f"{name}: removed {counted(n, 'container')}")
    if not dry_run:
        typer.echo(f"removed {counted(total, 'container')}")
