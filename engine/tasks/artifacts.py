"""What a task's verifier may read of the agent's work: its *artifacts*, and where the verifier runs.

Bandpass verifies in a clean room by default (``engine/run/cleanroom.py``): a fresh container of the task's
image into which only the artifacts are carried from the agent's captured end state. The artifacts are
the task's working directory, Harbor's agent publish directory (``/logs/artifacts``) and every path the
task declares with Harbor 0.25's own top-level field (``TaskConfig.artifacts``, which Harbor copies into
its separate verifier environment the same way)::

    artifacts = ["/srv/www", { source = "/etc/nginx/conf.d/site.conf" }]

Where the verifier runs is Harbor's ``[verifier] environment_mode``: ``"separate"`` is the clean room;
``"shared"`` is the *service* mode: the verifier shares the agent's network namespace (a service the
agent left running answers on localhost, as in Harbor's shared environment), but runs in a fresh
container of the image with the artifacts carried in, never among the agent's processes or on the rest
of its filesystem. Omitted, Bandpass uses the clean room (Harbor's own default is shared: Bandpass is
stricter unless the task says otherwise, or the audit found the oracle leaves a listening service).
``[verifier] network_mode`` is Harbor's phase override of the environment's network (not for a service
verifier: it has the service's network).

*In place* (the verifier in the agent's own container, the tamper guard its gate, a process the policy
leaves listening alive beside it) is only ever chosen by a task that asks for it in Bandpass's own field,
knowing that such a process could write the reward::

    [metadata.bandpass]
    verify_mode = "in_place"

Kept out of ``taskdir.py`` so the loader only calls :func:`parse`.
"""

from __future__ import annotations

import posixpath
from typing import Any

CLEAN_ROOM = "clean_room"
IN_PLACE = "in_place"
#: A fresh container of the image, the artifacts carried in, in the agent container's network namespace.
SERVICE = "service"
MODES = (CLEAN_ROOM, SERVICE, IN_PLACE)
#: Modes whose verifier runs in a container of its own (the policy's processes never beside it).
FRESH = (CLEAN_ROOM, SERVICE)
#: Harbor's spelling of the verifier's environment, mapped to Bandpass's.
_HARBOR_MODES = {"separate": CLEAN_ROOM, "shared": SERVICE}
#: Harbor's conventional agent publish directory: always carried, as Harbor does.
CONVENTION_DIR = "/logs/artifacts"
#: Where an artifact may never be: the harness's own places and the kernel's.
_REFUSED = ("/", "/proc", "/sys", "/dev", "/logs", "/logs/verifier", "/tests")


def normalize(path: str, workdir: str) -> str:
    """An absolute, normalised container path (a relative one is taken relative to the workdir)."""
    p = path if path.startswith("/") else posixpath.join(workdir, path)
    return posixpath.normpath(p).replace("//", "/")


def parse(
    doc: dict[str, Any], workdir: str
) -> tuple[list[str], str, bool | None, list[tuple[str, str]], list[tuple[str, str]]]:
    """(declared artifact paths, verify mode or "", verifier network override or None, problems,
    warnings). Problems (what Harbor's own loader refuses too: a non-path, ``..``) and warnings (a path
    that is the harness's, left out) are ``(field, message)`` pairs in the loader's style."""
    problems: list[tuple[str, str]] = []
    warnings: list[tuple[str, str]] = []
    paths: list[str] = []
    raw = doc.get("artifacts", [])
    if not isinstance(raw, list):
        problems.append(("artifacts", f"expected an array of paths or {{source = ...}} tables, got {raw!r}"))
        raw = []
    for i, entry in enumerate(raw):
        source = entry.get("source") if isinstance(entry, dict) else entry
        if not isinstance(source, str) or not source.strip():
            problems.append((f"artifacts[{i}]", f"expected a path or a table with a source, got {entry!r}"))
            continue
        if ".." in source.split("/"):
            problems.append((f"artifacts[{i}]", f"must not contain '..' components, got {source!r}"))
            continue
        path = normalize(source, workdir)
        if path in _REFUSED or path.startswith(("/proc/", "/sys/", "/dev/", "/tests/", "/logs/verifier/")):
            warnings.append((f"artifacts[{i}]", f"{path} is the harness's or the kernel's: not carried"))
            continue
        if path not in paths:
            paths.append(path)
    verifier = doc.get("verifier", {})
    verifier = verifier if isinstance(verifier, dict) else {}
    # both values are checked by the loader (taskdir._read_verifier_mode, harbor_schema.harbor_refusals):
    # here only what they mean
    mode = _HARBOR_MODES.get(verifier.get("environment_mode", ""), "")
    meta = doc.get("metadata", {})
    bandpass = meta.get("bandpass", {}) if isinstance(meta, dict) else {}
    asked = bandpass.get("verify_mode") if isinstance(bandpass, dict) else None
    if asked is not None:
        if asked in MODES:
            mode = asked
        else:
            problems.append(
                ("[metadata.bandpass].verify_mode", f"expected one of {', '.join(MODES)}, got {asked!r}")
            )
    wants = {"none": False, "no-network": False, "bridge": True, "public": True, "allowlist": True}
    network = wants.get(verifier.get("network_mode", ""))
    return paths, mode, network, problems, warnings


def roots(workdir: str, declared: list[str]) -> list[str]:
    """Every artifact root, the workdir first, without one nested in another."""
    out: list[str] = []
    for p in [normalize(workdir, "/"), CONVENTION_DIR, *declared]:
        if any(p == r or p.startswith(r.rstrip("/") + "/") for r in out):
            continue
        out = [r for r in out if not r.startswith(p.rstrip("/") + "/")]
        out.append(p)
    return out


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
