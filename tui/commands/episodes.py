"""``bandpass episodes`` and ``show``: the episodes, and everything known about one, from the shell.

Same application-layer reads as the TUI's Episodes screen and Replay header (``engine.app.reads``,
``engine.app.episodes``).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...engine.core.outcomes import counted_reward, reward_label
from ..cli import app, open_workspace
from .filters import check_filters
from .options import EpisodeArg

if TYPE_CHECKING:
    from ...engine.app.reads import EpisodeListRow


@app.command("episodes")
def episodes_cmd(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Only this task.")] = None,
    agent: Annotated[
        str | None,
        typer.Option(
            "--agent",
            "-a",
            help=(
                "Only this agent: a policy by its model's name (e.g. demo-step40) or a built-in "
                "(e.g. oracle, nop, cheat:write_reward)."
            ),
        ),
    ] = None,
    outcome: Annotated[
        str | None,
        typer.Option("--outcome", "-o", help="passed, failed, agent_error, infra_error or a full code."),
    ] = None,
    batch: Annotated[str | None, typer.Option("--batch", "-b", help="Only this batch id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List episodes with their outcome, reward, diagnosis and tags."""
    from ...engine.app import reads

    ws = open_workspace()
    rows = reads.episode_list(ws, task=task, agent=agent, outcome=outcome, batch_id=batch)  # never the ORM
    if not rows:  # a typo in a filter is an error, not "no episodes match" (only checked then: ORM)
        check_filters(ws, task=task, agent=agent, batch=batch, outcome=outcome)
    if as_json:
        typer.echo(json.dumps([_episode_json(r) for r in rows], indent=2))
        return
    if not rows:
        typer.echo("no episodes match")
        return
    labels = [reward_label(r.outcome, r.reward) for r in rows]
    width = max(len("reward"), *(len(x) for x in labels))  # never cut: "0 (verifier gave 1: void)"
    typer.echo(
        f"{'ep':>6} {'task':<24} {'version':<12} {'agent':<22} {'outcome':<34} {'reward':>{width}} "
        f"{'diagnosis':<28} tags"
    )
    for r, reward in zip(rows, labels, strict=True):
        typer.echo(
            f"{r.episode_id:>6} {r.task[:24]:<24} {r.version_hash[:12]:<12} {r.agent[:22]:<22} "
            f"{(r.outcome or r.status)[:34]:<34} {reward:>{width}} {r.diagnosis[:28]:<28} "
            f"{', '.join(r.tags)}"
        )
    typer.echo(f"{len(rows)} episode{'s' * (len(rows) != 1)}")


def _episode_json(row: EpisodeListRow) -> dict[str, Any]:
    """A row as ``--json`` prints it: ``reward`` is what the episode counts for (an agent error's 0, an
    infra error's null), ``verifier_reward`` the verifier's own (evidence)."""
    d = row.as_dict()
    d["reward"], d["verifier_reward"] = counted_reward(row.outcome, row.reward), row.reward
    return d


