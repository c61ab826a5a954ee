"""``bandpass review``, ``bandpass reviews``, ``bandpass review-accept`` and ``bandpass report review``.

A thin face over :mod:`engine.app.review` (Claude's suggestions, stored apart from tags, and their
agreement with curators) and :mod:`engine.app.tagging` (a review accepted as a tag). Exit status of
``review``: 0 when every selected episode got a stored review, 1 when some were left unreviewed (budget,
API failure, Ctrl-C), 2 when the run could not start (no key, unknown prompt, a budget without a price,
bad scope).
"""

from __future__ import annotations

import json
import threading
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...engine.core.plural import counted, listed
from ..cli import app, fail, open_workspace
from .filters import check_filters
from .report import report_app

if TYPE_CHECKING:
    from ...engine.app.reads import ReviewSuggestion
    from ...engine.app.review import ReviewOutcome


def _outcome_line(o: ReviewOutcome) -> str:
    cites = f"{o.citations} cite{'s' * (o.citations != 1)}"
    dropped = f" ({len(o.dropped)} dropped)" if o.dropped else ""
    cost = "cost ?" if o.cost_usd is None else f"${o.cost_usd:.4f}"
    retries = f", {o.api_retries} api retries" if o.api_retries else ""
    body = f"{o.verdict:<10} {o.code or 'none':<34} {cites}{dropped}" if o.status == "ok" else o.error
    return f"ep {o.episode_id:<6} {o.status:<8} {body}  [{cost}{retries}] review #{o.review_id}"


