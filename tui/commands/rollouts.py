"""``bandpass run`` (rollout batches, ``--adaptive``, ``--resume``) and ``bandpass batches``.

The command plans the batch in the database before running anything, so whatever stops it (a crash,
SIGKILL, Ctrl-C twice, a reboot) ``bandpass run --resume`` finishes exactly the unfinished attempts. An
adaptive batch (``engine.calibration.adaptive``) keeps its settings in the batch row too, so ``--resume``
also continues its rounds.
"""

from __future__ import annotations

import json
import signal
import threading
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bandpass.tui.cli import app, fail, open_workspace

if TYPE_CHECKING:
    from bandpass.engine.calibration.adaptive import AdaptiveSampler
    from bandpass.engine.core.workspace import Workspace
    from bandpass.engine.run.rollouts import BatchSummary


def _warn(line: str) -> None:
    typer.echo(f"WARNING: {line}", err=True)  # e.g. bandpass.toml's window vs the served max_model_len


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
    sampler: AdaptiveSampler | None = None,
) -> Any:
    """Runs the batch under a Rich progress bar; first Ctrl-C drains, second aborts. With ``sampler``
    (an adaptive batch) the batch grows round by round and the line shows decided/undecided and spend."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from bandpass.engine.app import batches

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
        line = f"{_line(sm)} · running {sm.running}"
        if sampler is not None:
            line += f" · {sampler.status.line()}"
        progress.update(bar, total=sm.total, completed=sm.done, line=line)

    try:
        with progress:
            return batches.run_batch(
                ws,
                batch_id,
                concurrency=concurrency,
                on_progress=on_progress,
                stop=stop,
                max_infra_retries=retries,
                executor=executor,
                max_consecutive_unavailable=max_unavailable,
                sampler=sampler,
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
    k: Annotated[
        int | None,
        typer.Option(
            "--k", min=1, help="Attempts per task version (default 4; with --adaptive: the first round, 1)."
        ),
    ] = None,
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
    # --- adaptive sampling (engine/calibration/adaptive.py) ---
    adaptive: Annotated[
        bool,
        typer.Option(
            "--adaptive",
            help="Rounds of episodes only on tasks whose band is still undecided, most informative first.",
        ),
    ] = False,
    budget: Annotated[
        int | None,
        typer.Option(
            "--budget", min=1, help="With --adaptive: most episodes in the whole batch (default: none)."
        ),
    ] = None,
    max_k: Annotated[
        int | None,
        typer.Option(
            "--max-k", min=1, help="With --adaptive: most episodes per task in this batch (default 32)."
        ),
    ] = None,
    confidence: Annotated[
        float | None,
        typer.Option(
            "--confidence",
            help="With --adaptive: confidence of the band decisions (default [band] confidence).",
        ),
    ] = None,
    band: Annotated[
        str | None,
        typer.Option(
            "--band", help="With --adaptive: LO:HI on pass@k (default: the model's band, else [band])."
        ),
    ] = None,
) -> None:
    """Roll out k attempts per task version for a model (or built-in agent), queued so --resume works;
    --adaptive spends them in rounds only where the band decision is still open."""
    from bandpass.engine.app import batches
    from bandpass.engine.core.errors import BandpassError
    from bandpass.engine.run.executors import ExecutorError, make_executor
    from bandpass.engine.run.rollouts import default_concurrency
    from bandpass.engine.sandbox.docker_engine import DockerUnavailable

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
    try:  # connect before planning: a cluster that does not answer leaves nothing queued
        executor.connect()
    except ExecutorError as exc:
        raise fail(f"{exc}; nothing was queued") from None
    sampler: AdaptiveSampler | None = None
    adaptive_flags = [
        flag
        for flag, value in (
            ("--budget", budget),
            ("--max-k", max_k),
            ("--confidence", confidence),
            ("--band", band),
        )
        if value is not None
    ]
    if adaptive_flags and not adaptive:
        raise fail(f"{adaptive_flags[0]} goes with --adaptive")
    if resume and (adaptive or k is not None):
        raise fail("--resume takes no --k/--adaptive: the batch remembers them")
    if batch and not resume:
        raise fail(f"a batch id ({batch}) goes with --resume: bandpass run --resume {batch}")
    if retry is not None and not resume:
        raise fail("--retry goes with --resume: bandpass run --resume [BATCH] --retry CODE[,CODE]")
    if resume and (model or agent or tasks or base_url):
        raise fail("--resume takes no --model/--agent/--tasks/--base-url: the batch remembers them")
    if not resume and bool(model) == bool(agent):
        raise fail("give exactly one of --model M or --agent oracle|nop|cheat:*")
    try:
        if resume:
            resumed = batches.resume_batch(
                ws,
                batch,
                retry=retry,
                check=not no_check,
                request_timeout=request_timeout,
                on_warning=_warn,
            )
            batch_id, sampler = resumed.batch_id, resumed.sampler
            if resumed.requeued is not None:
                typer.echo(  # stderr, also with --json: stdout keeps the one JSON object
                    f"batch {batch_id}: {len(resumed.requeued)} episode(s) requeued for a new try ({retry})",
                    err=True,
                )
        else:
            name = model or agent or ""
            if model:
                from bandpass.engine.run.agents.builtin import BUILTIN

                if name in BUILTIN:
                    raise fail(f"--model {name}: that is a built-in agent name; use --agent {name}")
            request = batches.StartBatch(
                name=name,
                kind="model" if model else "builtin",
                tasks=tasks,
                k=4 if k is None else k,
                base_url=base_url,
                params={"max_steps": max_steps, "request_timeout": request_timeout} if model else {},
                check_endpoint=not no_check,
                request_timeout=request_timeout,
                local=local,
            )
            options = (
                batches.AdaptiveOptions(k, budget, max_k, confidence, band, slots=executor.slots)
                if adaptive
                else None
            )
            try:
                planned = batches.start_batch(ws, request, adaptive=options, on_warning=_warn)
            except DockerUnavailable as exc:
                raise fail(f"{exc} (see bandpass doctor); nothing was queued") from None
            batch_id, sampler = planned.batch_id, planned.sampler
            if not as_json and sampler is not None:
                st = sampler.settings
                typer.echo(
                    f"batch {batch_id}: adaptive over {len(planned.version_ids)} task version(s) for "
                    f"{name}: band pass@{st.k} in [{st.lo:g}, {st.hi:g}] decided at {st.confidence:g} "
                    "confidence; "
                    f"first round {st.first} per task, then {st.step} per task on up to {st.round_tasks} "
                    f"tasks a round; max-k {st.max_k}, budget "
                    f"{st.budget if st.budget is not None else 'none'}",
                    err=True,
                )
            elif not as_json:
                typer.echo(
                    f"batch {batch_id}: {len(planned.version_ids)} task version(s) × k={planned.k} "
                    f"for {name}",
                    err=True,
                )
        try:
            batches.require_docker(local)
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
            sampler,
        )
    except BandpassError as exc:  # a refusal the curator can act on: one line
        raise fail(str(exc)) from None

    status = sampler.refresh() if sampler is not None else None
    if as_json:
        out = sm.as_dict()
        if status is not None:
            out["adaptive"] = status.as_dict()
        typer.echo(json.dumps(out, sort_keys=True, default=str))
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
        if status is not None:
            typer.echo(f"adaptive: {status.line()}")
    if sm.halted:
        typer.echo(f"bandpass: error: {sm.halted}", err=True)
    if not sm.finished:
        typer.echo(
            f"stopped with {sm.queued + sm.running} episode(s) unfinished: "
            f"bandpass run --resume {sm.batch_id}",
            err=True,
        )
        raise typer.Exit(130 if sm.interrupted and not sm.halted else 1)
    if status is not None and not status.stopped:
        typer.echo(
            f"stopped between rounds ({status.undecided} task(s) undecided): "
            f"bandpass run --resume {sm.batch_id}",
            err=True,
        )
        raise typer.Exit(1 if sm.halted else 130)
    if sm.all_infra:
        typer.echo(
            f"bandpass: error: all {sm.done} episode(s) of batch {sm.batch_id} ended in infrastructure "
            f"errors: no valid sample (bandpass run --resume {sm.batch_id} --retry infra_error once fixed)",
            err=True,
        )
        raise typer.Exit(1)


@app.command("batches")
def batches_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per batch.")] = False,
) -> None:
    """List rollout batches, newest first, with their progress."""
    from bandpass.engine.app import reads
    from bandpass.engine.run.rollouts import batch_summary

    ws = open_workspace()
    rows = reads.batches(ws)
    if not rows and not as_json:
        typer.echo("no batches yet (bandpass run, or n on the TUI's Runs screen, starts one)")
        return
    for b in rows:
        sm = batch_summary(ws, b.id)
        if as_json:
            typer.echo(
                json.dumps(
                    {
                        **sm.as_dict(),
                        "kind": b.kind,
                        "base_url": b.base_url,
                        "created_at": b.created_at,
                        "adaptive": reads.adaptive_settings(b) or None,
                    },
                    sort_keys=True,
                    default=str,
                )
            )
        else:
            state = "done" if sm.finished else f"{sm.queued} queued, {sm.running} running"
            adaptive = reads.adaptive_settings(b)
            if adaptive:  # an adaptive batch is done only once its sampler stopped on its own
                stopped = adaptive.get("stopped")
                state = f"adaptive, {adaptive.get('rounds', 0)} round(s), " + (
                    f"stopped: {stopped}" if stopped else ("rounds to come" if sm.finished else state)
                )
            typer.echo(f"{b.id}  {b.agent:<24} k={b.k}  {sm.done}/{sm.total}  {state}  {_line(sm)}")
