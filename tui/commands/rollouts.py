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
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated

import typer

from ...engine.core.plural import counted
from ..cli import app, fail, open_workspace

if TYPE_CHECKING:
    from ...engine.app.adaptive import AdaptiveSampler
    from ...engine.app.batches import BatchSummary, RunOptions
    from ...engine.app.executors import Executor, ExecutorChoice
    from ...engine.core.workspace import Workspace


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
    opts: RunOptions,
    quiet: bool,
    sampler: AdaptiveSampler | None = None,
) -> BatchSummary:
    """Runs the batch under a Rich progress bar; first Ctrl-C drains, second aborts. With ``sampler``
    (an adaptive batch) the batch grows round by round and the line shows decided/undecided and spend."""
    from rich.console import Console
    from rich.markup import escape
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ...engine.app import batches

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
                opts,
                on_progress=on_progress,
                stop=stop,
                sampler=sampler,
                # what learning an unaudited version's footprint did before its first episode
                on_note=None if quiet else (lambda line: console.print(f"[dim]footprint:[/] {escape(line)}")),
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
    from ...engine.app.executors import ExecutorChoice

    where = ExecutorChoice(executor_name, concurrency, ray_address)
    new = NewBatch(model, agent, k, tasks, base_url, max_steps, request_timeout, not no_check)
    again = Resume(resume, batch, retry)
    rounds = Rounds(adaptive, budget, max_k, confidence, band)
    executor = _executor(where)
    ws = open_workspace()
    _connect(executor)
    _check_flags(new, again, rounds)
    limits = RunLimits(concurrency, infra_retries, stop_after_unavailable)
    sm, sampler = _plan_and_run(ws, new, again, rounds, executor, as_json, limits)
    _report(sm, sampler, as_json)


@dataclass(frozen=True)
class NewBatch:
    """What a new batch runs: ``model`` or a built-in ``agent``, ``k`` attempts of ``tasks`` (None: all),
    and how the policy is asked (``base_url``, ``max_steps``, ``request_timeout``; ``check``: its endpoint
    first). ``request_timeout`` and ``check`` hold for ``--resume`` too."""

    model: str | None
    agent: str | None
    k: int | None
    tasks: list[str] | None
    base_url: str | None
    max_steps: int
    request_timeout: float
    check: bool

    @property
    def name(self) -> str:
        return self.model or self.agent or ""


@dataclass(frozen=True)
class Resume:
    """``--resume [BATCH] [--retry CODES]``."""

    resume: bool
    batch: str | None
    retry: str | None


@dataclass(frozen=True)
class Rounds:
    """``--adaptive`` and its flags (None: not given)."""

    adaptive: bool
    budget: int | None
    max_k: int | None
    confidence: float | None
    band: str | None

    def given(self) -> list[str]:
        """The adaptive flags given, in the order ``run --help`` lists them."""
        return [
            flag
            for flag, value in (
                ("--budget", self.budget),
                ("--max-k", self.max_k),
                ("--confidence", self.confidence),
                ("--band", self.band),
            )
            if value is not None
        ]


@dataclass(frozen=True)
class RunLimits:
    """``--concurrency`` (None: the default), ``--infra-retries`` and ``--stop-after-unavailable``."""

    concurrency: int | None
    infra_retries: int
    stop_after_unavailable: int


def _executor(where: ExecutorChoice) -> Executor:
    """``--executor``/``--ray-address``/``--concurrency`` to an executor, not yet connected."""
    from ...engine.app.executors import make_executor

    if where.address and where.name != "ray":
        raise fail("--ray-address goes with --executor ray")
    return make_executor(where)  # ExecutorError (an unknown executor, a ray:// address): one line (cli.main)


def _connect(executor: Executor) -> None:
    """Connect before planning: a cluster that does not answer leaves nothing queued."""
    from ...engine.app.executors import ExecutorError

    try:
        executor.connect()
    except ExecutorError as exc:
        raise fail(f"{exc}; nothing was queued") from None


