"""Which episodes a review run reads, failure clusters to sample from, and a cluster's summary.

Clusters are the diagnosis's failure clusters (engine/review/clusters.py: task version + outcome + the
normalised failing checks, or the diagnosis code + the normalised last error line), named by the same
short id as in ``bandpass clusters`` and the tag queue's cluster view, so "cluster X" means the same
episodes everywhere. Reviewing every member of a 40-episode cluster would cost 40 reviews to learn one
thing, so ``--cluster`` reviews an evenly spread sample and summarises what the reviews agree on. Like the
tag queue, the audit's own probes are left out unless asked.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Sequence
from typing import Any

from ...store.db import session
from ...store.models import pk
from ...store.queries import reviews as rq
from ..core.errors import BandpassError
from ..core.workspace import Workspace
from .clusters import load_clusters
from .review_validation import review_code
from .signatures import Cluster, matches
from .tagging import load_queue


def failure_clusters(
    ws: Workspace, *, task: str | None = None, include_probes: bool = False
) -> list[Cluster]:
    """Clusters of finished episodes that did not pass, largest first (``bandpass clusters``'s)."""
    return load_clusters(ws, task=task, include_probes=include_probes)


def find_cluster(ws: Workspace, key: str, *, include_probes: bool = False) -> Cluster | None:
    """The cluster a cluster id or full signature names, with the members ``bandpass clusters`` lists
    for it (probes left out); a cluster only probes are in is found with them."""
    for probes in (include_probes, True):
        found = next((c for c in load_clusters(ws, include_probes=probes) if matches(c.signature, key)), None)
        if found is not None or probes:
            return found
    return None


def spread_sample(ids: Sequence[int], n: int) -> list[int]:
    """``n`` members evenly spread over the cluster (first and last included): deterministic, and not
    just the oldest ones, which often share one batch's conditions."""
    if n >= len(ids):
        return list(ids)
    if n <= 1:
        return [ids[0]] if n == 1 else []
    return [ids[round(i * (len(ids) - 1) / (n - 1))] for i in range(n)]


class ScopeError(BandpassError, ValueError):
    pass


def select_episodes(
    ws: Workspace,
    episode_ids: Sequence[int] = (),
    *,
    task: str | None = None,
    pending: bool = False,
    cluster: str | None = None,
    sample: int = 5,
) -> list[int]:
    """The episodes named (explicit ids, ``task``, the tag queue's pending ones, a cluster's sample),
    unioned in that order; every one must exist and be finished."""
    chosen: list[int] = []
    with session(ws.engine) as s:
        finished = {pk(r.episode): r for r in rq.finished_episodes(s)}
        s.expunge_all()
    for e in episode_ids:
        if e not in finished:
            raise ScopeError(f"episode {e} does not exist or has not finished")
        chosen.append(e)
    if task is not None:
        ids = [e for e, r in finished.items() if r.task == task]
        if not ids:
            raise ScopeError(f"task {task!r} has no finished episodes")
        chosen.extend(ids)
    if pending:
        chosen.extend(i.episode_id for i in load_queue(ws, states={"pending"}))
    if cluster is not None:
        found = find_cluster(ws, cluster)
        if found is None:
            raise ScopeError(f"no failure cluster {cluster!r} (bandpass clusters lists them)")
        chosen.extend(spread_sample(found.episode_ids, sample))
    return list(dict.fromkeys(chosen))


def cluster_summary(ws: Workspace, cluster_id: str) -> dict[str, Any]:
    """What the reviews of a cluster's members say together: how many agree on which code and verdict,
    the dropped evidence, and the explanation of the best-supported review of the majority code."""
    found = find_cluster(ws, cluster_id)
    if found is None:
        raise ScopeError(f"no failure cluster {cluster_id!r}")
    members = set(found.episode_ids)
    with session(ws.engine) as s:
        reviews = [r for r in rq.all_reviews(s) if r.episode_id in members]
        s.expunge_all()
    latest = {r.episode_id: r for r in reviews if r.status == "ok"}
    codes = Counter((review_code(r) or "none") for r in latest.values())
    verdicts = Counter(r.verdict for r in latest.values())
    majority, votes = codes.most_common(1)[0] if codes else ("", 0)
    best = max(
        (r for r in latest.values() if (review_code(r) or "none") == majority),
        key=lambda r: len(json.loads(r.citations_json or "[]")),
        default=None,
    )
    return {
        **found.as_dict(),
        "episode_ids": found.episode_ids,
        "reviewed": len(latest),
        "not_ok": sum(1 for r in reviews if r.status != "ok"),
        "codes": dict(codes.most_common()),
        "verdicts": dict(verdicts.most_common()),
        "majority": majority,
        "majority_share": round(votes / len(latest), 3) if latest else None,
        "representative_review": best.id if best else None,
        "representative_episode": best.episode_id if best else None,
        "explanation": best.explanation if best else "",
        "dropped": sum(len(json.loads(r.dropped_json or "[]")) for r in latest.values()),
    }
