"""Connection to the Docker engine, and a health check a curator can read.

Everything else in ``engine`` gets its client from :func:`get_client`, so "the daemon is gone" surfaces as
one exception type with one readable message instead of a urllib3 traceback in the middle of an episode
(the runner turns it into ``infra_error:daemon_unavailable``).
"""

from __future__ import annotations

import os
import platform
import subprocess
from dataclasses import dataclass
from pathlib import Path

import docker
import docker.errors

from ..core.errors import BandpassError
from ..tasks.images import BASE_TAG
from . import leftovers

#: Seconds to wait for the engine to answer ``/_ping`` before calling it unreachable. Short on purpose: a
#: missing socket fails at once, and a hung daemon should not freeze the TUI for a minute.
PING_TIMEOUT_SEC = 5.0
#: Timeout of ordinary API calls after the ping succeeded (image import/commit can be slow on a busy disk).
API_TIMEOUT_SEC = 120.0

ENSURE_SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "ensure-docker.sh"


class DockerUnavailable(BandpassError, RuntimeError):
    """No Docker engine answers. The message is one line a curator can act on."""

    def __init__(self, base_url: str, reason: str) -> None:
        self.base_url = base_url
        self.reason = reason
        super().__init__(
            f"Docker engine not reachable at {base_url}: {reason} "
            "— run scripts/ensure-docker.sh or set DOCKER_HOST"
        )


def _base_url() -> str:
    return os.environ.get("DOCKER_HOST") or "unix:///var/run/docker.sock"


def _short_reason(exc: BaseException) -> str:
    """The innermost useful line of a docker/requests error (they nest three exceptions deep)."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    for marker in ("FileNotFoundError", "ConnectionRefusedError", "Connection refused", "timed out"):
        if marker in text:
            return {
                "FileNotFoundError": "socket file missing",
                "ConnectionRefusedError": "connection refused",
                "Connection refused": "connection refused",
                "timed out": f"no answer within {PING_TIMEOUT_SEC:g} s",
            }[marker]
    return text[:200]


def get_client(
    *, timeout: float = API_TIMEOUT_SEC, ping_timeout: float = PING_TIMEOUT_SEC, reap: bool = True
) -> docker.DockerClient:
    """A client for the engine named by the environment (``DOCKER_HOST`` etc.), proven alive by a ping.

    The client is created with the short ping timeout (so API-version negotiation and the ping cannot
    hang), then switched to the ordinary timeout for real work. The first client of a process reaps what
    dead Bandpass processes left on that engine (``leftovers.reap_on_start``) unless ``reap`` is False
    (``bandpass gc --dry-run``, which only lists it).
    """
    base_url = _base_url()
    try:
        client = docker.from_env(timeout=int(max(1, ping_timeout)))
        client.ping()
    except Exception as exc:  # DockerException, requests errors, OSError: all mean "not reachable"
        raise DockerUnavailable(base_url, _short_reason(exc)) from exc
    client.api.timeout = timeout  # type: ignore[assignment]  # requests takes a float; docker-py's stub: int
    if reap:
        leftovers.reap_on_start(client)
    return client


def ensure_engine(*, script: Path = ENSURE_SCRIPT) -> docker.DockerClient:
    """Return a live client, starting a local dockerd first when that is ours to do.

    We only try when we are root on Linux and DOCKER_HOST is unset: starting a daemon on someone's laptop
    or behind a remote DOCKER_HOST would be a surprise, and the script needs root to install and start.
    """
    try:
        return get_client()
    except DockerUnavailable as first:
        can_fix = (
            platform.system() == "Linux"
            and hasattr(os, "geteuid")
            and os.geteuid() == 0
            and not os.environ.get("DOCKER_HOST")
            and script.is_file()
        )
        if not can_fix:
            raise
        proc = subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=300)
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["(no output)"])[-1]
            raise DockerUnavailable(
                first.base_url, f"{first.reason}; ensure-docker.sh failed: {tail}"
            ) from first
        return get_client()


@dataclass(frozen=True)
class Check:
    """One line of ``bandpass doctor``. ``warning``: passed, but will hurt (vfs driver, leftovers)."""

    name: str
    ok: bool
    detail: str
    warning: bool = False


def doctor(client: docker.DockerClient | None = None, *, base_tag: str | None = None) -> list[Check]:
    """Checks in the order a curator would fix them; later checks are skipped when the engine is down."""
    base_tag = base_tag or BASE_TAG
    checks: list[Check] = []
    if client is None:
        try:
            client = get_client()
        except DockerUnavailable as exc:
            return [Check("engine reachable", False, str(exc))]
    checks.append(Check("engine reachable", True, _base_url()))

    try:
        info = client.info()
    except (docker.errors.DockerException, OSError) as exc:  # the engine answered ping, then failed
        checks.append(Check("engine info", False, _short_reason(exc)))
        return checks
    version = info.get("ServerVersion", "?")
    checks.append(Check("server version", True, f"{version} (API {client.api.api_version})"))

    driver = info.get("Driver", "?")
    if driver == "vfs":
        checks.append(
            Check(
                "storage driver",
                True,
                "vfs: every layer is a full copy, builds and container starts are ~20x slower "
                "— restart dockerd with --storage-driver=overlay2",
                warning=True,
            )
        )
    else:
        checks.append(Check("storage driver", True, driver))

    try:
        client.images.get(base_tag)
        checks.append(Check("base image", True, base_tag))
    except docker.errors.ImageNotFound:
        checks.append(
            Check("base image", False, f"{base_tag} missing — `bandpass doctor --fix` builds it (~1 min)")
        )
    except (docker.errors.DockerException, OSError) as exc:
        checks.append(Check("base image", False, _short_reason(exc)))

    try:
        leftovers = client.api.containers(all=True, filters={"label": "bandpass=1"})
        n = len(leftovers)
        detail = "none" if n == 0 else f"{n} left over from earlier runs — `bandpass gc` removes them"
        checks.append(Check("leftover containers", True, detail, warning=n > 0))
    except (docker.errors.DockerException, OSError) as exc:
        checks.append(Check("leftover containers", False, _short_reason(exc)))
    return checks
