"""``bandpass generate`` and ``bandpass report generation``.

A thin face over :func:`engine.app.generate.generate`: progress comes from the same
``GenerationEvent`` stream the TUI's Generate screen subscribes to, so the CLI and the screen can never
disagree about what happened. Exit status: 0 when at least one task was accepted and no attempt failed
for the API, 1 when none was accepted, 2 when the batch could not start (no API key, unknown prompt
version or model price), 3 when the generator could not be reached or refused the requests (any attempt
ended with an API failure; ``--check`` failing too) — an overnight script can tell an outage from a bad
prompt.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...engine.core.plural import counted
from ..cli import app, fail, open_workspace
from .report import report_app

if TYPE_CHECKING:  # imported where used: every command module is imported at start-up
    from ...engine.core.events import GenerationEvent
    from ...engine.core.workspace import Workspace

#: Exit status when the generator's API could not be reached or refused the requests.
EXIT_UNREACHABLE = 3


def _progress_printer(verbose: bool) -> Callable[[GenerationEvent], None]:
    """One line per meaningful event (tool calls, audits, finish); ``--verbose`` also streams text."""
    lock = threading.Lock()

    def on_event(ev: GenerationEvent) -> None:
        tag = f"[g{ev.generation_id}]"
        line = None
        if ev.kind == "text":
            if verbose:
                with lock:
                    typer.echo(ev.data, nl=False)
            return
        data = json.loads(ev.data) if ev.data.startswith("{") else {}
        if ev.kind == "started":
            axes = data.get("seed_axes", {})
            line = (
                f"{tag} started {data.get('prompt_version')} {data.get('model')} {data.get('difficulty')}: "
                f"{axes.get('domain')} / {axes.get('skill')}"
            )
        elif ev.kind == "tool_use":
            arg = (data.get("input") or {}).get("path") or (data.get("input") or {}).get("command") or ""
            line = f"{tag}   {data.get('name')} {str(arg)[:60]}".rstrip()
        elif ev.kind == "tool_result" and data.get("name") in ("audit", "submit", "build"):
            first = str(data.get("content", "")).splitlines()[:2]
            line = f"{tag}   -> {' | '.join(first)[:140]}"
        elif ev.kind == "api_retry":
            line = (
                f"{tag}   api {data.get('code')}: {data.get('detail')} — retry {data.get('attempt')} "
                f"in {data.get('wait_s')}s"
            )
        elif ev.kind == "turn":
            line = (
                f"{tag} turn {data.get('turn')}: {data.get('tokens_in')} in / {data.get('tokens_out')} out, "
                f"${data.get('cost_usd', 0):.4f}"
            )
        elif ev.kind == "finished":
            what = data.get("task_name") or data.get("reason") or ""
            line = (
                f"{tag} {data.get('outcome')} {what}  ({data.get('turns')} turns, "
                f"${data.get('cost_usd', 0):.4f}, {data.get('wall_s', 0):.0f}s, "
                f"{data.get('api_retries')} api retries)"
            )
            if data.get("detail") and data.get("outcome") != "accepted":
                line += f"\n{tag}   {data['detail']}"
        if line is not None:
            with lock:
                if verbose:
                    typer.echo("")
                typer.echo(line)

    return on_event


@app.command("generate")
def generate_cmd(
    n: Annotated[int, typer.Option("--n", help="Number of generation attempts.", min=0)] = 1,
    model: Annotated[
        str | None, typer.Option("--model", help="Claude model (default: bandpass.toml [generator] model).")
    ] = None,
    prompt: Annotated[
        str, typer.Option("--prompt", help="Prompt version (see --list-prompts).")
    ] = "v2-context",
    concurrency: Annotated[int, typer.Option("--concurrency", help="Attempts run at once.", min=1)] = 1,
    difficulty: Annotated[
        str | None, typer.Option("--difficulty", help="easy|medium|hard (default: drawn per attempt).")
    ] = None,
    budget_usd: Annotated[
        float | None, typer.Option("--budget-usd", help="Dollar limit for the whole batch.", min=0)
    ] = None,
    task_budget_usd: Annotated[
        float | None, typer.Option("--task-budget-usd", help="Dollar limit per attempt (default 5).", min=0)
    ] = None,
    max_turns: Annotated[int, typer.Option("--max-turns", help="Turn limit per attempt.", min=1)] = 40,
    max_tokens: Annotated[
        int, typer.Option("--max-tokens", help="Token limit (in + out) per attempt.", min=1)
    ] = 3_000_000,
    max_wall: Annotated[float, typer.Option("--max-wall", help="Seconds per attempt.", min=1)] = 1800.0,
    target_model: Annotated[
        str | None,
        typer.Option("--target-model", help="Policy model: its tasks above the band are shown as too easy."),
    ] = None,
    reruns: Annotated[int, typer.Option("--reruns", help="Oracle reruns in each audit.", min=1)] = 2,
    max_output_tokens: Annotated[
        int, typer.Option("--max-output-tokens", help="max_tokens of each API call.", min=256)
    ] = 8192,
    max_no_tool_turns: Annotated[
        int,
        typer.Option("--max-no-tool-turns", help="Replies without a tool call before rejecting.", min=1),
    ] = 3,
    api_timeout: Annotated[
        float,
        typer.Option(
            "--api-timeout", help="Seconds to wait on the API (connect, each stream read).", min=0.1
        ),
    ] = 600.0,
    api_retries: Annotated[
        int,
        typer.Option("--api-retries", help="Retries of a failed API call before the attempt errs.", min=0),
    ] = 8,
    check: Annotated[
        bool,
        typer.Option("--check", help="Check endpoint, key, model and tool use with a one-token request."),
    ] = False,
    seed: Annotated[int | None, typer.Option("--seed", help="Seed of the axes draw (reproducible).")] = None,
    accept_warnings: Annotated[
        bool, typer.Option("--accept-warnings", help="Accept tasks whose audit verdict is 'warning'.")
    ] = False,
    audit: Annotated[
        bool,
        typer.Option(
            "--audit",
            help="Audit each accepted task fully as soon as it is accepted (generation and audits overlap).",
        ),
    ] = False,
    audit_concurrency: Annotated[
        int | None, typer.Option("--audit-concurrency", help="Audits at once with --audit.", min=1)
    ] = None,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Stream the model's text.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Only the batch result, as JSON.")] = False,
    list_prompts: Annotated[
        bool, typer.Option("--list-prompts", help="List prompt versions and exit.")
    ] = False,
) -> None:
    """Have Claude write and self-audit new tasks; accepted ones enter the workspace (origin generated)."""
    from ...engine.app import generate as generation
    from ...engine.app.generate import (
        Budget,
        GeneratorError,
        GeneratorUnreachable,
        RetryPolicy,
        available_versions,
        is_api_code,
        load_prompt,
    )
    from ...engine.core.events import EventBus, GenerationEvent

    if list_prompts:
        for name in available_versions():
            typer.echo(f"{name:<16} {load_prompt(name).description}")
        return
    ws = open_workspace(create=not check)
    if check:
        _check(ws, model, as_json)
        return
    from ...engine.app.prices import PriceUnknown
    from ...engine.app.prices import prices as price_table

    prices = price_table(ws)
    gen_model = generation.generator_model(ws, model)
    if not prices.known(gen_model):
        unknown = PriceUnknown(gen_model, prices.files, prices.workspace_file)
        if task_budget_usd is not None:
            raise fail(f"--task-budget-usd needs a price: {unknown}", code=2)
        typer.echo(f"warning: cost unknown: {unknown}", err=True)
    bus = EventBus()
    if not as_json:
        bus.subscribe(GenerationEvent, _progress_printer(verbose))
    stop = threading.Event()
    request = generation.GenerateRequest(
        n=n,
        model=model,
        prompt_version=prompt,
        concurrency=concurrency,
        difficulty=difficulty,
        budget=Budget(
            max_turns=max_turns,
            max_tokens=max_tokens,
            max_usd=5.0 if task_budget_usd is None else task_budget_usd,
            max_wall_s=max_wall,
            max_no_tool_turns=max_no_tool_turns,
        ),
        batch_budget_usd=budget_usd,
        target_model=target_model,
        seed=seed,
        audit_reruns=reruns,
        accept_warnings=accept_warnings,
        max_tokens_per_turn=max_output_tokens,
        api_timeout_s=api_timeout,
        retry=RetryPolicy(max_retries=api_retries),
    )
    audited = None
    try:
        if audit:
            result, audited, audit_run = generation.generate_and_audit(
                ws,
                request,
                concurrency=audit_concurrency,
                bus=bus,
                stop=stop,
                on_audit_progress=_audit_printer(as_json),
            )
        else:
            result = generation.generate(ws, request, bus=bus, stop=stop)
    except GeneratorUnreachable as exc:  # nothing listening: one line, nothing started (like `run`)
        raise fail(str(exc), code=EXIT_UNREACHABLE) from None
    except GeneratorError as exc:
        raise fail(str(exc), code=2) from None
    except KeyboardInterrupt:
        stop.set()
        raise
    if as_json:
        typer.echo(json.dumps(result.as_dict(), indent=2, default=str))
    else:
        accepted = result.accepted
        spent = f"${result.spent_usd:.4f}" if prices.known(gen_model) else "cost unknown"
        typer.echo(
            f"{len(accepted)}/{len(result.results)} accepted, {spent} spent"
            + (f", {result.skipped} not started" if result.skipped else "")
        )
        if result.halted:
            typer.echo(f"batch halted: {result.halted}")
        for r in accepted:
            typer.echo(f"    {r.task_name}  (generation {r.generation_id})")
        if audited is not None:
            verdicts = ", ".join(f"{n} {v}" for v, n in sorted(audited.verdicts.items())) or "none"
            typer.echo(f"audited as they came: {audited.done}/{audited.total} ({verdicts}); run {audit_run}")
    api_failed = [r for r in result.results if r.outcome == "error" and is_api_code(r.reason)]
    if api_failed:
        last = api_failed[-1]
        typer.echo(
            f"bandpass: error: {counted(len(api_failed), 'attempt')} could not use the generator "
            f"({last.reason}): {last.detail}",
            err=True,
        )
        raise typer.Exit(EXIT_UNREACHABLE)
    if n and not result.accepted:
        raise typer.Exit(1)


def _audit_printer(as_json: bool) -> Callable[[Any], None]:
    """The pipeline's audit progress, one line per phase change (nothing with --json)."""

    def show(sm: Any) -> None:
        if not as_json and sm.event:
            typer.echo(f"  audit [{sm.done}/{sm.total} done, {sm.running} running] {sm.event}", err=True)

    return show


