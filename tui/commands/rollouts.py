"""``bandpass run`` (rollout batches, ``--resume``) and ``bandpass batches``.

The command plans the batch in the database before running anything, so whatever stops it (a crash,
SIGKILL, Ctrl-C twice, a reboot) ``bandpass run --resume`` finishes exactly the unfinished attempts.
"""

from __future__ import annotations

import json
import signal
import threading
from typing import TYPE_CHECKING, Annotated, Any

import typer

from tui.cli import app, fail, open_workspace

if TYPE_CHECKING:
    from engine.core.workspace import Workspace
    from engine.run.rollouts import BatchSummary


def _version_ids(ws: Workspace, refs: list[str] | None) -> list[int]:
    from store import queries
    from store.db import session

    names = [r.strip() for ref in refs or [] for r in ref.split(",") if r.strip()]
    with session(ws.engine) as s:
        if not names:
            ids = [r.version_id for r in queries.task_rows(s)]
            if not ids:
                raise fail(f"no tasks in {ws.root} (import some: bandpass import DIR)")
            return ids
        out = []
        for ref in names:
            v = queries.resolve_version(s, ref)
            if v is None:
                raise fail(f"no task or version matches {ref!r} (see bandpass tasks)")
            out.append(int(v.id))  # type: ignore[arg-type]
        return out


def _preflight(ws: Workspace, name: str, base_url: str | None, timeout: float) -> None:
    """The endpoint check before a model batch (engine.run.rollouts.check_policy_endpoint)."""
    from engine.run.rollouts import BatchError, check_policy_endpoint

    try:
        warnings = check_policy_endpoint(ws, name, base_url, min(timeout, 30.0))
    except BatchError as exc:
        raise fail(str(exc)) from None
    for warning in warnings:  # e.g. bandpass.toml's window vs the served max_model_len
        typer.echo(f"WARNING: {warning}", err=True)


def _line(sm: BatchSummary) -> str:
    return (
        f"passed {sm.passed} · failed {sm.failed} · agent errors {sm.agent_errors} · "
        f"infra errors {sm.infra_errors}"
    )


