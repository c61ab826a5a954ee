"""Generation → audit as a pipeline: each task the generator accepts enters an audit run at once.

A generation batch spends most of its time waiting on the model; its accepted tasks used to wait for the
whole batch to end before ``bandpass audit`` started. ``audit_alongside`` opens an audit run and audits it
in a background thread while the caller produces versions: ``feed.put(version_id)`` queues one (a row in
the store, so a killed pipeline's audits resume like any run's: ``bandpass audit --resume RUN``), a free
slot claims it within a fraction of a second, and the run ends once the producer is done (``close``) and
the queue is empty.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

from ..core.events import EventBus
from ..core.workspace import Workspace
from .corpus import AuditRunSummary, plan_audits, queue_versions, run_audits
from .executors import AuditExecutor

__all__ = ["AuditFeed", "audit_alongside"]


class AuditFeed:
    """What a producer hands versions to. ``open`` while the producer runs: the run waits for more."""

    def __init__(self, ws: Workspace, run_id: str) -> None:
        self.ws, self.run_id = ws, run_id
        self.open = True
        self.queued: list[int] = []
        self.summary: AuditRunSummary | None = None
        self.error: BaseException | None = None

    def put(self, version_id: int) -> None:
        self.queued.append(version_id)
        queue_versions(self.ws, self.run_id, [version_id])

    def __call__(self) -> int:
        return 0  # put() writes the rows itself: the run claims them on its next look

    def close(self) -> None:
        self.open = False


@contextmanager
def audit_alongside(
    ws: Workspace,
    *,
    reruns: int = 3,
    executor: AuditExecutor | None = None,
    bus: EventBus | None = None,
    on_progress: Callable[[AuditRunSummary], None] | None = None,
    stop: threading.Event | None = None,
) -> Iterator[AuditFeed]:
    """Audits what the body ``put``s while the body runs; on exit waits for the last audit to end and
    leaves the run's summary in ``feed.summary`` (an audit runner that failed: ``feed.error``)."""
    feed = AuditFeed(ws, plan_audits(ws, [], reruns=reruns))

    def audit() -> None:
        try:
            feed.summary = run_audits(
                ws, feed.run_id, executor=executor, bus=bus, on_progress=on_progress, stop=stop, feed=feed
            )
        except BaseException as exc:  # noqa: BLE001 - handed to the caller with the summary
            feed.error = exc

    thread = threading.Thread(target=audit, name=f"audit-pipeline-{feed.run_id}", daemon=True)
    thread.start()
    try:
        yield feed
    finally:
        feed.close()
        thread.join()
