"""Every read and write of the database, as functions. No SQL lives outside ``store/``.

Functions take an open ``Session`` (or, for the listings a command must start fast, a plain sqlite3
connection) so callers choose the transaction boundary (an import of 500 tasks is one transaction; a
rollout worker commits per episode so a crash loses at most the episode in flight).

One module per aggregate: tasks, audits, episodes, batches and their queue (batch_queue), tags (and the
tagging queue), calibration reads, exports, generations, bulk inserts, diagnoses (and the episode
browser), reviews (Claude's suggestions), search (the full-text index), endstate (end states, phase
timings, regrade links), ledger (band decisions) and task_steps (the steps of multi-step episodes). The
first ones' public names are re-exported here, so callers write ``from bandpass.store import queries;
queries.x(...)`` or ``from bandpass.store.queries import x`` whichever module holds it; the last six are
used as modules (``from bandpass.store.queries import diagnoses as dq``), their names being their own
(``finished_episodes`` means one thing in reviews and another in endstate).

Nothing is imported until it is used (PEP 562 ``__getattr__``): ``bandpass episodes`` lists through
``queries.diagnoses`` on plain sqlite3 and must not pay for the ORM the other modules load. Two names are
both a module and the function callers mean (``episodes``, ``batches``): the package keeps the function
whichever is imported first (``_Package.__setattr__``).
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # what the names below are, for the type checker; at run time each loads on first use
    # The models, as the single module used to expose them (callers write ``queries.Task``).
    from ..models import (
        Audit,
        Batch,
        Episode,
        Export,
        FailureTag,
        Generation,
        ImageBuild,
        ProbeCache,
        ReviewState,
        Step,
        Task,
        TaskVersion,
        utcnow,
    )
    from .audits import (
        audits_for_version,
        image_builds,
        latest_audit,
        probe_cache,
        put_probe_cache,
        record_audit,
        record_image_build,
    )
    from .batch_queue import (
        claim_next_episode,
        finished_outcomes,
        latest_unfinished_batch_id,
        requeue_episodes,
        requeue_for_retry,
        requeue_stale,
    )
    from .batches import (
        BatchAttempts,
        BatchProgress,
        FollowedEpisode,
        adaptive_open,
        adaptive_settings,
        batch_attempts,
        batch_progress,
        batch_status_counts,
        batches,
        create_batch,
        followed_episodes,
        get_batch,
        set_batch_adaptive,
        set_batch_executor,
    )
    from .bulk import (
        bulk_insert,
    )
    from .calibration import (
        CalibrationSource,
        TraceSource,
        agents_by_recency,
        calibration_sources,
        episode_agents,
        tag_counts,
        trace_sources,
    )
    from .episodes import (
        add_step,
        create_episode,
        delete_steps,
        episode_by_source,
        episode_created_at,
        episode_evidence,
        episode_rewards,
        episode_task_name,
        episodes,
        finish_episode,
        get_episode,
        mark_episode_running,
        set_episode_evidence,
        set_episode_rewards,
        steps,
        steps_after,
        task_names_for_episodes,
    )
    from .exports import (
        list_exports,
        record_export,
    )
    from .generations import (
        create_generation,
        generation_created_at,
        generation_yield,
        get_generation,
        last_failed_generation,
        list_generations,
        recent_generations,
        update_generation,
    )
    from .tags import (
        ReviewRow,
        TagRow,
        active_tag_count,
        add_tag,
        clear_tag,
        delete_tag,
        get_tag,
        review_rows,
        review_state,
        set_review_state,
        tag_rows,
        tags_for_episode,
    )
    from .tasks import (
        InstructionRow,
        TaskRow,
        add_task_version,
        get_or_create_task,
        get_task,
        get_version,
        latest_instructions,
        latest_version,
        resolve_version,
        set_version_aliases,
        task_by_id,
        task_name_of_version,
        task_rows,
        version_by_hash,
        versions_of_task,
    )

#: module -> the names it gives this package (kept equal to the imports above: tests/store/test_store.py)
_EXPORTS: dict[str, tuple[str, ...]] = {
    "bandpass.store.models": (
        "Audit",
        "Batch",
        "Episode",
        "Export",
        "FailureTag",
        "Generation",
        "ImageBuild",
        "ProbeCache",
        "ReviewState",
        "Step",
        "Task",
        "TaskVersion",
        "utcnow",
    ),
    "bandpass.store.queries.audits": (
        "audits_for_version",
        "image_builds",
        "latest_audit",
        "probe_cache",
        "put_probe_cache",
        "record_audit",
        "record_image_build",
    ),
    "bandpass.store.queries.batch_queue": (
        "claim_next_episode",
        "finished_outcomes",
        "latest_unfinished_batch_id",
        "requeue_episodes",
        "requeue_for_retry",
        "requeue_stale",
    ),
    "bandpass.store.queries.batches": (
        "BatchAttempts",
        "BatchProgress",
        "FollowedEpisode",
        "adaptive_open",
        "adaptive_settings",
        "batch_attempts",
        "batch_progress",
        "batch_status_counts",
        "batches",
        "create_batch",
        "followed_episodes",
        "get_batch",
        "set_batch_adaptive",
        "set_batch_executor",
    ),
    "bandpass.store.queries.bulk": ("bulk_insert",),
    "bandpass.store.queries.calibration": (
        "CalibrationSource",
        "TraceSource",
        "agents_by_recency",
        "calibration_sources",
        "episode_agents",
        "tag_counts",
        "trace_sources",
    ),
    "bandpass.store.queries.episodes": (
        "add_step",
        "create_episode",
        "delete_steps",
        "episode_by_source",
        "episode_created_at",
        "episode_evidence",
        "episode_rewards",
        "episode_task_name",
        "episodes",
        "finish_episode",
        "get_episode",
        "mark_episode_running",
        "set_episode_evidence",
        "set_episode_rewards",
        "steps",
        "steps_after",
        "task_names_for_episodes",
    ),
    "bandpass.store.queries.exports": (
        "list_exports",
        "record_export",
    ),
    "bandpass.store.queries.generations": (
        "create_generation",
        "generation_created_at",
        "generation_yield",
        "get_generation",
        "last_failed_generation",
        "list_generations",
        "recent_generations",
        "update_generation",
    ),
    "bandpass.store.queries.tags": (
        "ReviewRow",
        "TagRow",
        "active_tag_count",
        "add_tag",
        "clear_tag",
        "delete_tag",
        "get_tag",
        "review_rows",
        "review_state",
        "set_review_state",
        "tag_rows",
        "tags_for_episode",
    ),
    "bandpass.store.queries.tasks": (
        "InstructionRow",
        "TaskRow",
        "add_task_version",
        "get_or_create_task",
        "get_task",
        "get_version",
        "latest_instructions",
        "latest_version",
        "resolve_version",
        "set_version_aliases",
        "task_by_id",
        "task_name_of_version",
        "task_rows",
        "version_by_hash",
        "versions_of_task",
    ),
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
#: Submodules whose name is also a function of theirs: the package attribute is the function.
_SAME_NAME = frozenset(name for name, module in _WHERE.items() if module == f"{__name__}.{name}")


class _Package(types.ModuleType):
    def __setattr__(self, name: str, value: Any) -> None:
        # Importing the submodule ``episodes`` binds it on its package; ``queries.episodes`` has always
        # been the function of that name, so that is what stays bound.
        if name in _SAME_NAME and isinstance(value, types.ModuleType):
            value = getattr(value, name)
        super().__setattr__(name, value)


sys.modules[__name__].__class__ = _Package

if not TYPE_CHECKING:  # the type checker reads the imports above; an unknown name stays an error for it

    def __getattr__(name: str) -> Any:
        module = _WHERE.get(name)
        if module is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module), name)
        globals()[name] = value
        return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_WHERE})


__all__ = [
    "Audit",
    "Batch",
    "BatchAttempts",
    "BatchProgress",
    "CalibrationSource",
    "Episode",
    "Export",
    "FailureTag",
    "FollowedEpisode",
    "Generation",
    "ImageBuild",
    "InstructionRow",
    "ProbeCache",
    "ReviewRow",
    "ReviewState",
    "Step",
    "TagRow",
    "Task",
    "TaskRow",
    "TaskVersion",
    "TraceSource",
    "active_tag_count",
    "adaptive_open",
    "adaptive_settings",
    "add_step",
    "add_tag",
    "add_task_version",
    "agents_by_recency",
    "audits_for_version",
    "batch_attempts",
    "batch_progress",
    "batch_status_counts",
    "batches",
    "bulk_insert",
    "calibration_sources",
    "claim_next_episode",
    "clear_tag",
    "create_batch",
    "create_episode",
    "create_generation",
    "delete_steps",
    "delete_tag",
    "episode_agents",
    "episode_by_source",
    "episode_created_at",
    "episode_evidence",
    "episode_rewards",
    "episode_task_name",
    "episodes",
    "finish_episode",
    "finished_outcomes",
    "followed_episodes",
    "generation_created_at",
    "generation_yield",
    "get_batch",
    "get_episode",
    "get_generation",
    "get_or_create_task",
    "get_tag",
    "get_task",
    "get_version",
    "image_builds",
    "last_failed_generation",
    "latest_audit",
    "latest_instructions",
    "latest_unfinished_batch_id",
    "latest_version",
    "list_exports",
    "list_generations",
    "mark_episode_running",
    "probe_cache",
    "put_probe_cache",
    "recent_generations",
    "record_audit",
    "record_export",
    "record_image_build",
    "requeue_episodes",
    "requeue_for_retry",
    "requeue_stale",
    "resolve_version",
    "review_rows",
    "review_state",
    "set_batch_adaptive",
    "set_batch_executor",
    "set_episode_evidence",
    "set_episode_rewards",
    "set_review_state",
    "set_version_aliases",
    "steps",
    "steps_after",
    "tag_counts",
    "tag_rows",
    "tags_for_episode",
    "task_by_id",
    "task_name_of_version",
    "task_names_for_episodes",
    "task_rows",
    "trace_sources",
    "update_generation",
    "utcnow",
    "version_by_hash",
    "versions_of_task",
]