def _run_with_progress(
    ws: Workspace,
    batch_id: str,
    concurrency: int,
    retries: int,
    quiet: bool,
    executor: Any = None,  # --- executors: an engine.run.executors.Executor (None: local) ---
    max_unavailable: int = 3,
) -> Any:
    """Runs the batch under a Rich progress bar; first Ctrl-C drains, second aborts."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from engine.run.rollouts import run_planned

    stop = threading.Event()
    console = Console(stderr=True)

    def on_sigint(_sig: int, _frame: object) -> None:
        stop.set()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        console.print(
            "[yellow]stopping: letting running episodes finish (Ctrl-C again to abort; "
            f"bandpass run --resume {batch_id} continues)[/]"
        )

    previous = signal.signal(signal.SIGINT, on_sigint)
    progress = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[line]}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
        transient=False,
    )
    bar = progress.add_task(batch_id, total=None, line="")

    def on_progress(sm: BatchSummary) -> None:
        progress.update(bar, total=sm.total, completed=sm.done, line=f"{_line(sm)} · running {sm.running}")

    try:
        with progress:
            return run_planned(
                ws,
                batch_id,
                concurrency=concurrency,
                on_progress=on_progress,
                stop=stop,
                max_infra_retries=retries,
                executor=executor,
                max_consecutive_unavailable=max_unavailable,
            )
    finally:
        signal.signal(signal.SIGINT, previous)


@app.command("run")
def run_cmd(
    model: Annotated[
        str | None,
        typer.Option(
            "--model", "-m", help="Policy model (bandpass.toml name, or served name with --base-url)."
        ),
    ] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="A built-in agent instead of a model: oracle, nop, cheat:*.")
    ] = None,
    k: Annotated[int, typer.Option("--k", min=1, help="Attempts per task version.")] = 4,
    tasks: Annotated[
        list[str] | None,
        typer.Option(
            "--tasks",
            "-t",
            help="Task names or version-hash prefixes (repeat or comma-separate; default all).",
        ),
    ] = None,
    concurrency: Annotated[
        int | None,
        typer.Option("--concurrency", "-j", min=1, help="Episodes at once (default min(cpu count, 4))."),
    ] = None,
    base_url: Annotated[
        str | None,
        typer.Option("--base-url", help="Policy endpoint for this batch (remembered by --resume)."),
    ] = None,
    resume: Annotated[
        bool,
        typer.Option(
            "--resume",
            help="Finish an unfinished batch: the latest one, or --resume BATCH. Takes no other flags.",
        ),
    ] = False,
    batch: Annotated[
        str | None, typer.Argument(metavar="[BATCH]", help="With --resume: the batch to finish.")
    ] = None,
    retry: Annotated[
        str | None,
        typer.Option(
            "--retry",
            help="With --resume: re-run the finished episodes that ended infra_error:CODE (comma list; "
            "infra_error = every infra code) as new tries of the same attempts.",
        ),
    ] = None,
    no_check: Annotated[
        bool, typer.Option("--no-check", help="Skip the endpoint check before a model batch starts.")
    ] = False,
    stop_after_unavailable: Annotated[
        int,
        typer.Option(
            "--stop-after-unavailable",
            min=0,
            help="Stop the batch after this many episodes in a row end policy_unavailable (0: never).",
        ),
    ] = 3,
    max_steps: Annotated[int, typer.Option("--max-steps", min=1, help="Policy turn limit.")] = 20,
    request_timeout: Annotated[
        float, typer.Option("--request-timeout", help="Seconds per policy request.")
    ] = 120.0,
    infra_retries: Annotated[
        int, typer.Option("--infra-retries", min=0, help="Fresh tries after a retryable infra error.")
    ] = 2,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the final summary as one JSON object.")
    ] = False,
    # --- executors (engine/executors): where episodes run; allowed with --resume ---
    executor_name: Annotated[
        str,
        typer.Option(
            "--executor",
            help="local (this Docker engine, default) or ray (tasks on a Ray cluster, one engine per node).",
        ),
    ] = "local",
    ray_address: Annotated[
        str | None,
        typer.Option("--ray-address", help="With --executor ray: the cluster (default auto / RAY_ADDRESS)."),
    ] = None,
) -> None:
    """Roll out k attempts per task version for a model (or built-in agent), queued so --resume works."""
    from engine.run.executors import ExecutorError, make_executor
    from engine.run.rollouts import (
        BatchError,
        default_concurrency,
        get_batch,
        latest_unfinished_batch,
        parse_retry_codes,
        plan_batch,
        requeue_for_retry,
    )
    from engine.sandbox.docker_engine import DockerUnavailable, get_client

    if ray_address and executor_name != "ray":
        raise fail("--ray-address goes with --executor ray")
    try:
        executor = make_executor(
            executor_name, concurrency=concurrency, **({"address": ray_address} if ray_address else {})
        )
    except ExecutorError as exc:
        raise fail(str(exc)) from None
    local = executor_name == "local"
    ws = open_workspace()
    try:
        if batch and not resume:
            raise fail(f"a batch id ({batch}) goes with --resume: bandpass run --resume {batch}")
        if retry is not None and not resume:
            raise fail("--retry goes with --resume: bandpass run --resume [BATCH] --retry CODE[,CODE]")
        if resume:
            if model or agent or tasks or base_url:
                raise fail("--resume takes no --model/--agent/--tasks/--base-url: the batch remembers them")
            if retry is not None:
                codes = parse_retry_codes(retry)
                batch_id = batch or _latest_batch(ws)
                if batch_id is None:
                    raise fail(f"no batch in {ws.root}")
                b = get_batch(ws, batch_id)
                if b.kind == "model" and not no_check:
                    _preflight(ws, b.agent, b.base_url or None, request_timeout)
                requeued = requeue_for_retry(ws, batch_id, codes)
                typer.echo(  # stderr, also with --json: stdout keeps the one JSON object
                    f"batch {batch_id}: {len(requeued)} episode(s) requeued for a new try ({retry})",
                    err=True,
                )
            else:
                batch_id = batch or latest_unfinished_batch(ws)
                if batch_id is None:
                    raise fail(f"no unfinished batch in {ws.root}")
                b = get_batch(ws, batch_id)
                if b.kind == "model" and not no_check:
                    _preflight(ws, b.agent, b.base_url or None, request_timeout)
        else:
            if bool(model) == bool(agent):
                raise fail("give exactly one of --model M or --agent oracle|nop|cheat:*")
            name = model or agent or ""
            kind = "model" if model else "builtin"
            if kind == "model":
                from engine.run.agents.builtin import BUILTIN
                from engine.run.policy.client import resolve_model

                if name in BUILTIN:
                    raise fail(f"--model {name}: that is a built-in agent name; use --agent {name}")
                try:
                    resolve_model(ws.config, name, base_url)  # a config error is one line, before any request
                except ValueError as exc:
                    raise fail(str(exc)) from None
                if not no_check:
                    _preflight(ws, name, base_url, request_timeout)
            params = {"max_steps": max_steps, "request_timeout": request_timeout} if kind == "model" else {}
            versions = _version_ids(ws, tasks)
            try:
                if local:  # a Ray cluster's nodes have their own engines: nothing to check here
                    get_client()
            except DockerUnavailable as exc:
                raise fail(f"{exc} (see bandpass doctor); nothing was queued") from None
            batch_id = plan_batch(ws, name, versions, k, kind=kind, base_url=base_url or "", params=params)
            if not as_json:
                typer.echo(f"batch {batch_id}: {len(versions)} task version(s) × k={k} for {name}", err=True)
        try:
            if local:
                get_client()
        except DockerUnavailable as exc:
            raise fail(
                f"{exc} (see bandpass doctor); resume later with bandpass run --resume {batch_id}"
            ) from None
        sm = _run_with_progress(
            ws,
            batch_id,
            concurrency or default_concurrency(),
            infra_retries,
            as_json,
            executor,
            stop_after_unavailable,
        )
    except (BatchError, ExecutorError) as exc:
        raise fail(str(exc)) from None

    if as_json:
        typer.echo(json.dumps(sm.as_dict(), sort_keys=True, default=str))
    else:
        typer.echo(
            f"batch {sm.batch_id} ({sm.agent}, k={sm.k}): {sm.done}/{sm.total} done · {_line(sm)} · "
            f"{sm.ran} episode(s) in {sm.wall_s:.0f}s ({sm.episodes_per_min:.1f}/min)"
        )
        if sm.requeued:
            typer.echo(
                f"resumed: {sm.requeued} interrupted episode(s) requeued, "
                f"{sm.containers_removed} leftover container(s) removed"
            )
        if sm.infra_errors:
            typer.echo(
                f"WARNING: {sm.infra_errors} of {sm.done} episodes are infrastructure errors "
                "(no valid reward; excluded from pass@k)",
                err=True,
            )
    if sm.halted:
        typer.echo(f"bandpass: error: {sm.halted}", err=True)
    if not sm.finished:
        typer.echo(
            f"stopped with {sm.queued + sm.running} episode(s) unfinished: "
            f"bandpass run --resume {sm.batch_id}",
            err=True,
        )
        raise typer.Exit(130 if sm.interrupted and not sm.halted else 1)
    if sm.all_infra:
        typer.echo(
            f"bandpass: error: all {sm.done} episode(s) of batch {sm.batch_id} ended in infrastructure "
            f"errors: no valid sample (bandpass run --resume {sm.batch_id} --retry infra_error once fixed)",
            err=True,
        )
        raise typer.Exit(1)


def _latest_batch(ws: Workspace) -> str | None:
    from store import queries
    from store.db import session

    with session(ws.engine) as s:
        rows = queries.batches(s)
    return rows[0].id if rows else None


@app.command("batches")
def batches_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per batch.")] = False,
) -> None:
    """List rollout batches, newest first, with their progress."""
    from engine.run.rollouts import batch_summary
    from store import queries
    from store.db import session

    ws = open_workspace()
    with session(ws.engine) as s:
        rows = queries.batches(s)
    for b in rows:
        sm = batch_summary(ws, b.id)
        if as_json:
            typer.echo(
                json.dumps(
                    {**sm.as_dict(), "kind": b.kind, "base_url": b.base_url, "created_at": b.created_at},
                    sort_keys=True,
                    default=str,
                )
            )
        else:
            state = "done" if sm.finished else f"{sm.queued} queued, {sm.running} running"
            typer.echo(f"{b.id}  {b.agent:<24} k={b.k}  {sm.done}/{sm.total}  {state}  {_line(sm)}")
