"""Removing a container, retried: the one removal every other sandbox module calls.

Why a module of its own, below the others: the container (``container.py``), the warm pool (``pool.py``)
and the reaper (``leftovers.py``, which the first ``docker_engine.get_client`` of a process runs) all
remove containers, and the reaper sits under the engine connection that the container module needs. With
the removal owned here, the imports run one way — container → docker_engine → leftovers → removal — and
none of them has to hide an import inside a function to break a circle. docker-py itself is imported
when a removal runs: the CLI loads the reaper's module (``leftovers.set_reporter``) for every command, and
a listing must not pay for docker-py.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import docker

log = logging.getLogger(__name__)

#: Attempts of one removal by default, and the first pause between two (doubled each time, at most 10 s).
REMOVE_ATTEMPTS, REMOVE_BACKOFF_S = 3, 0.5


def _already_being_removed(exc: BaseException) -> bool:
    text = str(exc)
    return "removal of container" in text and "already in progress" in text


def force_remove(
    client: docker.DockerClient,
    container_id: str,
    *,
    attempts: int = REMOVE_ATTEMPTS,
    within_s: float | None = None,
    backoff_s: float = REMOVE_BACKOFF_S,
) -> bool:
    """Force-removes a container; True when this call removed it, False when it was gone already (or
    another caller is removing it).

    A removal that fails is retried, never only logged: a loaded engine answers "device or resource
    busy" while it unmounts the layer, or does not answer within the client's timeout, and an engine that
    is restarting refuses the connection. ``attempts`` bounds the tries; ``within_s`` (if given) instead
    keeps trying until that many seconds have passed. Raises the last error when all of them failed.
    """
    import docker.errors

    deadline = time.monotonic() + within_s if within_s is not None else None
    delay, tried = backoff_s, 0
    while True:
        tried += 1
        try:
            client.api.remove_container(container_id, force=True)
            return True
        except docker.errors.NotFound:
            return False
        except Exception as exc:  # APIError, a timeout, the engine away: all worth a retry
            if isinstance(exc, docker.errors.APIError) and _already_being_removed(exc):
                return False
            out_of_tries = tried >= attempts if deadline is None else time.monotonic() + delay > deadline
            if out_of_tries:
                raise
            log.info("removing %s failed (try %d), again in %.1fs: %s", container_id[:12], tried, delay, exc)
        time.sleep(delay)
        delay = min(delay * 2, 10.0)


__all__ = ["REMOVE_ATTEMPTS", "REMOVE_BACKOFF_S", "force_remove"]