@app.command("show")
def show_cmd(
    episode: EpisodeArg,
    as_json: Annotated[bool, typer.Option("--json", help="The whole record as JSON.")] = False,
) -> None:
    """Everything known about one episode: version, agent, outcome and detail, tries, timings, steps,
    failing checks, diagnosis with evidence, tags, casts."""
    from ...engine.app.episodes import full_record, verifier_line, why_lines

    ws = open_workspace()
    rec = full_record(ws, episode)  # EpisodeNotFound: one line (cli.main)
    if as_json:
        typer.echo(json.dumps(rec, indent=2, default=str))
        return
    probe = " (audit probe)" if rec["probe"] else ""
    typer.echo(f"episode {rec['episode']} · {rec['task']} @ {rec['version'][:12]} · {rec['agent']}{probe}")
    typer.echo(f"batch {rec['batch'] or '—'} · attempt {rec['attempt']} · status {rec['status']}")
    node = rec["node"]
    typer.echo(
        "ran on   "
        + (f"ray node {node['id']} at {node['address']}" if node else "this machine (local executor)")
    )
    if rec["retries"] and rec["detail"]:  # lost tries (a dead node, a dead daemon) with their errors
        typer.echo(f"tries: {rec['retries']} retried")
        for line in rec["detail"].splitlines():
            typer.echo(f"  {line}")
    t = rec["timings"]
    if t["duration_s"] is not None:
        typer.echo(f"ran {t['started_at']} → {t['ended_at']} ({t['duration_s']:.1f} s)")
    for line in why_lines(rec, checks=20, evidence=10):
        typer.echo(line)
    if rec.get("task_steps"):  # a multi-step task: each task step's own verdict
        typer.echo(f"task steps ({len(rec['task_steps'])}):")
        for ts in rec["task_steps"]:
            reward = "—" if ts["reward"] is None else f"{ts['reward']:g}"
            counted = "" if ts["counted"] or ts["outcome"] in ("skipped",) else " (not counted)"
            typer.echo(
                f"  {ts['position'] + 1}. {ts['name']:<16} {ts['outcome']:<24} reward {reward}{counted}"
                + (f" @ {ts['time']:.1f}s" if ts["outcome"] != "skipped" else "")
            )
            if ts["detail"] and ts["outcome"] not in ("passed",):
                typer.echo(f"     {ts['detail'][:150]}")
    if rec["steps"]:
        typer.echo(f"steps ({len(rec['steps'])}):")
        for st in rec["steps"]:
            what = (
                st["parse_error"]
                and f"parse error: {st['parse_error']}"
                or " ; ".join(k.replace("\n", "\\n") for k in st["keystrokes"])
            )
            typer.echo(f"  {st['index']:>3} @ {st['time']:>7.1f}s  {what[:110]}")
    if rec["tags"]:
        typer.echo("tags:")
        for tg in rec["tags"]:
            flags = " (cleared)" if tg["cleared"] else ""
            typer.echo(
                f"  #{tg['id']} {tg['tag']} by {tg['author']}{flags}"
                + (f": {tg['note']}" if tg["note"] else "")
            )
    es = rec["end_state"]
    if es.get("captured"):
        guard = es.get("guard") or {}
        flagged = [f for f in guard.get("findings", []) if not f.get("allowed")]
        typer.echo(
            f"end state: {len(es.get('changes', []))} change{'s' * (len(es.get('changes', [])) != 1)}"
            " against the image"
            + (
                (
                    (
                        "; TAMPER GUARD tripped: "
                        if guard.get("gate", True)
                        else "; guard findings (evidence): "
                    )
                    + ", ".join(sorted({f["rule"] for f in flagged}))
                )
                if guard.get("tripped")
                else ""
            )
        )
        for f in flagged[:10]:
            typer.echo(f"  {f['rule']}: {f['path']} ({f['why']})")
        carry = es.get("carry") or {}
        where = {"in_place": "in place", "service": "as a service"}.get(
            es.get("verify_mode") or "", "in a clean room"
        )
        dropped = "; ".join(f"{d['path']}: {d['why']}" for d in carry.get("dropped", [])[:3])
        typer.echo(f"verified {where}" + (f"; artifacts dropped: {dropped}" if dropped else ""))
    if line := verifier_line(rec):
        typer.echo(line)
    if rec["attribution"].get("summary"):
        typer.echo(f"who ended the sandbox: {rec['attribution']['summary']}")
        if rec["attribution"].get("facts"):
            typer.echo(f"  evidence: {rec['attribution']['facts']}")
    rv = rec["review"]
    if rv:
        typer.echo(
            f"Claude's review ({rv.get('model')}): {rv.get('status')} {rv.get('verdict') or ''} "
            f"{rv.get('code') or ''}".rstrip()
        )
    for name, c in rec["casts"].items():
        typer.echo(f"{name} cast: {c['path']}" + ("" if c["exists"] else " (missing)"))
