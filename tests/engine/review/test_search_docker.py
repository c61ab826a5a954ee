"""A real rollout batch indexes its episodes as they finish: when ``run_planned`` returns, search finds
what the agent's and the verifier's terminals showed, with no build step. Real Docker."""

from __future__ import annotations

from pathlib import Path

import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.search import Filters, search
from bandpass.engine.review.transcript import TRANSCRIPT_VERSION
from bandpass.engine.run.rollouts import plan_batch, run_planned
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.queries import search as sq
from tests.support.taskfactory import make_task

FLOOD_SOLVE = """#!/bin/bash
seq 1 300 | sed 's/^/row /'
echo 42 > /app/answer.txt
"""
LOUD_TEST = """#!/bin/bash
mkdir -p /logs/verifier
echo "verifier says zebra-quartz-17"
if [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


@pytest.mark.docker
def test_a_batch_indexes_its_episodes_as_they_finish(workspace: Workspace, tmp_path: Path) -> None:
    ws = workspace
    task = make_task(tmp_path / "src", "flood", solve=FLOOD_SOLVE, test=LOUD_TEST)
    assert import_paths(ws, [task]).ok
    with session(ws.engine) as s:
        vids = [r.version_id for r in queries.task_rows(s)]
    bid = plan_batch(ws, "oracle", vids, 2, kind="builtin")
    summary = run_planned(ws, bid, concurrency=2)
    assert summary.outcomes == {"passed": 2}

    with session(ws.engine) as s:
        assert sq.pending_count(s, TRANSCRIPT_VERSION) == 0  # indexed by the batch itself
        ids = {e.id for e in queries.episodes(s, batch_id=bid)}
    scrolled = search(ws, '"row 150"')
    assert {e.episode_id for e in scrolled.episodes} == ids
    # 300 lines on a 40-row screen: row 150 scrolled away (inside one write or between two).
    assert all(h.terminal == "agent" and h.text == "row 150" for e in scrolled.episodes for h in e.hits)
    verifier = search(ws, '"zebra quartz 17"', filters=Filters(terminal="verifier"))
    assert {e.episode_id for e in verifier.episodes} == ids
    assert not search(ws, '"zebra quartz 17"', filters=Filters(terminal="agent")).episodes
