"""What happens after an episode ends and while a batch runs, wired from above: two small registries.

Why: the pipeline reads generate → audit → run → review, and the imports must read the same way. An
episode's diagnosis and the search index are review's work, yet they must happen as episodes finish, where
the runner is. So the runner publishes its moments here and knows nothing of who listens; the application
layer (``engine/app/episode_hooks.py``) wires review's diagnosis and indexer to them, once per process, for
every entry point (the CLI, the TUI, the sample recorder, the test suite).

Two moments:

* **an episode ended** (:func:`episode_ended`): its finished row, steps and end state are in the store, and
  nobody has heard yet that it ended — each hook runs synchronously, before ``EpisodeFinished`` is
  published, so whoever hears it can read what the hooks wrote (the diagnosis). It runs where the store
  is written: in ``run_episode`` for a local episode, on the head (``commit_result``) for a Ray one; a Ray
  worker's scratch workspace is thrown away, so nothing is wired there. A hook that fails is logged and
  skipped: an outcome is final whatever a hook does (``bandpass diagnose`` redoes a diagnosis).
* **a batch runs** (:func:`watching_batch`): a watcher is a context manager made from the workspace and
  the batch's bus, entered when the batch starts and left after its last episode (the search indexer
  follows ``EpisodeFinished`` in its own thread and drains at the end). One that fails to start or to
  stop is logged; the batch runs on.

Hooks are keyed by name, so wiring twice replaces instead of doubling.
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from ..core.events import EventBus
    from ..core.workspace import Workspace

log = logging.getLogger(__name__)

#: Called with the workspace and the episode id once the episode's finished row is stored.
EpisodeEndHook = Callable[["Workspace", int], None]
#: Made with the workspace and the batch's bus; entered for the batch's whole run.
BatchWatcher = Callable[["Workspace", "EventBus"], AbstractContextManager[object]]

_lock = threading.Lock()
_episode_end: dict[str, EpisodeEndHook] = {}
_batch: dict[str, BatchWatcher] = {}


def on_episode_end(name: str, hook: EpisodeEndHook) -> None:
    """Runs ``hook(ws, episode_id)`` after every episode of this process ends (replaces one of that name)."""
    with _lock:
        _episode_end[name] = hook


def on_batch(name: str, watcher: BatchWatcher) -> None:
    """Enters ``watcher(ws, bus)`` around every batch this process runs (replaces one of that name)."""
    with _lock:
        _batch[name] = watcher


def remove(name: str) -> None:
    """Unwires the hook or watcher of that name (nothing if there is none)."""
    with _lock:
        _episode_end.pop(name, None)
        _batch.pop(name, None)


def wired() -> tuple[list[str], list[str]]:
    """The names wired now: (episode-end hooks, batch watchers), in the order they run."""
    with _lock:
        return list(_episode_end), list(_batch)


def episode_ended(ws: Workspace, episode_id: int) -> None:
    """Runs every episode-end hook in the order they were wired. Never raises (module docstring)."""
    with _lock:
        hooks = list(_episode_end.items())
    for name, hook in hooks:
        try:
            hook(ws, episode_id)
        except Exception:  # an outcome is final whatever a hook does; the log says why
            log.exception("episode-end hook %r failed for episode %s", name, episode_id)


@contextlib.contextmanager
def watching_batch(ws: Workspace, bus: EventBus) -> Iterator[None]:
    """Every batch watcher entered for the body (in wiring order) and left after it, in reverse."""
    with _lock:
        watchers = list(_batch.items())
    entered: list[tuple[str, AbstractContextManager[object]]] = []
    for name, make in watchers:
        try:
            cm = make(ws, bus)
            cm.__enter__()
        except Exception:  # a watcher that cannot start costs only what it watches for
            log.exception("batch watcher %r did not start", name)
            continue
        entered.append((name, cm))
    try:
        yield
    finally:
        for name, cm in reversed(entered):
            try:
                cm.__exit__(None, None, None)
            except Exception:  # the batch's own result or error matters, not this
                log.exception("batch watcher %r did not stop cleanly", name)


__all__ = [
    "BatchWatcher",
    "EpisodeEndHook",
    "episode_ended",
    "on_batch",
    "on_episode_end",
    "remove",
    "watching_batch",
    "wired",
]
