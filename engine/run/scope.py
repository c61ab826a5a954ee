"""What a new rollout batch would run: the task versions in scope, with the audit-rejected ones set apart.

Why: the Runs screen confirms a batch before anything starts (model, tasks, k, where). A task the audit
rejected (its oracle fails, doing nothing passes, a cheat passes...) gives no valid signal about the
policy and is never exported, so rolling a policy out on it spends containers on noise: it is left out
by default, named, and can be put back on purpose.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ...store import queries
from ...store.db import session
from ..core.workspace import Workspace

REJECTED = "rejected"


@dataclass
class BatchScope:
    """The latest versions in scope: ``run`` (version id, task name) and ``rejected`` (task names left
    out because their latest audit rejected them; run only with ``include_rejected``)."""

    run: list[tuple[int, str]] = field(default_factory=list)
    rejected: list[tuple[int, str]] = field(default_factory=list)
    unaudited: list[str] = field(default_factory=list)  # in ``run``: never audited (a risk, not a bar)

    @property
    def version_ids(self) -> list[int]:
        return [vid for vid, _ in self.run]


def batch_scope(
    ws: Workspace, version_ids: Sequence[int] | None = None, *, include_rejected: bool = False
) -> BatchScope:
    """The tasks a batch over ``version_ids`` (None: every task's latest version) would run."""
    wanted = None if version_ids is None else set(version_ids)
    with session(ws.engine) as s:
        rows = queries.task_rows(s)
    out = BatchScope()
    for r in rows:
        if wanted is not None and r.version_id not in wanted:
            continue
        if r.audit == REJECTED and not include_rejected:
            out.rejected.append((r.version_id, r.name))
            continue
        out.run.append((r.version_id, r.name))
        if not r.audit:
            out.unaudited.append(r.name)
    return out
