"""What follows an episode's end, wired once per process: its diagnosis, and the search index of a batch.

Why here: the runner (``engine/run``) sits below review in the pipeline, so it cannot call review's
diagnoser or indexer itself; it publishes its moments (``engine/run/hooks.py``) and this module — the
application layer, above both — says what listens. :func:`install` is called by every entry point that
runs episodes: the ``bandpass`` command (``tui/cli.py``, which also opens the TUI), the TUI app itself,
``scripts/record_samples.py``, the benchmarks that run episodes and the test suite (``tests/conftest.py``).
Whatever they run — a batch, an audit's probes, a regrade, a calibration round, a Ray batch (its episodes
end on the head) — then ends the same way:

* ``diagnosis``: the deterministic diagnosis (``engine/review/diagnoser.py``) is stored as the episode
  ends, before ``EpisodeFinished`` is published, so a screen that hears it finds the diagnosis;
* ``search-index``: a ``BackgroundIndexer`` follows the batch's bus, so search finds each episode as soon
  as it finishes; the batch drains it before it returns.

Review is imported only when an episode ends or a batch starts: installing costs a command nothing.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import TYPE_CHECKING

from ..run import hooks

if TYPE_CHECKING:
    from ..core.events import EventBus
    from ..core.workspace import Workspace

DIAGNOSIS = "diagnosis"
SEARCH_INDEX = "search-index"


def diagnose(ws: Workspace, episode_id: int) -> None:
    """Stores why the episode ended (never raises: ``diagnoser.after_episode`` logs a failure)."""
    from ..review.diagnoser import after_episode

    after_episode(ws, episode_id)


@contextlib.contextmanager
def index_batch(ws: Workspace, bus: EventBus) -> Iterator[None]:
    """Indexes the batch's episodes for search as they finish; what it has not indexed when the batch
    ends (bounded wait), the next search does."""
    from ..review.search_index import BackgroundIndexer

    indexer = BackgroundIndexer(ws, bus)
    try:
        yield
    finally:
        indexer.close()


def install() -> None:
    """Wires the diagnosis and the search index to every episode and batch this process runs. Safe to
    call again (hooks are keyed by name)."""
    hooks.on_episode_end(DIAGNOSIS, diagnose)
    hooks.on_batch(SEARCH_INDEX, index_batch)


__all__ = ["DIAGNOSIS", "SEARCH_INDEX", "diagnose", "index_batch", "install"]
