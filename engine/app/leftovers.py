"""What Bandpass left on Docker engines: the reaper's reports (each command that reaches the engine reaps
the containers whose owner process is gone), and ``bandpass gc``'s removals — by workspace, by batch, on
this machine or on every node of a Ray cluster.

Light on purpose: the CLI sets the reaper's reporter for every command, ``bandpass episodes`` included, so
this module loads no Docker client; what needs one imports it when called.
"""

from __future__ import annotations

from typing import Any

from ..sandbox.leftovers import (
    containers_by_workspace,
    live_batches,
    remove,
    set_reporter,
    stale,
)

__all__ = [
    "clean_cluster",
    "clean_node",
    "containers_by_workspace",
    "live_batches",
    "remove",
    "set_reporter",
    "stale",
]


def clean_node(workspace: str, batch: str | None = None, *, dry_run: bool = False) -> dict[str, Any]:
    """Removes this machine's containers and scratch folders of ``workspace`` (and ``batch``);
    ``dry_run`` only counts them: ``{"containers", "dirs", ...}``."""
    from ..run.executors import node_cleanup

    return node_cleanup.clean_node(workspace, batch, dry_run=dry_run)


def clean_cluster(address: str, workspace: str, batch: str | None = None) -> list[dict[str, Any]]:
    """:func:`clean_node` on every live node of the Ray cluster at ``address``, one report per node.
    Raises ``ExecutorError`` when the cluster does not answer."""
    from ..run.executors import node_cleanup
    from ..run.executors.ray_executor import RayExecutor

    ex = RayExecutor(address=address)
    ex.connect()
    try:
        return node_cleanup.clean_cluster(ex._ray, workspace, batch)
    finally:
        ex.close()