def _check_flags(new: NewBatch, again: Resume, rounds: Rounds) -> None:
    """Flags that do not go together, refused before anything is checked or planned."""
    adaptive_flags = rounds.given()
    if adaptive_flags and not rounds.adaptive:
        raise fail(f"{adaptive_flags[0]} goes with --adaptive")
    if again.resume and (rounds.adaptive or new.k is not None):
        raise fail("--resume takes no --k/--adaptive: the batch remembers them")
    if again.batch and not again.resume:
        raise fail(f"a batch id ({again.batch}) goes with --resume: bandpass run --resume {again.batch}")
    if again.retry is not None and not again.resume:
        raise fail("--retry goes with --resume: bandpass run --resume [BATCH] --retry CODE[,CODE]")
    if again.resume and (new.model or new.agent or new.tasks or new.base_url):
        raise fail("--resume takes no --model/--agent/--tasks/--base-url: the batch remembers them")
    if not again.resume and bool(new.model) == bool(new.agent):
        raise fail("give exactly one of --model M or --agent oracle|nop|cheat:*")


def _plan_and_run(
    ws: Workspace,
    new: NewBatch,
    again: Resume,
    rounds: Rounds,
    executor: Executor,
    quiet: bool,
    limits: RunLimits,
) -> tuple[BatchSummary, AdaptiveSampler | None]:
    """Resumes or plans the batch, then runs it under a progress bar; a refusal the curator can act on is
    one line."""
    from ...engine.app import batches
    from ...engine.app.executors import default_concurrency
    from ...engine.core.errors import BandpassError

    local = executor.name == "local"
    try:
        if again.resume:
            batch_id, sampler = _resume(ws, again, new)
        else:
            batch_id, sampler = _start(ws, new, rounds, executor, local, quiet)
        try:
            batches.require_docker(local)
        except batches.DockerUnavailable as exc:
            raise fail(
                f"{exc} (see bandpass doctor); resume later with bandpass run --resume {batch_id}"
            ) from None
        opts = batches.RunOptions(
            concurrency=limits.concurrency or default_concurrency(),
            executor=executor,
            max_infra_retries=limits.infra_retries,
            max_consecutive_unavailable=limits.stop_after_unavailable,
        )
        return _run_with_progress(ws, batch_id, opts, quiet, sampler), sampler
    except BandpassError as exc:  # a refusal the curator can act on: one line
        raise fail(str(exc)) from None


def _resume(ws: Workspace, again: Resume, new: NewBatch) -> tuple[str, AdaptiveSampler | None]:
    """``--resume``: the batch to finish (its endpoint checked), with ``--retry`` its infra errors
    requeued."""
    from ...engine.app import batches

    resumed = batches.resume_batch(
        ws,
        again.batch,
        retry=again.retry,
        check=new.check,
        request_timeout=new.request_timeout,
        on_warning=_warn,
    )
    if resumed.requeued is not None:
        typer.echo(  # stderr, also with --json: stdout keeps the one JSON object
            f"batch {resumed.batch_id}: {counted(len(resumed.requeued), 'episode')} requeued for a new try "
            f"({again.retry})",
            err=True,
        )
    return resumed.batch_id, resumed.sampler


def _start(
    ws: Workspace, new: NewBatch, rounds: Rounds, executor: Executor, local: bool, quiet: bool
) -> tuple[str, AdaptiveSampler | None]:
    """A new batch, checked (model, endpoint, tasks, Docker engine) and planned; says what it planned on
    stderr unless ``quiet`` (``--json``)."""
    from ...engine.app import batches

    name = new.name
    if new.model and name in batches.BUILTIN:
        raise fail(f"--model {name}: that is a built-in agent name; use --agent {name}")
    request = batches.StartBatch(
        name=name,
        kind="model" if new.model else "builtin",
        tasks=new.tasks,
        k=4 if new.k is None else new.k,
        base_url=new.base_url,
        params={"max_steps": new.max_steps, "request_timeout": new.request_timeout} if new.model else {},
        check_endpoint=new.check,
        request_timeout=new.request_timeout,
        local=local,
    )
    options = (
        batches.AdaptiveOptions(
            new.k, rounds.budget, rounds.max_k, rounds.confidence, rounds.band, slots=executor.slots
        )
        if rounds.adaptive
        else None
    )
    try:
        planned = batches.start_batch(ws, request, adaptive=options, on_warning=_warn)
    except batches.DockerUnavailable as exc:
        raise fail(f"{exc} (see bandpass doctor); nothing was queued") from None
    batch_id, sampler = planned.batch_id, planned.sampler
    if not quiet and sampler is not None:
        st = sampler.settings
        typer.echo(
            f"batch {batch_id}: adaptive over {counted(len(planned.version_ids), 'task version')} for "
            f"{name}: band pass@{st.k} in [{st.lo:g}, {st.hi:g}] decided at {st.confidence:g} "
            "confidence; "
            f"first round {st.first} per task, then {st.step} per task on up to {st.round_tasks} "
            f"tasks a round; max-k {st.max_k}, budget "
            f"{st.budget if st.budget is not None else 'none'}",
            err=True,
        )
    elif not quiet:
        typer.echo(
            f"batch {batch_id}: {counted(len(planned.version_ids), 'task version')} × k={planned.k} for "
            f"{name}",
            err=True,
        )
    return batch_id, sampler