def _check(ws: Workspace, model: str | None, as_json: bool) -> None:
    """``--check``: one line per step (endpoint, auth, model, tools, stream, price), then the fix."""
    from ...engine.app import generate as generation
    from ...engine.app.generate import GeneratorError

    model = generation.generator_model(ws, model)
    try:
        report = generation.check(ws, model)
    except GeneratorError as exc:
        raise fail(str(exc), code=2) from None
    if as_json:
        typer.echo(json.dumps(report.as_dict(), indent=2))
    else:
        typer.echo(f"generator {model} at {report.url}")
        marks = {True: "ok  ", False: "FAIL", None: "-   "}
        for step in report.steps:
            mark = "warn" if step.name == "price" and step.ok is False else marks[step.ok]
            typer.echo(f"  {mark} {step.name:<9}{step.detail}")
        if report.error:
            typer.echo(f"bandpass: error: {report.error}", err=True)
        if report.hint:
            typer.echo(f"  hint: {report.hint}", err=not report.ok)
    if not report.ok:
        raise typer.Exit(EXIT_UNREACHABLE)


@report_app.command("generation")
def report_generation(
    model: Annotated[str | None, typer.Option("--model", "-m", help="Only this generator model.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Per prompt version and model: attempts, accepted, solvability yield, $ per accepted, top reasons."""
    from rich.console import Console

    from ...engine.app.generate import generation_report, render_generation_report

    ws = open_workspace()
    rows = generation_report(ws, model=model)
    if as_json:
        typer.echo(json.dumps([r.as_dict() for r in rows], indent=2))
        return
    Console(width=160).print(render_generation_report(rows))
    typer.echo(
        "yield = accepted / attempts; attempts exclude errors (api fail: the generator's API; docker err; "
        "own err: Bandpass's own) and cancellations; $/accepted counts every attempt's spend."
    )
