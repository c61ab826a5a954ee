"""Where episodes run: ``local`` (a thread pool on this Docker engine) or ``ray`` (tasks on a Ray
cluster, one Docker engine per node). See ``base`` for the contract."""

from __future__ import annotations

from typing import Any

from .base import EpisodeJob, Executor, ExecutorError, JobResult, RunContext
from .local import LocalExecutor

EXECUTORS = ("local", "ray")


def make_executor(name: str, *, concurrency: int | None = None, **options: Any) -> Executor:
    """The executor the CLI's ``--executor`` names; Ray is imported only when asked for (optional extra)."""
    if name == "local":
        return LocalExecutor(concurrency)
    if name == "ray":
        from .ray_executor import RayExecutor

        return RayExecutor(concurrency, **options)
    raise ExecutorError(f"unknown executor {name!r} (executors: {', '.join(EXECUTORS)})")


__all__ = [
    "EXECUTORS",
    "EpisodeJob",
    "Executor",
    "ExecutorError",
    "JobResult",
    "LocalExecutor",
    "RunContext",
    "make_executor",
]
