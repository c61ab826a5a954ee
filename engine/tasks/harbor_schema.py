"""Harbor 0.25's ``task.toml`` schema as data: which keys exist, which Bandpass acts on, and what Harbor's
own loader refuses.

Harbor's ``TaskConfig`` is a pydantic model with the default ``extra="ignore"``: a key it does not define is
dropped silently, never refused. A task that loads in Harbor must load in Bandpass too, so an unknown key
here is a *warning* (kept in the file, shown to the curator, with a "did you mean" when it looks like a
typo of a known key), never a problem. What Harbor does refuse — a ``network_mode`` outside its three
values, a ``[task].name`` that is not ``org/name`` — is listed by :func:`harbor_refusals`: Bandpass still
reads the older spellings it once wrote, but nothing it writes (examples, generator, converter, exports)
may carry one.

Every key Bandpass does not act on carries a note saying what ignoring it changes, because "ignored" alone
does not tell a curator whether the task still means what its author meant.
"""

from __future__ import annotations

import difflib
import re
from typing import Any

__all__ = [
    "HARBOR_VERSION",
    "LEGACY_NETWORK_MODES",
    "NETWORK_MODES",
    "ORG_NAME_RE",
    "SECTIONS",
    "TOP_LEVEL",
    "harbor_refusals",
    "suggest",
]

HARBOR_VERSION = "0.25.0"

#: Harbor's ``NetworkMode`` values, the only ones its loader accepts.
NETWORK_MODES = ("no-network", "public", "allowlist")
#: Docker's spellings that Bandpass wrote before 0.25 parity; read (with a warning), never written.
LEGACY_NETWORK_MODES = {"none": "no-network", "bridge": "public"}
#: ``harbor.constants.ORG_NAME_PATTERN`` (plus its "no '..'" rule, checked in :func:`harbor_refusals`).
ORG_NAME_RE = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9._-]*/[a-zA-Z0-9][a-zA-Z0-9._-]*$")

#: ``None``: Bandpass acts on the key. A string: what Bandpass does instead (shown in the warning).
Notes = dict[str, str | None]

TOP_LEVEL: Notes = {
    "version": None,
    "schema_version": None,
    "source": None,
    "artifacts": None,  # read: carried into the clean room (engine/tasks/artifacts.py)
    "multi_step_reward_strategy": None,  # read with [[steps]]
    "steps": None,  # multi-step tasks: run step by step (engine/tasks/steps.py)
}

SECTIONS: dict[str, Notes] = {
    "task": {"name": None, "version": None, "description": None, "authors": None, "keywords": None},
    "metadata": {},  # free-form in Harbor; difficulty / category / tags are read when well-typed
    "agent": {
        "timeout_sec": None,
        "user": "the agent runs as the image's default user",
        "network_mode": "the agent gets the [environment] network setting",
        "allowed_hosts": "no allowlist is enforced: the network is all or nothing",
    },
    "verifier": {
        "timeout_sec": None,
        "env": None,
        "user": "the verifier runs as the image's default user",
        "network_mode": None,  # read: the clean room's network (Harbor's phase override)
        "allowed_hosts": "no allowlist is enforced: the network is all or nothing",
        "environment_mode": None,  # read: shared = service, separate = clean room (own image: unsupported)
        "environment": "the verifier runs in the task's own image, not this one",
        "collect": None,  # run after the agent phase, in main or a compose service
    },
    "environment": {
        "build_timeout_sec": None,
        "docker_image": None,
        "cpus": None,
        "memory_mb": None,
        "memory": None,  # deprecated in Harbor, read
        "storage_mb": None,
        "storage": None,  # deprecated in Harbor, read
        "pids_limit": None,  # Bandpass's own (Harbor ignores it)
        "network_mode": None,
        "allow_internet": None,  # deprecated in Harbor, read
        "allowed_hosts": None,  # with network_mode = "allowlist", whose warning says it is not enforced
        "workdir": None,
        "os": None,
        "gpus": "no GPU is attached",
        "gpu_types": "no GPU is attached",
        "tpu": "no TPU is attached",
        "env": "these variables are not set in the container",
        "healthcheck": None,  # run before the agent starts
        "skills_dir": "skills are not copied for the agent",
        "mcp_servers": "no MCP server is offered to the agent",
    },
    "solution": {"env": None},
}


def suggest(key: str, known: list[str] | set[str] | tuple[str, ...]) -> str:
    """`` (did you mean X?)`` when ``key`` looks like a typo of a known key, else empty."""
    close = difflib.get_close_matches(key, sorted(known), n=1, cutoff=0.75)
    return f" (did you mean {close[0]}?)" if close else ""


def _value_is_set(value: Any) -> bool:
    """Harbor writes empty defaults (``mcp_servers = []``, ``[environment.env]``, ``gpus = 0``): those
    ask for nothing, so ignoring them changes nothing and deserves no warning."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float) and not isinstance(value, bool):
        return value != 0
    if isinstance(value, str | list | dict):
        return bool(value)
    return True


def ignored_key_warning(
    where: str, key: str, value: Any, note: str | None, *, environment: dict[str, Any] | None = None
) -> str | None:
    """The warning for a Harbor key Bandpass does not act on, or None when its value asks for nothing —
    or for what Bandpass does anyway: an ``[agent] network_mode`` equal to the environment's (Harbor's
    default ``public`` when unset) changes nothing."""
    if note is None or not _value_is_set(value):
        return None
    if where == "[agent]" and key == "network_mode" and environment is not None:
        env_mode = environment.get("network_mode")
        if env_mode is None and environment.get("allow_internet") is not None:
            env_mode = "public" if environment["allow_internet"] else "no-network"
        if value == LEGACY_NETWORK_MODES.get(env_mode or "public", env_mode or "public"):
            return None
    return f"task.toml: {where}.{key}: {note}"


def harbor_refusals(doc: dict[str, Any]) -> list[tuple[str, str]]:
    """(field, message) for each thing in a parsed ``task.toml`` Harbor 0.25's loader would refuse that
    Bandpass's reader tolerates. Bandpass writes nothing that appears here."""
    out: list[tuple[str, str]] = []
    task = doc.get("task")
    if isinstance(task, dict):
        name = task.get("name")
        if name is None:
            out.append(("[task].name", "Harbor requires a name when [task] is present"))
        elif not isinstance(name, str) or not ORG_NAME_RE.match(name) or ".." in name:
            out.append(("[task].name", f"Harbor expects 'org/name' (letters, digits, . _ -), got {name!r}"))
    for sec in ("environment", "agent", "verifier"):
        table = doc.get(sec)
        if not isinstance(table, dict):
            continue
        mode = table.get("network_mode")
        if mode is not None and mode not in NETWORK_MODES:
            out.append((f"[{sec}].network_mode", f"Harbor accepts {', '.join(NETWORK_MODES)}; got {mode!r}"))
    return out
