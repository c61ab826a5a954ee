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
#: Harbor's name for the agent's compose service: an artifact of it is an ordinary one.
MAIN_SERVICE = "main"
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
        if isinstance(entry, dict) and entry.get("service") not in (None, "", MAIN_SERVICE):
            continue  # collected from a compose service (service_entries), not carried from main
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


def service_entries(raw: Any) -> tuple[list[tuple[str, str]], list[tuple[str, str]]]:
    """Harbor's artifacts collected from a compose service (``{ source = "/data/db.json", service =
    "db" }``): ``(service, absolute source)`` pairs, and ``(field, problem)`` for an entry Harbor refuses
    too (a relative source: a service has no workdir of Bandpass's)."""
    out: list[tuple[str, str]] = []
    problems: list[tuple[str, str]] = []
    for i, entry in enumerate(raw if isinstance(raw, list) else []):
        if not isinstance(entry, dict) or entry.get("service") in (None, "", MAIN_SERVICE):
            continue
        source, service = entry.get("source"), entry.get("service")
        if not isinstance(service, str) or not isinstance(source, str) or not source.startswith("/"):
            problems.append(
                (f"artifacts[{i}]", f"a service's artifact needs an absolute source, got {source!r}")
            )
            continue
        if ".." in source.split("/"):
            problems.append((f"artifacts[{i}]", f"must not contain '..' components, got {source!r}"))
            continue
        pair = (service, posixpath.normpath(source))
        if pair not in out:
            out.append(pair)
    return out, problems


def roots(workdir: str, declared: list[str]) -> list[str]:
    """Every artifact root, the workdir first, without one nested in another."""
    out: list[str] = []
    for p in [normalize(workdir, "/"), CONVENTION_DIR, *declared]:
        if any(p == r or p.startswith(r.rstrip("/") + "/") for r in out):
            continue
        out = [r for r in out if not r.startswith(p.rstrip("/") + "/")]
        out.append(p)
    return out


def declare(toml_text: str, paths: list[str]) -> str:
    """``task.toml`` text whose top-level ``artifacts`` (Harbor 0.25's field) also lists ``paths``: what an
    export writes for a version that adopted artifacts from its oracle's footprint, so the exported task
    says what its verifier reads and runs as verified, in Bandpass or in Harbor's separate verifier.

    Without an ``artifacts`` key the line goes first (a top-level key must precede every table) and the
    rest of the file is kept byte for byte; with one, the document is written again with the merged list
    (TOML cannot extend a key in place; comments are lost then)."""
    import json
    import tomllib

    import tomli_w

    doc = tomllib.loads(toml_text)
    declared = doc.get("artifacts", [])
    have = {e.get("source") if isinstance(e, dict) else e for e in declared if isinstance(declared, list)}
    new = [p for p in paths if p not in have]
    if not new:
        return toml_text
    if "artifacts" not in doc:
        line = "artifacts = [" + ", ".join(json.dumps(p) for p in new) + "]"
        return f"{line}  # adopted by Bandpass: what the oracle showed its verifier reads\n{toml_text}"
    doc["artifacts"] = [*declared, *new]
    return tomli_w.dumps(doc)


def under(path: str, root: str) -> bool:
    return path == root or path.startswith(root.rstrip("/") + "/")
