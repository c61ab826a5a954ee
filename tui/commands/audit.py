"""``bandpass audit`` (prove task verifiers honest) and ``bandpass episode`` (one episode of a built-in
agent, to see for oneself what the audit saw)."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

from ..cli import app, fail, open_workspace


def _versions(refs: list[str] | None) -> list[tuple[int, str]]:
    from ...engine.app import reads

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
    from ...engine.app import reads

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
    concurrency: Annotated[
        int | None,
        typer.Option(
            "--concurrency",
            "-c",
            min=1,
            help="Audits at once (default: one per core up to 4 locally; the cluster's CPUs with Ray).",
        ),
    ] = None,
    executor_name: Annotated[
        str,
        typer.Option(
            "--executor",
            help="local (this Docker engine, default) or ray (audits as tasks on a Ray cluster).",
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", help="With --executor ray: the cluster (default auto / RAY_ADDRESS)."),
    ] = None,
    resume: Annotated[
        str | None,
        typer.Option(
            "--resume",
            help="Finish an audit run a killed or stopped runner left (RUN id, or 'last'): each task is "
            "audited once.",
        ),
    ] = None,
) -> None:
    """Prove verifiers honest: static checks, build, oracle passes (r times), nop fails, cheats fail.

    Each task ends accepted, warning (accepted, with findings), rejected (the task's fault, with codes) or
    could_not_audit (infrastructure, or a task Bandpass cannot run as written: retried with --retry, never a
    task defect). Tasks are audited as a run, --concurrency at a time here or across a Ray cluster; a run a
    killed runner left is finished with --resume. Exits 1 when any task is rejected, else 2 when any could
    not be audited.
    """
    import threading

    from ...engine.app import audit as audits

    ws = open_workspace()
    executor = audits.audit_executor(executor_name, concurrency=concurrency, address=ray_address)
    if resume:
        run_id = audits.latest_unfinished_run(ws) if resume == "last" else resume
        if run_id is None:
            raise fail("no unfinished audit run to resume")
    else:
        versions = _could_not_audit() if retry and not tasks else _versions(tasks)
        if retry and not versions:
            typer.echo("no task's last audit was could_not_audit", err=True)
        if not versions:
            return
        executor.connect()  # a cluster that does not answer leaves nothing queued
        run_id = audits.plan_audits(ws, [vid for vid, _ in versions], reruns=reruns)
    if not as_json:
        typer.echo(f"audit run {run_id} ({executor.name}; resume with --resume {run_id})", err=True)

    def progress(sm: audits.AuditRunSummary) -> None:
        if as_json or not sm.event:
            return
        typer.echo(f"[{sm.done}/{sm.total} done, {sm.running} running] {sm.event}", err=True)

    stop = threading.Event()
    try:
        summary = audits.run_audits(ws, run_id, executor=executor, on_progress=progress, stop=stop)
    except audits.AuditRunError as exc:
        raise fail(str(exc)) from None
    bad = unanswered = 0
    for rep in audits.run_reports(ws, run_id):
        bad += rep["verdict"] == audits.REJECTED
        unanswered += rep["verdict"] == audits.COULD_NOT_AUDIT
        if as_json:
            typer.echo(json.dumps(rep, sort_keys=True, default=str))
            continue
        _print_report(rep)
    if not as_json:
        typer.echo(
            f"{summary.done}/{summary.total} audited ({summary.ran} by this call in {summary.wall_s:.0f}s, "
            f"{summary.tasks_per_hour:.0f} tasks/hour, {summary.executor})",
            err=True,
        )
    if bad:
        raise typer.Exit(1)
    if unanswered:
        raise typer.Exit(2)


def _print_report(rep: dict[str, Any]) -> None:
    from ...engine.app import audit as audits_phases

    checks = rep["checks"]
    reasons = ", ".join(rep["reasons"]) or "-"
    head = f"{rep['verdict']:<15} {rep['task']:<28} {rep['version_hash'][:12]}"
    typer.echo(f"{head}  {reasons}  ({rep['duration_s']:.1f}s)")
    for f in checks.get("findings", []):
        typer.echo(f"    {f['code']}: {str(f['detail']).splitlines()[0][:300] if f['detail'] else ''}")
    for w in rep["warnings"]:
        typer.echo(f"    warning: {w}")
    cached = {k: v["cached"] for k, v in checks.get("sandbox_probes", {}).items() if v.get("cached")}
    if cached:
        typer.echo(f"    harness probes: cached for this setting ({next(iter(cached.values()))})")
    phases = checks.get("phases") or {}
    cost = checks.get("cost") or {}
    if phases:
        order = {p: i for i, p in enumerate(audits_phases.PHASES)}
        times = ", ".join(
            f"{k} {v:.1f}s" for k, v in sorted(phases.items(), key=lambda kv: order.get(kv[0], 99))
        )
        oee = cost.get("oracle_equivalents")
        typer.echo(
            f"    phases: {times}; {cost.get('episodes', 0)} episodes"
            + (f" = {oee:g} oracle-episode equivalents" if oee is not None else "")
        )


@app.command("episode")
def episode_cmd(
    task: Annotated[str, typer.Argument(help="Task name or version-hash prefix.")],
    agent: Annotated[str, typer.Option("--agent", help="Built-in agent: oracle, nop, cheat:*.")] = "oracle",
    as_json: Annotated[bool, typer.Option("--json")] = False,
) -> None:
    """Run one episode of a built-in agent and print its outcome (recordings land in the workspace)."""
    from ...engine.app.audit import run_builtin_episode

    ws = open_workspace()
    ((version_id, _),) = _versions([task])
    res = run_builtin_episode(ws, version_id, agent)  # an unknown agent: one line (cli.main)
    if as_json:
        typer.echo(json.dumps(res.__dict__, default=str, sort_keys=True))
    else:
        from ...engine.core.outcomes import reward_label

        typer.echo(
            f"episode {res.episode_id}: {res.outcome} (reward {reward_label(res.outcome, res.reward)})  "
            f"{res.agent_cast}"
        )
        if res.detail and res.outcome != "passed":
            typer.echo(res.detail)
