"""Containers Bandpass left behind: what ``bandpass gc`` looks at, and what every start reaps on its own.

Why: one engine is often shared by several workspaces (a curator's, a test run's, a colleague's), and a
process that dies (SIGKILL, a killed CI job, an engine restart under it) cannot remove its own containers.
Two rules follow:

* **Reaped on start** (:func:`reap_on_start`): the first time a Bandpass process reaches the engine
  (``docker_engine.get_client``), it removes, in every workspace, the containers whose owner is gone:
  the ``bandpass.owner`` label names a process on this host (pid and start time, so a reused pid is not
  mistaken for the owner: engine/sandbox/owner.py) that no longer runs, or the container's hard lifetime
  (``bandpass.expires``) is over. A failed removal is retried (``removal.force_remove``); what still
  fails is reported and tried again by the next start. It says how many it removed (the CLI prints it;
  ``BANDPASS_REAP_ON_START=0`` turns it off). ``bandpass gc --dry-run`` lists what a start would reap.
* **``bandpass gc``** removes Bandpass containers on request, counted per workspace, and asks before
  touching a workspace where a runner still holds a batch lock; it also removes containers of owners it
  cannot judge (another host's, an older Bandpass's without an owner label).
"""

from __future__ import annotations

import contextlib
import logging
import os
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..core.plural import counted
from . import labels as L
from . import lifeline
from . import owner as owner_mod
from .removal import force_remove

log = logging.getLogger(__name__)

ENV = "BANDPASS_REAP_ON_START"
#: How long past its hard lifetime a container of a live owner is left alone (clocks, a slow removal).
EXPIRY_GRACE_S = 60.0
#: Removals at once while reaping (each waits on the engine; it does the work).
REAP_WORKERS = 4


def containers_by_workspace(client: Any) -> dict[str, list[dict[str, Any]]]:
    """Every Bandpass container on the engine, keyed by its ``bandpass.workspace`` label ('' if none)."""
    out: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for c in client.api.containers(all=True, filters={"label": [f"{L.LABEL}=1"]}):
        out[(c.get("Labels") or {}).get(L.WORKSPACE, "")].append(c)
    return dict(out)


def _held_inodes() -> set[int]:
    """Inodes with a lock held by any process on this machine (``/proc/locks``; no lock is taken)."""
    held: set[int] = set()
    with contextlib.suppress(OSError):
        for line in Path("/proc/locks").read_text().splitlines():
            parts = line.split()
            dev_ino = next((p for p in parts if p.count(":") == 2), "")
            with contextlib.suppress(ValueError):
                held.add(int(dev_ino.rsplit(":", 1)[1]))
    return held


def live_batches(workspace: str) -> list[str]:
    """Batches of ``workspace`` whose lock a runner holds now (read from ``/proc/locks``, never by
    trying the lock, which would make a runner starting at that moment think it is not alone)."""
    locks = Path(workspace) / ".locks"
    if not locks.is_dir():
        return []
    held = _held_inodes()
    out = []
    for f in sorted(locks.glob("batch-*.lock")):
        with contextlib.suppress(OSError):
            if os.stat(f).st_ino in held:
                out.append(f.stem.removeprefix("batch-"))
    return out


def remove(client: Any, containers: list[dict[str, Any]]) -> int:
    """Removes the listed containers (each removal retried); returns how many this call removed."""
    n = 0
    for c in containers:
        try:
            n += force_remove(client, c["Id"])
        except Exception as exc:  # noqa: BLE001 - the others still go; the next start tries this one again
            log.warning("could not remove %s: %s", c["Id"][:12], exc)
    return n


# --- reaping -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Stale:
    """A container a start would reap, and why."""

    id: str
    name: str
    workspace: str
    batch: str
    state: str  # the engine's: running, exited, created...
    why: str

    def line(self) -> str:
        where = self.workspace or "(no workspace label)"
        batch = f", batch {self.batch}" if self.batch else ""
        return f"{self.name} ({self.state}; {where}{batch}): {self.why}"


