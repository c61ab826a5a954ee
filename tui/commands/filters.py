"""Unknown ids are errors everywhere: one place that checks what a filter names exists.

Why: ``queue --cluster deadbeef`` printed "the queue is empty" and exited 0 while ``reviews --cluster
deadbeef`` said there is no such cluster; ``episodes --task nosuch`` said "no episodes match". An empty
answer to a typo reads as a fact about the data. Every list command checks its filters here first and
fails in one line naming what exists.
"""

from __future__ import annotations

from typing import Any

from ..cli import fail

#: Outcome kinds a filter may name besides a full outcome.
KINDS = ("passed", "failed", "agent_error", "infra_error")
#: How many known values an error lists before "…".
SHOWN = 12


def _listing(values: list[str]) -> str:
    more = f", … ({len(values)} in all)" if len(values) > SHOWN else ""
    return ", ".join(values[:SHOWN]) + more


def check_filters(
    ws: Any,
    *,
    task: str | None = None,
    agent: str | None = None,
    model: str | None = None,
    batch: str | None = None,
    outcome: str | None = None,
    cluster: str | None = None,
    probes: bool = True,
) -> None:
    """Raises ``fail`` (exit 1) for a task, agent, model (a policy run's agent), batch, outcome or cluster
    that does not exist, naming what does."""
    from ...engine.app import reads
    from ...engine.core import outcomes as oc

    problem = reads.filter_problem(ws, task=task, agent=agent, batch=batch)
    if problem is not None:
        which, known = problem
        if which == "task":
            raise fail(f"--task {task}: no such task" + (f" (tasks: {_listing(known)})" if known else ""))
        if which == "agent":
            hint = f" (agents with episodes: {_listing(known)})" if known else " (no episodes yet)"
            raise fail(f"--agent {agent}: no episodes of this agent{hint}")
        hint = f" (batches: {_listing(known)})" if known else " (no batches yet)"
        raise fail(f"--batch {batch}: no such batch{hint}")
    if model is not None:
        found = reads.filter_problem(ws, agent=model)
        if found is not None:
            known = [a for a in found[1] if ":" not in a]
            hint = f" (models and agents with episodes: {_listing(known)})" if known else " (no episodes yet)"
            raise fail(f"--model {model}: no episodes of this model{hint}")
    if outcome is not None and outcome not in KINDS and not outcome.endswith(":"):
        try:
            oc.Outcome.parse(outcome)
        except ValueError:
            raise fail(
                f"--outcome {outcome}: not an outcome (expected {', '.join(KINDS)} or a full outcome such "
                "as agent_error:turn_limit)"
            ) from None
    if cluster is not None:
        from ...engine.app.diagnosis import unknown_cluster

        known_ids = unknown_cluster(ws, cluster, include_probes=probes)  # listed as `bandpass clusters`
        if known_ids is not None:
            hint = f" (clusters: {_listing(known_ids)})" if known_ids else " (no failures yet)"
            raise fail(f"--cluster {cluster}: no failure cluster with this id or signature{hint}")
