"""Everything known about one episode, as one dict: ``bandpass show EP --json``, the Replay header and
the tag queue's detail all read it.

Why one function building one dict: several parts of Bandpass add evidence about an episode (end-state
changes, guard findings, container-death details); each adds one key here and every view shows it.
"""

from __future__ import annotations

import json
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.queries import diagnoses as dq
from ...store.queries import task_steps as task_steps_store
from ..core.errors import BandpassError
from ..core.outcomes import counted_reward, reward_label
from ..core.workspace import Workspace
from .diagnosis import is_probe
from .text import strip_controls

VERIFIER_TAIL_LINES = 60


class EpisodeNotFound(BandpassError, LookupError):
    pass


def _iso(v: Any) -> str | None:
    return v.isoformat() if v is not None else None


def tries_of(error: str) -> list[dict[str, Any]]:
    """The tries an episode took, from its error text (``try N: outcome: detail`` lines), then the last."""
    out = []
    for line in (error or "").splitlines():
        if line.startswith("try ") and ":" in line:
            head, _, rest = line.partition(":")
            try:
                n = int(head.split()[1])
            except (IndexError, ValueError):
                continue
            outcome, _, detail = rest.strip().partition(": ")
            out.append({"try": n, "outcome": outcome, "error": detail})
    return out


def _step_dict(st: Any) -> dict[str, Any]:
    try:
        action = json.loads(st.action_json or "{}")
    except ValueError:
        action = {}
    try:
        cuts = json.loads(st.cuts_json or "[]")
    except ValueError:
        cuts = []
    keys = [c.get("keystrokes", "") for c in action.get("commands", []) if isinstance(c, dict)] or (
        [action["keystrokes"]] if action.get("keystrokes") else []
    )
    return {
        "index": st.index,
        "time": round(st.marker_time or 0.0, 3),
        "keystrokes": keys,
        "analysis": action.get("analysis", ""),
        "plan": action.get("plan", ""),
        "task_complete": action.get("task_complete"),
        "results": action.get("results", []),
        "parse_error": action.get("parse_error"),
        "error": action.get("error"),
        "prompt_tokens": st.prompt_tokens,
        "completion_tokens": st.completion_tokens,
        "latency_s": round(st.latency_s or 0.0, 3),
        "cuts": cuts,
    }


def episode_record(ws: Workspace, episode_id: int, *, diagnose_if_missing: bool = True) -> dict[str, Any]:
    """The whole record of one episode. Raises EpisodeNotFound."""
    with session(ws.engine) as s:
        ep = queries.get_episode(s, episode_id)
        if ep is None:
            raise EpisodeNotFound(f"episode {episode_id} does not exist")
        version = queries.get_version(s, ep.task_version_id)
        task = queries.episode_task_name(s, episode_id)
        steps = queries.steps(s, episode_id)
        task_steps = task_steps_store.task_steps(s, episode_id)
        tags = queries.tags_for_episode(s, episode_id, include_cleared=True)
        diag = dq.get_diagnosis(s, episode_id)
        audit = queries.latest_audit(s, ep.task_version_id)
    if diag is None and diagnose_if_missing and ep.status == "done":
        from .diagnoser import diagnose_one

        diagnose_one(ws, episode_id)
        with session(ws.engine) as s:
            diag = dq.get_diagnosis(s, episode_id)
    duration = (ep.ended_at - ep.started_at).total_seconds() if ep.ended_at and ep.started_at else None
    casts = {}
    for name, rel in (("agent", ep.agent_cast), ("verifier", ep.verifier_cast)):
        if rel:
            casts[name] = {"path": rel, "exists": ws.abs(rel).is_file()}
    out_lines = strip_controls(ep.verifier_output or "").splitlines()
    record: dict[str, Any] = {
        "episode": episode_id,
        "task": task,
        "version": version.hash if version else "",
        "agent": ep.agent,
        "batch": ep.batch_id,
        "attempt": ep.attempt,
        "probe": is_probe(ep.agent, ep.batch_id),
        "status": ep.status,
        "outcome": ep.outcome,
        # the reward it counts for (engine.core.outcomes.counted_reward); the verifier's own, evidence
        "reward": counted_reward(ep.outcome, ep.reward),
        "verifier_reward": ep.reward,
        # every key of the verifier's reward.json (Harbor's rewards), and how the reward was read
        "rewards": queries.episode_rewards(ep),
        "verifier": _json_dict(ep.verifier_json),
        "detail": strip_controls(ep.error or ""),
        "retries": ep.retries,
        "tries": tries_of(strip_controls(ep.error or "")),
        "node": {"id": ep.node_id, "address": ep.node_address} if ep.node_id else None,  # a Ray node
        "timings": {
            "created_at": _iso(ep.created_at),
            "started_at": _iso(ep.started_at),
            "ended_at": _iso(ep.ended_at),
            "duration_s": round(duration, 3) if duration is not None else None,
        },
        "steps": [_step_dict(st) for st in steps],
        # a multi-step task's steps ([[steps]]), each with its own verifier's result (store/task_steps.py)
        "task_steps": [
            {
                "position": t.position,
                "name": t.name,
                "outcome": t.outcome,
                "reward": t.reward,
                "rewards": json.loads(t.rewards_json or "{}"),
                "counted": t.counted,
                "detail": strip_controls(t.detail),
                "time": round(t.marker_time, 3),
                "verify_mode": t.verify_mode,
                "verifier_cast": t.verifier_cast,
            }
            for t in task_steps
        ],
        "failing_checks": json.loads(diag.checks_json) if diag else [],
        "diagnosis": (
            {
                "code": diag.code,
                "tag": diag.tag or None,
                "confidence": round(diag.confidence, 2),
                "summary": diag.summary,
                "evidence": json.loads(diag.evidence_json),
                "signature": diag.signature,
                "rules_version": diag.rules_version,
            }
            if diag
            else None
        ),
        "tags": [
            {
                "id": t.id,
                "tag": f"{t.tag_class}.{t.subclass}",
                "note": t.note,
                "author": t.author,
                "blocking": t.blocking,
                "cleared": t.cleared,
                "created_at": _iso(t.created_at),
            }
            for t in tags
        ],
        "casts": casts,
        "verifier_output_tail": "\n".join(out_lines[-VERIFIER_TAIL_LINES:]),
        "audit": (
            {"verdict": audit.verdict, "reasons": json.loads(audit.reasons_json or "[]")} if audit else None
        ),
    }
    return record


