"""``bandpass diagnose``, ``clusters``, ``episodes`` and ``show``: why episodes ended, from the shell.

Same engine functions as the TUI's Episodes screen, Replay header and tag queue
(``engine.review.diagnoser``, ``engine.review.evidence``, ``engine.review.signatures``).
"""

from __future__ import annotations

import json
import time
from typing import TYPE_CHECKING, Annotated, Any

import typer

from bandpass.engine.core.outcomes import counted_reward, reward_label
from bandpass.tui.cli import app, fail, open_workspace
from bandpass.tui.commands.known import check_filters

if TYPE_CHECKING:
    from bandpass.engine.app.reads import EpisodeListRow


@app.command("diagnose")
def diagnose_cmd(
    episodes: Annotated[
        list[int] | None, typer.Argument(help="Episode ids (default: those not yet diagnosed).")
    ] = None,
    all_: Annotated[bool, typer.Option("--all", help="Diagnose every finished episode again.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="Print the diagnoses of the given episodes as JSON.")
    ] = False,
) -> None:
    """Diagnose finished episodes: a suggested tag, a confidence and evidence (stored; shown by show)."""
    from bandpass.engine.app import reads
    from bandpass.engine.review.diagnoser import diagnose_episodes

    ws = open_workspace()
    if episodes and all_:
        raise fail("give episode ids or --all, not both")
    if episodes:
        known = set(reads.finished_episode_ids(ws))
        missing = [e for e in episodes if e not in known]
        if missing:
            raise fail(f"not a finished episode: {', '.join(map(str, missing))} (see bandpass episodes)")
    t0 = time.perf_counter()
    n = diagnose_episodes(ws, episodes or None, missing_only=not (episodes or all_))
    took = time.perf_counter() - t0
    if as_json and episodes:
        from bandpass.engine.review.evidence import episode_record

        out = [{"episode": e, **(episode_record(ws, e)["diagnosis"] or {})} for e in episodes]
        typer.echo(json.dumps(out, indent=2))
        return
    typer.echo(f"diagnosed {n} episode{'s' * (n != 1)} in {took:.2f} s")
    if episodes:
        from bandpass.engine.review.evidence import episode_record

        for e in episodes:
            d = episode_record(ws, e)["diagnosis"] or {}
            tag = f" → {d['tag']}" if d.get("tag") else ""
            typer.echo(
                f"{e:>6} {d.get('code', '')} ({d.get('confidence', 0):.0%}){tag}: {d.get('summary', '')}"
            )


@app.command("clusters")
def clusters_cmd(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Only this task's failures.")] = None,
    probes: Annotated[
        bool, typer.Option("--probes", help="Include the audit's oracle/nop/cheat episodes.")
    ] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """Failures grouped by signature (task version, outcome, failing checks or diagnosis + last error).
    A cluster's id is the same in the tag queue (`bandpass queue --cluster ID`) and the reviewer
    (`bandpass review --cluster ID`)."""
    from bandpass.engine.review.clusters import load_clusters

    ws = open_workspace()
    check_filters(ws, task=task)
    cl = load_clusters(ws, task=task, include_probes=probes)
    if as_json:
        typer.echo(json.dumps([c.as_dict() for c in cl], indent=2))
        return
    if not cl:
        typer.echo("no failures" + (f" for task {task}" if task else ""))
        return
    from bandpass.engine.review.signatures import describe

    typer.echo(f"{'id':<10} {'size':>5} {'rep':>6} {'task':<24} {'diagnosis':<30} signature")
    for c in cl:
        typer.echo(
            f"{c.id:<10} {c.size:>5} {c.representative.episode_id:>6} {c.task[:24]:<24} {c.code[:30]:<30} "
            f"{describe(c.signature)[:90]}"
        )
    typer.echo(f"{len(cl)} cluster{'s' * (len(cl) != 1)}, {sum(c.size for c in cl)} failures")


@app.command("episodes")
def episodes_cmd(
    task: Annotated[str | None, typer.Option("--task", "-t", help="Only this task.")] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", "-a", help="Only this agent (e.g. policy:M, oracle).")
    ] = None,
    outcome: Annotated[
        str | None,
        typer.Option("--outcome", "-o", help="passed, failed, agent_error, infra_error or a full code."),
    ] = None,
    batch: Annotated[str | None, typer.Option("--batch", "-b", help="Only this batch id.")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Machine-readable output.")] = False,
) -> None:
    """List episodes with their outcome, reward, diagnosis and tags."""
    from bandpass.engine.app import reads

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
    episode: Annotated[int, typer.Argument(help="Episode id.")],
    as_json: Annotated[bool, typer.Option("--json", help="The whole record as JSON.")] = False,
) -> None:
    """Everything known about one episode: version, agent, outcome and detail, tries, timings, steps,
    failing checks, diagnosis with evidence, tags, casts."""
    from bandpass.engine.review.evidence import EpisodeNotFound, episode_record, why_lines

    ws = open_workspace()
    try:
        rec = episode_record(ws, episode)
    except EpisodeNotFound as e:
        raise fail(str(e)) from None
    # evidence other stages keep: the end state and tamper guard (run), Claude's review (review)
    from bandpass.engine.app.reads import episode_evidence
    from bandpass.engine.review.review_summary import latest_review_summary
    from bandpass.engine.run.endstate import episode_changes

    rec["end_state"] = episode_changes(ws, episode)
    rec["attribution"] = episode_evidence(ws, episode)
    rec["review"] = latest_review_summary(ws, episode)
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
            f"end state: {len(es.get('changes', []))} change(s) against the image"
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
