"""Failure clusters over the store: the tag queue's cluster view and ``bandpass clusters``.

Episodes with no diagnosis yet are diagnosed first (once), so a cluster never hides a failure.
"""

from __future__ import annotations

from ...store.db import session
from ...store.queries import diagnoses as dq
from ..core.outcomes import suggested_tag
from ..core.workspace import Workspace
from .diagnosis import is_probe
from .signatures import Cluster, ClusterMember, clusters


def load_clusters(ws: Workspace, *, task: str | None = None, include_probes: bool = False) -> list[Cluster]:
    with session(ws.engine) as s:
        rows = dq.failure_rows(s, task=task)
    missing = [r.episode_id for r in rows if not r.signature]
    if missing:
        from .diagnoser import diagnose_episodes

        diagnose_episodes(ws, missing)
        with session(ws.engine) as s:
            rows = dq.failure_rows(s, task=task)
    return clusters(
        (
            r.signature,
            ClusterMember(
                r.episode_id,
                r.task,
                r.agent,
                r.batch_id,
                r.outcome,
                r.code,
                r.confidence,
                r.summary,
                suggestion=r.tag or suggested_tag(r.outcome),
                reward=r.reward,
            ),
        )
        for r in rows
        if include_probes or not is_probe(r.agent, r.batch_id)
    )
