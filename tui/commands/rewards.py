"""Reward-integrity commands: ``regrade`` (a fixed verifier on stored end states) and ``changes`` (what an
episode's policy changed, with the tamper guard's findings)."""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Annotated, Any

import typer

from ...engine.core.plural import counted
from ..cli import app, fail, open_workspace

if TYPE_CHECKING:
    from ...engine.app.regrade import RegradeItem


@app.command("regrade")
def regrade_cmd(
    task: Annotated[str, typer.Argument(help="Task name; its latest version is the one regraded into.")],
    from_hash: Annotated[
        str | None,
        typer.Option("--from", help="Version-hash prefix to regrade from (default: the previous version)."),
    ] = None,
    as_json: Annotated[
        bool, typer.Option("--json", help="A JSON list, one object per source episode.")
    ] = False,
) -> None:
    """Re-run a fixed verifier on the end states of an earlier version's episodes (only tests/ may differ)."""
    from ...engine.app.regrade import RegradeRefused, regrade

    ws = open_workspace()

    def show(item: RegradeItem) -> None:
        if as_json:
            return
        if item.skipped:
            typer.echo(f"skipped  episode {item.source_episode}: {item.skipped}")
        else:
            typer.echo(
                f"episode {item.source_episode} -> {item.episode}: reward {item.old_reward} -> "
                f"{item.new_reward}  {item.outcome}"
            )

    try:
        plan, items = regrade(ws, task, from_hash=from_hash, on_item=show)
    except RegradeRefused as exc:
        raise fail(str(exc).removeprefix("regrade: ")) from None
    if as_json:
        typer.echo(json.dumps([i.as_dict() for i in items], sort_keys=True))
        return
    done = sum(1 for i in items if not i.skipped)
    typer.echo(
        f"{plan.task}: {plan.old.hash[:12]} -> {plan.new.hash[:12]}: regraded {done}, "
        f"skipped {len(items) - done}, already regraded {plan.already}"
    )


@app.command("changes")
def changes_cmd(
    episode: Annotated[int, typer.Argument(help="Episode id.")],
    diff: Annotated[
        str | None, typer.Option("--diff", help="Print the diff of one changed file against the image.")
    ] = None,
    as_json: Annotated[bool, typer.Option("--json")] = False,
    all_dirs: Annotated[bool, typer.Option("--dirs", help="Also list changed directories.")] = False,
) -> None:
    """What the policy changed in its container (added / modified / deleted) and what the guard flagged."""
    from ...engine.app.changes import change_diff, episode_changes

    ws = open_workspace()
    try:
        info = episode_changes(ws, episode)
    except KeyError as exc:
        raise fail(str(exc).strip("'")) from None
    if diff is not None:
        typer.echo(change_diff(ws, episode, diff).rstrip("\n"))
        return
    if as_json:
        typer.echo(json.dumps(info, sort_keys=True))
        return
    if not info["captured"]:
        typer.echo(f"episode {episode}: no end state captured ({info['outcome'] or 'not finished'})")
        return
    flagged: dict[str, list[dict[str, Any]]] = {}
    for f in info["guard"]["findings"]:
        flagged.setdefault(f["path"], []).append(f)
    mark = {"added": "A", "modified": "M", "deleted": "D"}
    for c in info["changes"]:
        if c["type"] == "dir" and not all_dirs and c["path"] not in flagged:
            continue
        size = "" if c.get("size") is None else f"{c['size']:>9} B"
        note = "" if c["archived"] or c["kind"] == "deleted" or c["type"] == "dir" else "  (not archived)"
        typer.echo(f"{mark[c['kind']]} {c['path']}  {size}{note}".rstrip())
        for f in flagged.get(c["path"], []):
            state = "allowed" if f["allowed"] else ("TAMPER" if info["guard"]["gate"] else "flagged")
            typer.echo(f"    {state} {f['rule']}: {f['why']}")
    carry = info.get("carry") or {}
    if info["verify_mode"] in ("clean_room", "service") and carry:
        room = "clean room" if info["verify_mode"] == "clean_room" else "service verifier"
        typer.echo(
            f"{room}: {counted(carry.get('carried', 0), 'artifact change')} carried, "
            f"{counted(carry.get('deleted', 0), 'deletion')}, {counted(carry.get('left_out', 0), 'change')} "
            "left out "
            "(evidence only); artifacts: " + ", ".join(carry.get("roots", []))
        )
    for d in carry.get("dropped", []):
        typer.echo(f"    dropped {d['path']}: {d['why']}")
    if carry.get("workdir_replaced"):
        typer.echo(f"    workdir replaced: {carry['workdir_replaced']}")
    capture = carry.get("capture") or {}
    if capture.get("unread") or capture.get("truncated"):
        typer.echo(
            f"capture: {counted(capture.get('unread', 0), 'file')} listed with their size only (over the "
            "capture's "
            "limits)" + (f"; listing cut short: {capture['truncated']}" if capture.get("truncated") else "")
        )
    for k in carry.get("kept", []):
        where = "service" if info["verify_mode"] == "service" else "in place"
        typer.echo(f"{where}: kept pid {k['pid']} listening on :{k['port']} ({k['cmd'][:60]})")
    if not info["guard"]["gate"]:
        verdict = (
            f"evidence only ({counted(sum(not f['allowed'] for f in info['guard']['findings']), 'finding')})"
        )
    else:
        verdict = "tripped" if info["guard"]["tripped"] else "clean"
    typer.echo(
        f"guard {verdict}; {counted(len(info['changes']), 'change')}, {info['archived_bytes']} B archived "
        f"(cap {info['cap_bytes']} B, {info['over_cap']} over), captured in {info['capture_s'] * 1000:.0f} ms"
    )
