"""Why episodes failed, grouped: the deterministic diagnosis and the failure clusters that ``bandpass
diagnose``, ``clusters`` and ``queue --cluster``, the Tag queue's cluster view and the reviewer share.

Why here: a cluster is named by the same short id everywhere (``queue --cluster ID``, ``review --cluster
ID``, the queue's cluster view), so the front ends take the id, the signature's readable form and the
clusters themselves from one place instead of from the review stage's modules.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..review.clusters import load_clusters
from ..review.diagnoser import diagnose_episodes
from ..review.signatures import Cluster, cluster_id, matches
from ..review.signatures import describe as describe_signature

if TYPE_CHECKING:
    from ..core.workspace import Workspace

__all__ = [
    "Cluster",
    "cluster_id",
    "describe_signature",
    "diagnose_episodes",
    "load_clusters",
    "matches",
    "unknown_cluster",
]


def unknown_cluster(ws: Workspace, key: str, *, include_probes: bool = False) -> list[str] | None:
    """None when ``key`` (a cluster id or a full signature) names a failure cluster, a probes' one
    included; else the ids of the clusters there are as ``bandpass clusters`` lists them (with the audit's
    probes only when ``include_probes``), so an error's count agrees with it (empty: no failures yet)."""
    if any(matches(c.signature, key) for c in load_clusters(ws, include_probes=True)):
        return None
    return [c.id for c in load_clusters(ws, include_probes=include_probes)]