@app.command("review")
def review_cmd(
    episodes: Annotated[list[int] | None, typer.Argument(help="Episode ids to review.")] = None,
    task: Annotated[str | None, typer.Option("--task", help="Every finished episode of this task.")] = None,
    pending: Annotated[
        bool, typer.Option("--pending", help="Every pending episode of the tag queue.")
    ] = False,
    cluster: Annotated[
        str | None,
        typer.Option("--cluster", help="A failure cluster: its id or signature (see `bandpass clusters`)."),
    ] = None,
    sample: Annotated[int, typer.Option("--sample", help="Members of --cluster to review.", min=1)] = 5,
    model: Annotated[
        str | None,
        typer.Option("--model", help="Claude model (default: the generator's model in bandpass.toml)."),
    ] = None,
    prompt: Annotated[str, typer.Option("--prompt", help="Reviewer prompt version.")] = "v1",
    budget_usd: Annotated[
        float | None, typer.Option("--budget-usd", help="Dollar limit for this run.", min=0)
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Reviews at once.", min=1)] = 2,
    again: Annotated[
        bool, typer.Option("--again", help="Review episodes this model and prompt already reviewed.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Only the run's result, as JSON.")] = False,
    list_prompts: Annotated[bool, typer.Option("--list-prompts", help="List prompt versions.")] = False,
) -> None:
    """Have Claude review episodes: a verdict, a taxonomy code and quoted evidence, stored as a
    suggestion (never a tag). Accept one with `bandpass review-accept EP` or one key in the TUI."""
    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    from ...engine.app import review as reviewing
    from ...engine.app.review import (
        PromptError,
        ReviewError,
        ReviewRequest,
        ReviewUnreachable,
        available_versions,
        cluster_summary,
        load_reviewer_prompt,
    )
    from ...engine.core.errors import BandpassError

    if list_prompts:
        for name in available_versions():
            typer.echo(f"{name:<12} {load_reviewer_prompt(name).description}")
        return
    ws = open_workspace()
    request = ReviewRequest(
        episodes=episodes or [],
        task=task,
        pending=pending,
        cluster=cluster,
        sample=sample,
        model=model,
        prompt_version=prompt,
        budget_usd=budget_usd,
        concurrency=concurrency,
        again=again,
    )
    try:
        selected = reviewing.select(ws, request)
    except BandpassError as exc:  # an unknown or unfinished episode, nothing named
        raise fail(str(exc), code=2) from None
    ids, cluster = selected.episode_ids, selected.cluster_id
    # One console on stdout: result lines print above the bar, and rich draws the bar only on a terminal.
    out_console = Console(soft_wrap=True)
    stop = threading.Event()
    progress = Progress(
        TextColumn("reviewing"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[spent]}"),
        TimeElapsedColumn(),
        console=out_console,
        disable=as_json,
        transient=True,
    )
    spent = [0.0]
    priced = reviewing.price_known(ws, model)

    def spent_text() -> str:
        return f"${spent[0]:.4f}" if priced else "cost unknown"  # an unpriced model: never "$0"

    def on_progress(outcome: ReviewOutcome | None, done: int) -> None:
        if outcome is not None and outcome.cost_usd:
            spent[0] += outcome.cost_usd
        progress.update(bar, completed=done, spent=spent_text())
        if outcome is not None and not as_json:
            progress.console.print(_outcome_line(outcome), markup=False, highlight=False)

    with progress:
        bar = progress.add_task("review", total=len(ids), spent=spent_text())
        try:
            result = reviewing.review(
                ws, request, ids, cluster_id=cluster, on_progress=on_progress, stop=stop
            )
        except ReviewUnreachable as exc:  # nothing listening: one line, nothing started (like `run`)
            raise fail(str(exc), code=3) from None
        except (ReviewError, PromptError) as exc:
            raise fail(str(exc), code=2) from None
        except KeyboardInterrupt:
            stop.set()
            raise
    summary = cluster_summary(ws, cluster) if cluster else None
    if as_json:
        out: dict[str, Any] = result.as_dict()
        if summary is not None:
            out["cluster_summary"] = summary
        typer.echo(json.dumps(out, indent=2))
    else:
        for w in result.warnings:
            typer.echo(f"warning: {w}", err=True)
        by = ", ".join(f"{k} {v}" for k, v in result.as_dict()["by_status"].items()) or "none"
        cost = f"${result.spent_usd:.4f}" if result.cost_known else "cost unknown"
        typer.echo(f"{len(result.results)} reviewed ({by}), {cost}, {result.api_retries} api retries")
        if result.dropped:
            typer.echo(
                f"{counted(result.dropped, 'unsupported part')} of answers dropped (see bandpass reviews EP)"
            )
        if result.skipped_reviewed:
            typer.echo(f"{len(result.skipped_reviewed)} already reviewed by this model and prompt (--again)")
        if result.skipped_budget:
            typer.echo(f"budget reached: {counted(len(result.skipped_budget), 'episode')} not reviewed")
        if summary is not None:
            typer.echo(
                f"cluster {summary['id']} ({summary['size']} episode{'s' * (summary['size'] != 1)}, "
                f"{summary['reviewed']} reviewed): "
                f"majority {summary['majority'] or '—'} ({_share(summary['majority_share'])}); "
                f"codes {summary['codes']}; verdicts {summary['verdicts']}"
            )
            if summary["explanation"]:
                typer.echo(f"  e.g. episode {summary['representative_episode']}: {summary['explanation']}")
    left = (
        result.skipped_budget or result.skipped_cancelled or result.count("error") or result.count("budget")
    )
    if left:
        raise typer.Exit(1)


def _share(x: float | None) -> str:
    return "—" if x is None else f"{100 * x:.0f}%"


@app.command("reviews")
def reviews_cmd(
    episodes: Annotated[
        list[int] | None, typer.Argument(help="Only these episodes (all their reviews).")
    ] = None,
    clusters: Annotated[bool, typer.Option("--clusters", help="List failure clusters instead.")] = False,
    cluster: Annotated[str | None, typer.Option("--cluster", help="Summarise one cluster's reviews.")] = None,
    task: Annotated[str | None, typer.Option("--task", help="Clusters of this task only.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Stored review suggestions (latest per episode, or every review of the episodes named), failure
    clusters, or one cluster's summary."""
    from ...engine.app import review as reviewing
    from ...engine.app.review import cluster_summary, failure_clusters

    ws = open_workspace()
    if cluster is not None:
        summary = cluster_summary(ws, cluster)  # ScopeError: one line (cli.main)
        typer.echo(json.dumps(summary, indent=2) if as_json else _summary_text(summary))
        return
    if clusters:
        check_filters(ws, task=task)
        found = failure_clusters(ws, task=task)
        if as_json:
            typer.echo(json.dumps([c.as_dict() for c in found], indent=2))
            return
        if not found:
            typer.echo("no failure clusters" + (f" for task {task}" if task else ""))
            return
        for c in found:
            checks = ",".join(c.failing) or c.code
            typer.echo(f"{c.id}  {c.size:>4}  {c.task:<28} {c.outcome:<28} {checks}")
        return
    stored = reviewing.stored_reviews(ws, episodes or [])  # NothingToRun: one line (cli.main)
    rows, accepted = stored.rows, stored.accepted
    if as_json:
        typer.echo(json.dumps([_review_dict(r) for r in rows], indent=2, default=str))
        return
    if not rows:
        what = listed("episode", episodes) if episodes else "this workspace"
        typer.echo(f"no reviews of {what} yet (bandpass review EP... asks Claude for one)")
        return
    for r in rows:
        code = _code(r) or "none"
        live = accepted.get(r.id) if r.id is not None else None
        acc = f"  accepted as tag {live}" if live is not None else ""
        cost = "cost ?" if r.cost_usd is None else f"${r.cost_usd:.4f}"
        typer.echo(
            f"#{r.id:<5} ep {r.episode_id:<6} {r.status:<8} {r.verdict:<10} {code:<34} "
            f"{r.model}/{r.prompt_version} {cost}{acc}"
        )
        if episodes:
            if r.explanation:
                typer.echo(f"    {r.explanation}")
            for c in json.loads(r.citations_json or "[]"):
                where = f"step {c['step']}" if c.get("source") == "step" else c.get("source")
                typer.echo(f"    [{where}] {c.get('quote')!r}")
            for d in json.loads(r.dropped_json or "[]"):
                typer.echo(f"    dropped {d.get('what')}: {d.get('reason')}")
            if r.error:
                typer.echo(f"    error: {r.error}")


def _code(r: ReviewSuggestion) -> str:
    """A review's taxonomy code ("" when it gave none); imported here, not at the top, because the
    validation module loads the ORM and every command module is imported at start-up."""
    from ...engine.app.review import review_code

    return review_code(r)


def _review_dict(r: ReviewSuggestion) -> dict[str, Any]:
    d = r.model_dump()
    for k in ("citations_json", "dropped_json", "raw_input_json"):
        d[k.removesuffix("_json")] = json.loads(d.pop(k) or "null")
    d["code"] = _code(r) or None
    return d


def _summary_text(s: dict[str, Any]) -> str:
    lines = [
        f"cluster {s['id']}: {s['task']} {s['outcome']} {','.join(s['failing_checks']) or s['diagnosis']} "
        f"({s['size']} episode{'s' * (s['size'] != 1)}, {s['reviewed']} reviewed)",
        f"majority {s['majority'] or '—'} ({_share(s['majority_share'])}); codes {s['codes']}; "
        f"verdicts {s['verdicts']}; {s['dropped']} dropped",
    ]
    if s["explanation"]:
        lines.append(f"e.g. episode {s['representative_episode']}: {s['explanation']}")
    return "\n".join(lines)


@app.command("review-accept")
def review_accept_cmd(
    episode: Annotated[int | None, typer.Argument(help="Accept this episode's latest valid review.")] = None,
    review: Annotated[int | None, typer.Option("--review", help="Accept this review id instead.")] = None,
    note: Annotated[str, typer.Option("--note", help="Note on the tag.")] = "",
) -> None:
    """Write the review's suggested code as your tag (author and time recorded, like `bandpass tag`)."""
    from ...engine.app import review as reviewing
    from ...engine.app import tagging

    ws = open_workspace()
    if review is None:
        if episode is None:
            raise fail("name an episode or --review ID")
        review = reviewing.latest_valid_review(ws, episode).review_id  # NothingToRun: one line (cli.main)
        if review is None:
            raise fail(f"episode {episode} has no valid review to accept (bandpass review {episode})")
    accepted = tagging.accept_review(ws, review, note=note)  # ReviewError, TagError: one line (cli.main)
    tag = accepted.tag
    if not accepted.added:  # accepting twice changes nothing
        typer.echo(
            f"episode {tag.episode_id} already carries {tag.tag_class}.{tag.subclass} (tag {tag.id}): "
            f"nothing added (review #{review})"
        )
        return
    typer.echo(
        f"tag {tag.id}: {tag.tag_class}.{tag.subclass} on episode {tag.episode_id} (from review #{review})"
    )


@report_app.command("review")
def report_review(
    model: Annotated[str | None, typer.Option("--model", "-m", help="Only this review model.")] = None,
    independent: Annotated[
        bool, typer.Option("--independent", help="Leave out tags written by accepting a review.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Agreement of Claude's reviews and of the deterministic diagnosis with curator tags: class and
    subclass agreement, Cohen's kappa, per-class precision/recall, cost per reviewed episode."""
    from rich.console import Console

    from ...engine.app import review as reviewing

    ws = open_workspace()
    rep = reviewing.review_report(ws, model=model, independent=independent)
    if as_json:
        typer.echo(json.dumps(rep.as_dict(), indent=2))
        return
    Console(width=160).print(reviewing.render_review_report(rep))