def _report(sm: BatchSummary, sampler: AdaptiveSampler | None, as_json: bool) -> None:
    """The batch's end: the summary (one JSON object with ``--json``), warnings on stderr, and the exit
    status (0 finished; 1 halted, all infra errors, or stopped; 130 interrupted)."""
    status = sampler.refresh() if sampler is not None else None
    if as_json:
        out = sm.as_dict()
        if status is not None:
            out["adaptive"] = status.as_dict()
        typer.echo(json.dumps(out, sort_keys=True, default=str))
    else:
        typer.echo(
            f"batch {sm.batch_id} ({sm.agent}, k={sm.k}): {sm.done}/{sm.total} done · {_line(sm)} · "
            f"{counted(sm.ran, 'episode')} in {sm.wall_s:.0f}s ({sm.episodes_per_min:.1f}/min)"
        )
        if sm.requeued:
            typer.echo(
                f"resumed: {counted(sm.requeued, 'interrupted episode')} requeued, "
                f"{counted(sm.containers_removed, 'leftover container')} removed"
            )
        if sm.infra_errors:
            typer.echo(
                f"WARNING: {sm.infra_errors} of {sm.done} episode{'s' * (sm.done != 1)}"
                f" {'is an infrastructure error' if sm.infra_errors == 1 else 'are infrastructure errors'} "
                "(no valid reward; excluded from pass@k)",
                err=True,
            )
        if status is not None:
            typer.echo(f"adaptive: {status.line()}")
    if sm.halted:
        typer.echo(f"bandpass: error: {sm.halted}", err=True)
    if not sm.finished:
        typer.echo(
            f"stopped with {counted(sm.queued + sm.running, 'episode')} unfinished: "
            f"bandpass run --resume {sm.batch_id}",
            err=True,
        )
        raise typer.Exit(130 if sm.interrupted and not sm.halted else 1)
    if status is not None and not status.stopped:
        typer.echo(
            f"stopped between rounds ({counted(status.undecided, 'task')} undecided): "
            f"bandpass run --resume {sm.batch_id}",
            err=True,
        )
        raise typer.Exit(1 if sm.halted else 130)
    if sm.all_infra:
        typer.echo(
            f"bandpass: error: all {counted(sm.done, 'episode')} of batch {sm.batch_id} ended in "
            f"infrastructure errors: no valid sample (bandpass run --resume {sm.batch_id} --retry "
            "infra_error once fixed)",
            err=True,
        )
        raise typer.Exit(1)


@app.command("batches")
def batches_cmd(
    as_json: Annotated[bool, typer.Option("--json", help="One JSON object per batch.")] = False,
) -> None:
    """List rollout batches, newest first, with their progress."""
    from ...engine.app import reads
    from ...engine.app.batches import batch_summary

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
                state = f"adaptive, {counted(adaptive.get('rounds', 0), 'round')}, " + (
                    f"stopped: {stopped}" if stopped else ("rounds to come" if sm.finished else state)
                )
            typer.echo(f"{b.id}  {b.agent:<24} k={b.k}  {sm.done}/{sm.total}  {state}  {_line(sm)}")
