"""Engine commands: ``doctor``, ``images base``, ``gc``, ``audit``, ``episode``."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from bandpass.tui.cli import app, fail, open_workspace

images_app = typer.Typer(help="Local images: the offline base image and task images.", no_args_is_help=True)
app.add_typer(images_app, name="images")


@app.command("doctor")
def doctor_cmd(
    fix: Annotated[
        bool, typer.Option("--fix", help="Install/start a Docker engine when none answers.")
    ] = False,
) -> None:
    """Check the Docker engine, its storage driver, the base image and leftover containers."""
    from bandpass.engine.sandbox.docker_engine import doctor, ensure_engine

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
    from bandpass.engine.sandbox.docker_engine import get_client
    from bandpass.engine.tasks.images import BASE_TAG, build_base_image

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
    from bandpass.engine.sandbox import leftovers
    from bandpass.engine.sandbox.docker_engine import DockerUnavailable, get_client

    if (batch or workspace) is None and ray_address:
        raise fail("--ray-address goes with --batch or --workspace")
    if dry_run and ray_address:
        raise fail("--dry-run looks at this machine's engine only: drop --ray-address")
    client = None
    if dry_run or not (batch or workspace):  # (a cluster's head needs no engine of its own)
        try:
            client = get_client(reap=False)  # this command says itself what it removes (or would)
        except DockerUnavailable as exc:
            if not (dry_run and (batch or workspace)):
                raise fail(str(exc)) from None
            # a dry run of one workspace without an engine: nothing of it can be running, say 0
    if dry_run and client is not None:
        stale = leftovers.stale(client)
        head = f"a start would reap {len(stale)} container(s) whose owner is gone"
        typer.echo(head + (":" if stale else ""))
        for s in stale:
            typer.echo(f"  {s.line()}")
    if batch or workspace:
        from pathlib import Path

        from bandpass.engine.run.executors.node_cleanup import clean_node

        root = str(Path(workspace).resolve()) if workspace else str(open_workspace().root)
        what = f"batch {batch} of {root}" if batch else root
        if dry_run:
            r = clean_node(root, batch, dry_run=True)
            typer.echo(f"{what}: would remove {r['containers']} container(s), {r['dirs']} scratch dir(s)")
            return
        if ray_address:
            from bandpass.engine.run.executors import ExecutorError
            from bandpass.engine.run.executors.node_cleanup import clean_cluster
            from bandpass.engine.run.executors.ray_executor import RayExecutor

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
        for r in reports:
            err = f" ({r['error']})" if r.get("error") else ""
            typer.echo(
                f"{r.get('host') or r.get('node_id', '?')}: removed {r['containers']} container(s), "
                f"{r['dirs']} scratch dir(s) of {what}{err}"
            )
        return
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
    from bandpass.engine.app import reads

    ws = open_workspace()
    if not refs:
        return [(r.version_id, r.name) for r in reads.task_rows(ws)]
    out = []
    for ref, vid in reads.resolve_versions(ws, refs):
        if vid is None:
            raise fail(f"no task or version matches {ref!r} (see bandpass tasks)")
        out.append((vid, ref))
    return out


def _could_not_audit() -> list[tuple[int, str]]:
    from bandpass.engine.app import reads

    return [(r.version_id, r.name) for r in reads.task_rows(open_workspace()) if r.audit == "could_not_audit"]


@app.command("audit")
def audit_cmd(
    tasks: Annotated[
        list[str] | None, typer.Argument(help="Task names or version-hash prefixes (default: all).")
    ] = None,
    reruns: Annotated[int, typer.Option("--reruns", min=1, help="Oracle runs in fresh containers.")] = 3,
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per task version.")] = False,
    retry: Annotated[
        bool, typer.Option("--retry", help="Only the tasks whose last audit could not audit them.")
    ] = False,
) -> None:
    """Prove verifiers honest: static checks, build, oracle passes (r times), nop fails, cheats fail.

    Each task ends accepted, warning (accepted, with findings), rejected (the task's fault, with codes) or
    could_not_audit (infrastructure, or a task Bandpass cannot run as written: retried with --retry, never a
    task defect). Exits 1 when any task is rejected, else 2 when any could not be audited.
    """
    from bandpass.engine.audit.task_audit import audit_version
    from bandpass.engine.audit.verdict import COULD_NOT_AUDIT, REJECTED

    ws = open_workspace()
    bad = unanswered = 0
    versions = _could_not_audit() if retry and not tasks else _versions(tasks)
    if retry and not versions:
        typer.echo("no task's last audit was could_not_audit", err=True)
    for version_id, name in versions:
        if not as_json:
            typer.echo(f"auditing {name} …", err=True)
        rep = audit_version(ws, version_id, reruns=reruns)
        bad += rep.verdict == REJECTED
        unanswered += rep.verdict == COULD_NOT_AUDIT
        if as_json:
            typer.echo(json.dumps(rep.as_dict(), sort_keys=True, default=str))
            continue
        reasons = ", ".join(rep.reasons) or "-"
        typer.echo(
            f"{rep.verdict:<15} {rep.task:<28} {rep.version_hash[:12]}  {reasons}  ({rep.duration_s:.1f}s)"
        )
        for f in rep.checks.get("findings", []):
            typer.echo(f"    {f['code']}: {str(f['detail']).splitlines()[0][:300] if f['detail'] else ''}")
        for w in rep.warnings:
            typer.echo(f"    warning: {w}")
        cached = {k: v["cached"] for k, v in rep.checks.get("sandbox_probes", {}).items() if v.get("cached")}
        if cached:
            typer.echo(f"    harness probes: cached for this setting ({next(iter(cached.values()))})")
    if bad:
        raise typer.Exit(1)
    if unanswered:
        raise typer.Exit(2)


@app.command("episode")
def episode_cmd(
    task: Annotated[str, typer.Argument(help="Task name or version-hash prefix.")],
    agent: Annotated[str, typer.Option("--agent", help="Built-in agent: oracle, nop, cheat:*.")] = "oracle",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run one episode of a built-in agent and print its outcome (recordings land in the workspace)."""
    from bandpass.engine.run.agents.builtin import builtin_agent
    from bandpass.engine.run.episode import run_episode

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
        from bandpass.engine.core.outcomes import reward_label

        typer.echo(
            f"episode {res.episode_id}: {res.outcome} (reward {reward_label(res.outcome, res.reward)})  "
            f"{res.agent_cast}"
        )
        if res.detail and res.outcome != "passed":
            typer.echo(res.detail)