def _json_dict(text: str) -> dict[str, Any]:
    try:
        data = json.loads(text or "{}")
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def rewards_line(record: dict[str, Any]) -> str:
    """The reward's components in one line, when there is more than the one scalar: ``rewards:
    correctness=1 performance=0.5 · scored by reward.json "correctness" (the declared primary reward)``."""
    comps = record.get("rewards") or {}
    if not comps or list(comps) == ["reward"]:
        return ""
    reading = (record.get("verifier") or {}).get("reading") or {}
    how = f" · scored by {reading['source']}" if reading.get("source") else ""
    if reading.get("unscored"):
        how = " · no score: " + str(reading.get("problem") or "")[:160]
    return "rewards: " + " ".join(f"{k}={v:g}" for k, v in comps.items()) + how


def verifier_line(record: dict[str, Any]) -> str:
    """What the verifier's observer saw, in one line (``bandpass show``): test.sh's exit status, the pytest
    sessions, the processes alive when test.sh exited (engine/run/observer.py)."""
    ev = record.get("verifier") or {}
    obs = ev.get("observer")
    if not obs:
        return ""
    parts = [
        f"test.sh exit {obs.get('exit_status')}" + (" (stopped by a signal)" if obs.get("stopped") else "")
    ]
    for sess in obs.get("pytest_sessions") or []:
        state = "finished" if sess.get("finished") else "never finished"
        parts.append(
            f"pytest pid {sess.get('pid')}: {sess.get('started_tests', 0)} of {sess.get('collected')} tests "
            f"started, {state}" + (f" (status {sess['status']})" if sess.get("status") is not None else "")
        )
    alive = obs.get("alive") or []
    if alive:
        shown = "; ".join(
            f"{a['pid']} {'new' if a.get('new') else 'old'} {a.get('cmd', '')[:60]}" for a in alive[:3]
        )
        parts.append(f"alive at its exit: {shown}" + (f" … {len(alive) - 3} more" if len(alive) > 3 else ""))
    if obs.get("late_writes"):
        parts.append("written after its exit: " + ", ".join(obs["late_writes"]))
    return "verifier: " + " · ".join(parts)


def why_lines(record: dict[str, Any], *, checks: int = 5, evidence: int = 4) -> list[str]:
    """Why the episode ended, in a few plain lines (Replay header, tag queue detail, ``show``)."""
    lines = []
    label = reward_label(record.get("outcome") or "", record.get("verifier_reward", record.get("reward")))
    reward = f" · reward {label}" if label != "—" else ""
    retries = (
        f" · {record['retries']} retr{'y' if record['retries'] == 1 else 'ies'}"
        if record.get("retries")
        else ""
    )
    lines.append(f"outcome {record['outcome'] or record['status']}{reward}{retries}")
    if comps := rewards_line(record):
        lines.append(comps)
    for t in record.get("tries", []):
        lines.append(f"  try {t['try']}: {t['outcome']}: {t['error']}")
    detail = [
        ln for ln in (record.get("detail") or "").splitlines() if ln.strip() and not ln.startswith("try ")
    ]
    if detail:
        lines.append("detail: " + detail[-1])
    fc = record.get("failing_checks") or []
    if fc:
        lines.append(f"failing checks ({len(fc)}):")
        for c in fc[:checks]:
            msg = f" — {c['message']}" if c.get("message") else ""
            lines.append(f"  {c['name']}{msg}"[:200])
    d = record.get("diagnosis")
    if d:
        tag = f" → suggests {d['tag']}" if d.get("tag") else ""
        lines.append(f"diagnosis {d['code']} ({d['confidence']:.0%}){tag}: {d['summary']}")
        for e in d.get("evidence", [])[:evidence]:
            where = (
                f"[step {e['step']} @ {e['time']:.1f}s] "
                if e.get("step") is not None and e.get("time") is not None
                else ""
            )
            lines.append(f"  {where}{e['what']}")
    return lines