@dataclass
class ReapReport:
    removed: list[Stale] = field(default_factory=list)
    failed: list[tuple[Stale, str]] = field(default_factory=list)
    dirs: int = 0  # lifeline directories of dead owners
    #: networks and volumes of compose tasks' projects (engine/sandbox/services.py) whose owner is gone
    networks: int = 0
    volumes: int = 0

    def removed_in(self, workspace: str, batch: str | None = None) -> int:
        return sum(s.workspace == workspace and (batch is None or s.batch == batch) for s in self.removed)

    def message(self) -> str:
        """One line for the user ('' when there was nothing to reap)."""
        parts = []
        if self.removed:
            per: dict[str, int] = defaultdict(int)
            for s in self.removed:
                per[s.workspace or "(no workspace label)"] += 1
            where = ", ".join(f"{n} of {w}" for w, n in sorted(per.items()))
            parts.append(
                f"reaped {counted(len(self.removed), 'container')} left by Bandpass processes that are gone "
                f"({where})"
            )
        if self.networks or self.volumes:
            parts.append(
                f"removed {counted(self.networks, 'network')} and {counted(self.volumes, 'volume')} of "
                "compose tasks whose Bandpass process is gone"
            )
        if self.failed:
            names = ", ".join(f"{s.name} ({err[:120]})" for s, err in self.failed[:3])
            more = f" and {len(self.failed) - 3} more" if len(self.failed) > 3 else ""
            parts.append(
                f"could not remove {counted(len(self.failed), 'such container')}: {names}{more}; the next "
                "start tries again (`bandpass gc --dry-run` lists them)"
            )
        return "; ".join(parts)


def stale(client: Any, *, now: float | None = None) -> list[Stale]:
    """The Bandpass containers on this engine that a start would reap: their owner (a process on this
    host) is gone, or their hard lifetime is over. Never a container whose owner cannot be judged here."""
    now = time.time() if now is None else now
    local = lifeline.local_engine(client)
    out = []
    for c in client.api.containers(all=True, filters={"label": [f"{L.LABEL}=1", L.OWNER]}):
        labels = c.get("Labels") or {}
        state, why = owner_mod.liveness(
            owner_mod.Owner.parse(labels.get(L.OWNER, "")),
            created=float(c.get("Created") or 0),
            local_engine=local,
        )
        if state != owner_mod.GONE:
            expires = labels.get(L.EXPIRES, "")
            if not (expires.isdigit() and now > int(expires) + EXPIRY_GRACE_S):
                continue
            why = f"its hard lifetime ended {int(now - int(expires))} s ago ({why})"
        else:
            why = f"owner {why}"
        names = [str(n).lstrip("/") for n in c.get("Names") or []]
        out.append(
            Stale(
                id=c["Id"],
                name=names[0] if names else c["Id"][:12],
                workspace=labels.get(L.WORKSPACE, ""),
                batch=labels.get(L.BATCH, ""),
                state=str(c.get("State") or "?"),
                why=why,
            )
        )
    return out


def _owner_gone(client: Any, labels: dict[str, str], created: float, now: float) -> bool:
    """A network's or volume's owner is gone (or its hard lifetime is over), judged as for a container."""
    state, _why = owner_mod.liveness(
        owner_mod.Owner.parse(labels.get(L.OWNER, "")),
        created=created,
        local_engine=lifeline.local_engine(client),
    )
    expires = labels.get(L.EXPIRES, "")
    return state == owner_mod.GONE or (expires.isdigit() and now > int(expires) + EXPIRY_GRACE_S)


def _created(text: str) -> float:
    """An engine timestamp (``2026-12-05T21:26:10.123456789Z``) as Unix seconds (0 when unreadable)."""
    from datetime import datetime

    try:
        return datetime.fromisoformat(text[:26].rstrip("Z").split(".")[0] + "+00:00").timestamp()
    except (ValueError, TypeError):
        return 0.0


