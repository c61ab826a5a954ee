"""Before a version's first rollout: learn where it is verified from its oracle, as the audit does.

Why: a rollout verifies in a clean room (engine/run/cleanroom.py) that carries only the task's artifacts.
A task whose verifier also reads what the solution installs elsewhere ("install ``sumcol`` into
/usr/local/bin") fails there even for its oracle, though Harbor, which verifies where the agent worked,
passes it. Until the audit the version's footprint is unknown, so every rollout of an unaudited version
would pay 0 for honest work — a loss caused by Bandpass's own choice of where to verify. So before the
first rollout of a version whose footprint is not known, :func:`learn_before_rollout` runs the audit's own
:func:`engine.audit.footprint.settle` (the oracle in the clean room; only when that fails, in place and
the minimisation) and stores the result on the version: the artifacts it needs are adopted (carried into
every later clean room) and the footprint is cached (``task_version.footprint_json``), so it costs one
oracle episode per version, once. A task without a solution has no oracle to learn from: its
verification mode is recorded as unproven, and nothing runs.

It runs wherever a batch starts through the application layer (``engine/app/batches.py``: ``bandpass run``
and ``--resume``, the Runs screen, a band round from the Calibration screen), on this machine's Docker
engine, before the runner claims the first episode. Failing to learn (no engine, a build the environment
broke, an oracle that ended an infrastructure error) never stops the batch: nothing is cached, the version
is verified as before, and the next batch tries again.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.models import utcnow
from ...store.queries import endstate as endstate_store
from ..core.events import FOOTPRINT_BATCH_PREFIX, EventBus
from ..core.plural import counted
from ..core.workspace import Workspace
from ..tasks.taskdir import load_task
from . import footprint

log = logging.getLogger(__name__)

#: The batch id prefix of the oracle episodes that learn a footprint (``bandpass gc --batch`` finds them).
BATCH_PREFIX = FOOTPRINT_BATCH_PREFIX
#: The footprint recorded for a task without ``solution/solve.sh``: nothing can prove where it verifies.
UNPROVEN = "unproven"
WHY_UNPROVEN = "no solution/solve.sh: no oracle shows where its verifier runs (verification unproven)"


@dataclass
class Learnt:
    """What learning did for one version: ``status`` is ``learnt``, ``unproven`` (no solution),
    ``skipped`` (unsupported, unloadable) or ``failed`` (nothing learnt this time)."""

    version_id: int
    task: str
    status: str
    mode: str = ""
    adopted: list[str] = field(default_factory=list)
    why: str = ""
    seconds: float = 0.0

    def line(self) -> str:
        """One line for the curator."""
        if self.status == "learnt" and self.adopted:
            return f"{self.task}: adopted {', '.join(self.adopted)} ({self.why})"
        if self.status == "learnt":
            return f"{self.task}: verified {self.mode.replace('_', ' ')} ({self.why})"
        return f"{self.task}: {self.status}: {self.why}"

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)


def to_learn(ws: Workspace, version_ids: Sequence[int]) -> list[int]:
    """The versions among ``version_ids`` whose footprint is not known yet (no audit or rollout learnt
    it), in the order given, each once."""
    out: list[int] = []
    with session(ws.engine) as s:
        for vid in dict.fromkeys(version_ids):
            v = queries.get_version(s, vid)
            if v is not None and not endstate_store.version_footprint(v):
                out.append(vid)
    return out


def learn_before_rollout(
    ws: Workspace,
    version_ids: Sequence[int],
    *,
    bus: EventBus | None = None,
    client: Any = None,
    workers: int = 2,
    stop: threading.Event | None = None,
    on_note: Callable[[str], None] | None = None,
) -> list[Learnt]:
    """Learns the footprint of every version in ``version_ids`` not known yet (module docstring), at most
    ``workers`` at a time; returns what it did per version. Never raises for a version: a failure is a
    ``failed`` entry (logged), and the batch runs on."""
    pending = to_learn(ws, version_ids)
    if not pending:
        return []
    if client is None:
        try:
            from ..sandbox.docker_engine import get_client

            client = get_client()
        except Exception as exc:  # noqa: BLE001 - no engine here: the batch decides what that means
            log.warning("footprints not learnt (no Docker engine here): %s", exc)
            return [Learnt(v, "", "failed", why=f"no Docker engine: {exc}") for v in pending]
    if on_note is not None:
        on_note(
            f"learning where {counted(len(pending), 'unaudited task version')} "
            f"{'is' if len(pending) == 1 else 'are'} verified "
            "(one oracle episode each, once per version)"
        )

    def one(vid: int) -> Learnt:
        if stop is not None and stop.is_set():
            return Learnt(vid, "", "skipped", why="the batch was stopped")
        try:
            res = learn_one(ws, vid, client=client, bus=bus)
        except Exception as exc:  # one version's failure is not the batch's
            log.exception("learning the footprint of version %s failed", vid)
            res = Learnt(vid, "", "failed", why=f"{type(exc).__name__}: {exc}")
        if on_note is not None:
            on_note(res.line())
        return res

    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        return list(pool.map(one, pending))


def learn_one(ws: Workspace, version_id: int, *, client: Any, bus: EventBus | None = None) -> Learnt:
    """Learns one version's footprint with the audit's :func:`footprint.settle` and says what it did."""
    started = time.monotonic()
    with session(ws.engine) as s:
        version = queries.get_version(s, version_id)
        if version is None:
            raise KeyError(f"task version {version_id} does not exist")
        task = queries.task_by_id(s, version.task_id)
        name = task.name if task else str(version_id)
        unsupported = json.loads(version.unsupported_json or "[]")
    out = Learnt(version_id, name, "skipped")
    try:
        spec = load_task(ws.abs(version.path))
    except Exception as exc:  # noqa: BLE001 - the episode says the same as its own infra error
        out.why = f"task files unusable: {exc}"
        return out
    if unsupported or spec.steps:
        out.why = "Bandpass cannot run it as written: " + "; ".join(unsupported or ["a multi-step task"])
        return out
    if not spec.has_solution:
        out.status, out.mode = UNPROVEN, UNPROVEN
        out.why = WHY_UNPROVEN
        row = {"mode": UNPROVEN, "why": out.why, "source": "rollout", "learnt_at": _now()}
        with session(ws.engine) as s:
            endstate_store.set_version_footprint(s, version_id, row, [])
        return out
    batch = f"{BATCH_PREFIX}{version.hash[:12]}-{int(time.time())}"
    fp = footprint.settle(ws, version_id, spec, client=client, bus=bus, batch=batch, source="rollout")
    out.status = "learnt" if footprint.learnt(fp) else "failed"
    out.mode, out.adopted, out.why = fp.mode, list(fp.adopted), fp.why
    out.seconds = time.monotonic() - started
    return out


def _now() -> str:
    return utcnow().isoformat(timespec="seconds")


__all__ = [
    "BATCH_PREFIX",
    "UNPROVEN",
    "WHY_UNPROVEN",
    "Learnt",
    "learn_before_rollout",
    "learn_one",
    "to_learn",
]
