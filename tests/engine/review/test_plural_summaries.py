"""Diagnosis summaries write their counts as words a curator reads, never a ``(s)`` template.

Why: issue 42 — the demo's Episodes and Tag queue showed "1 tamper-guard finding(s)" and "1 check(s)
failed". The demo's episodes are diagnosed again and every summary is checked (what a sample recorded
when it ran is quoted as it was).
"""

from __future__ import annotations

from bandpass.engine.core.plural import counted
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.diagnoser import diagnose_one
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk


def test_counted_is_singular_only_for_one() -> None:
    assert [counted(n, "check") for n in (0, 1, 2)] == ["0 checks", "1 check", "2 checks"]
    assert counted(2, "batch", "batches") == "2 batches"


def test_the_demo_s_diagnoses_have_no_plural_templates(demo: Workspace) -> None:
    with session(demo.engine) as s:
        # what the sandbox recorded when the sample ran is data, quoted as it was: not checked here
        recorded = {pk(e): e.error or "" for e in q.episodes(s) if e.status == "done"}
    diagnoses = [d for d in (diagnose_one(demo, i) for i in recorded) if d is not None]
    summaries = [d.summary for d in diagnoses]
    assert len(summaries) > 30
    assert [d.summary for d in diagnoses if "(s)" in d.summary.replace(recorded[d.episode_id], "")] == []
    assert any(x.startswith("1 check failed: ") for x in summaries), summaries
    assert any("1 tamper-guard finding" in x and "finding(s)" not in x for x in summaries), summaries