def reap_networks(client: Any, *, now: float | None = None) -> tuple[int, int]:
    """Removes the networks and volumes of compose projects (labelled ``bandpass=1`` with an owner, as the
    project's containers are: engine/sandbox/services.py) whose owner is gone; run after the containers
    are reaped (a network with a container attached cannot go). Returns (networks, volumes) removed."""
    now = time.time() if now is None else now
    nets = vols = 0
    for net in client.api.networks(filters={"label": [f"{L.LABEL}=1", L.OWNER]}):
        labels = net.get("Labels") or {}
        if not _owner_gone(client, labels, _created(str(net.get("Created", ""))), now):
            continue
        try:
            client.api.remove_network(net["Id"])
            nets += 1
        except Exception as exc:  # noqa: BLE001 - still in use, or gone meanwhile: the next start tries again
            log.warning("could not remove network %s: %s", net.get("Name"), exc)
    listed = client.api.volumes(filters={"label": [f"{L.LABEL}=1", L.OWNER]}) or {}
    for vol in listed.get("Volumes") or []:
        labels = vol.get("Labels") or {}
        if not _owner_gone(client, labels, _created(str(vol.get("CreatedAt", ""))), now):
            continue
        try:
            client.api.remove_volume(vol["Name"], force=True)
            vols += 1
        except Exception as exc:  # noqa: BLE001 - as above
            log.warning("could not remove volume %s: %s", vol.get("Name"), exc)
    return nets, vols


def reap(client: Any, *, attempts: int = 3) -> ReapReport:
    """Removes every container :func:`stale` lists (each removal retried ``attempts`` times) and the
    lifeline directories of dead owners."""
    report = ReapReport()
    found = stale(client)

    def one(s: Stale) -> None:
        try:
            if force_remove(client, s.id, attempts=attempts):
                report.removed.append(s)
        except Exception as exc:  # noqa: BLE001 - reported; the next start tries again
            report.failed.append((s, f"{type(exc).__name__}: {exc}"))

    if found:
        with ThreadPoolExecutor(max_workers=min(REAP_WORKERS, len(found))) as pool:
            list(pool.map(one, found))
    try:
        report.networks, report.volumes = reap_networks(client)
    except Exception as exc:  # noqa: BLE001 - an engine that fails the listing: the next start tries again
        log.warning("could not reap leftover networks: %s", exc)
    report.dirs = lifeline.remove_dead_dirs()
    return report


# --- once per process, at the first contact with an engine ------------------------------------------------

_lock = threading.Lock()
_reports: dict[tuple[int, str], ReapReport] = {}
_reporter: Callable[[str], None] | None = None


def enabled() -> bool:
    return os.environ.get(ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def set_reporter(fn: Callable[[str], None] | None) -> None:
    """Where :func:`reap_on_start` says what it did (the CLI prints to stderr); None: the log only."""
    global _reporter
    _reporter = fn


def _address(client: Any) -> str:
    """Where the client reaches its engine: the socket path for a unix socket (docker-py names every
    unix socket ``http+docker://localhost``), else the URL."""
    adapter = getattr(client.api, "_custom_adapter", None)
    return str(getattr(adapter, "socket_path", "") or getattr(client.api, "base_url", ""))


def reap_on_start(client: Any) -> ReapReport | None:
    """Reaps once per process and engine address (the first caller does the work, concurrent ones wait);
    None when turned off. Never raises: reaping must not stop the command that asked for an engine."""
    if not enabled():
        return None
    key = (os.getpid(), _address(client))
    with _lock:
        if key in _reports:
            return _reports[key]
        try:
            report = reap(client)
        except Exception as exc:  # noqa: BLE001 - an engine that fails the listing: the next start tries
            log.warning("could not reap leftover containers: %s", exc)
            report = ReapReport()
        _reports[key] = report
    msg = report.message()
    if msg:
        log.warning("%s", msg)
        if _reporter is not None:
            with contextlib.suppress(Exception):
                _reporter(msg)
    return report


def reaped(workspace: str, batch: str | None = None) -> int:
    """How many containers of ``workspace`` (and ``batch``) this process reaped when it started."""
    pid = os.getpid()
    with _lock:
        return sum(r.removed_in(workspace, batch) for (p, _), r in _reports.items() if p == pid)


__all__ = [
    "ENV",
    "ReapReport",
    "Stale",
    "containers_by_workspace",
    "live_batches",
    "reap",
    "reap_networks",
    "reap_on_start",
    "reaped",
    "remove",
    "set_reporter",
    "stale",
]
