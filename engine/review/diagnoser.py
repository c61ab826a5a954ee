"""Running the diagnosis over stored episodes and keeping the result (``diagnosis`` table).

Two entry points: ``after_episode`` (run as each episode finishes, before ``EpisodeFinished`` is heard:
``engine/app/episode_hooks.py`` wires it to the runner's end-of-episode hook; a diagnosis problem must
never change an outcome, so it only logs) and ``diagnose_episodes`` (``bandpass diagnose``,
bulk: 10,000 episodes in a few seconds — chunked reads, one write per chunk).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ...store.db import session
from ...store.queries import diagnoses as dq
from ..core.workspace import Workspace
from ..run.verifier_reports import load_reports
from .checks import check_names
from .diagnosis import Diagnosis, EpisodeFacts, StepFacts, TaskStepFacts, diagnose
from .signatures import signature

log = logging.getLogger(__name__)


def _steps(rows: Sequence[tuple[Any, ...]]) -> list[StepFacts]:
    out = []
    for index, marker_time, action_json, observation, cuts_json, raw_reply in rows:
        try:
            action = json.loads(action_json or "{}")
        except ValueError:
            action = {}
        try:
            cuts = json.loads(cuts_json or "[]")
        except ValueError:
            cuts = []
        out.append(
            StepFacts(
                int(index),
                float(marker_time or 0.0),
                action if isinstance(action, dict) else {},
                observation or "",
                cuts if isinstance(cuts, list) else [],
                raw_reply or "",
            )
        )
    return out


def _json_list(text: str | None) -> list[dict[str, Any]]:
    try:
        v = json.loads(text or "[]")
    except ValueError:
        return []
    return [x for x in v if isinstance(x, dict)] if isinstance(v, list) else []


def _task_steps(rows: Sequence[tuple[Any, ...]]) -> list[TaskStepFacts]:
    return [
        TaskStepFacts(
            int(pos),
            str(name),
            str(outcome),
            reward,
            float(marker or 0.0),
            out or "",
            bool(counted),
            detail or "",
        )
        for pos, name, outcome, reward, marker, out, counted, detail in rows
    ]


def facts_of(ws: Workspace, row: dq.DiagnosisInput) -> EpisodeFacts:
    reports: dict[str, bytes] = {}
    if row.verifier_cast or row.agent_cast:
        rec_dir = Path(ws.abs(row.verifier_cast or row.agent_cast)).parent
        reports = load_reports(rec_dir)
    return EpisodeFacts(
        episode_id=row.episode_id,
        agent=row.agent,
        outcome=row.outcome,
        reward=row.reward,
        error=row.error or "",
        verifier_output=row.verifier_output or "",
        instruction=row.instruction or "",
        batch_id=row.batch_id or "",
        steps=_steps(row.steps),
        reports=reports,
        # None, not []: "no end state was captured" (the rules fall back on keystrokes) differs from
        # "captured, and the policy changed nothing"
        changes=_json_list(row.changes_json) if row.changes_json is not None else None,
        guard_findings=_json_list(row.findings_json),
        task_steps=_task_steps(row.task_steps),
    )


def _row(d: Diagnosis, version_hash: str, outcome: str) -> dq.DiagnosisRow:
    return {
        "episode_id": d.episode_id,
        "code": d.code,
        "tag": d.tag or "",
        "confidence": d.confidence,
        "summary": d.summary,
        "evidence_json": json.dumps([e.as_dict() for e in d.evidence]),
        "checks_json": json.dumps([c.as_dict() for c in d.checks]),
        "signature": signature(version_hash, outcome, check_names(d.checks), d.code, d.last_error),
        "rules_version": d.rules_version,
    }


def diagnose_episodes(
    ws: Workspace, episode_ids: Sequence[int] | None = None, *, missing_only: bool = False
) -> int:
    """Diagnoses (again) the given finished episodes, or all of them; returns how many were written."""
    from .diagnosis import RULES_VERSION

    with session(ws.engine) as s:
        ids = (
            list(episode_ids)
            if episode_ids is not None
            else dq.finished_episode_ids(s, missing_only=missing_only, rules_version=RULES_VERSION)
        )
    written = 0
    chunk = 500
    for i in range(0, len(ids), chunk):
        with session(ws.engine) as s:
            rows = []
            for inp in dq.diagnosis_inputs(s, ids[i : i + chunk], chunk=chunk):
                d = diagnose(facts_of(ws, inp))
                rows.append(_row(d, inp.version_hash, inp.outcome))
            written += dq.save_diagnoses(s, rows)
    return written


def diagnose_one(ws: Workspace, episode_id: int) -> Diagnosis | None:
    """Diagnoses one episode, stores it, and returns it (None: no such finished episode)."""
    with session(ws.engine) as s:
        inputs = list(dq.diagnosis_inputs(s, [episode_id]))
        if not inputs:
            return None
        d = diagnose(facts_of(ws, inputs[0]))
        dq.save_diagnoses(s, [_row(d, inputs[0].version_hash, inputs[0].outcome)])
    return d


def after_episode(ws: Workspace, episode_id: int) -> None:
    """The end-of-episode hook (engine/app/episode_hooks.py): diagnose as the episode finishes. Never
    raises (an outcome is final whatever the diagnosis does; ``bandpass diagnose`` can redo it)."""
    try:
        diagnose_one(ws, episode_id)
    except Exception:
        log.exception("diagnosis of episode %s failed", episode_id)
