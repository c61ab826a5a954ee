"""A task's Docker Compose services (``environment/docker-compose.yaml``), read the way Harbor 0.25 reads
them, and checked for what this machine can give.

Harbor's model: the harness configures the ``main`` service (the task's image, ``sleep infinity``, the
limits, the mounts) and the task's compose file is merged *on top*: it may add overrides to ``main``
(usually ``depends_on`` a sidecar being healthy) and define other services (an API, a database, an MCP
server, a simulated user). The agent works in ``main``; every service reaches every other by name on the
project's network.

Bandpass keeps that model with one difference in who makes ``main``: its container is Bandpass's own
sandbox (the lifeline, the dropped capabilities, the limits, the attribution and the end-state capture all
stay as for any task), joined to the project's network under the name ``main``, and started once the other
services are up (and healthy, when they have a healthcheck) — which is what ``depends_on`` asks. So of a
task's overrides to ``main``, Bandpass acts on ``depends_on``, ``environment`` (the agent's container gets
the variables) and ``working_dir`` (the task's workdir, when ``[environment] workdir`` says nothing);
a harmless one (``expose``, ``labels``...) is a warning, and one that would change what ``main`` *is*
(its image, command, volumes, privileges) is *unsupported*: the task imports and the audit says it
could not audit it, naming the key.

What a service may not ask of this machine is unsupported too, one line each: privileged mode, added
capabilities, devices, host networking or pid/ipc namespaces, a bind mount from outside the task's
``environment/`` (``/var/run/docker.sock`` above all), a Windows platform, GPUs. Ports are never published
on the host (the services are reachable by name on the task's network), a fixed ``container_name`` and a
``restart`` policy are dropped (each episode has its own project; a service's life is its lifeline's), a
bind mount of the task's own files is made read-only (the task's files are its version). Each is a
warning.

**Variables.** Harbor interpolates the compose file from the host's whole environment. Bandpass never
hands the host's environment to a task (it holds the curator's keys): a file is interpolated from the
task's ``[environment] env``, the environment directory's ``.env`` and Harbor's own variables
(``MAIN_IMAGE_NAME``, ``CONTEXT_DIR``, ``CPUS``, ``MEMORY``); a variable the file takes from the host is a
warning naming it (its default, ``${X:-default}``, still applies).

This module only reads files (no Docker): the runtime is ``engine/sandbox/services.py``.
"""

from __future__ import annotations

import posixpath
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

__all__ = [
    "COMPOSE_FILE",
    "HARBOR_VARIABLES",
    "MAIN",
    "ComposeInfo",
    "ServiceInfo",
    "read_compose",
    "resolve_env",
]

COMPOSE_FILE = "docker-compose.yaml"
#: Harbor's name for the agent's service.
MAIN = "main"
#: The variables Harbor's docker environment sets for the compose file (compose_env.ComposeInfraEnvVars).
HARBOR_VARIABLES = ("MAIN_IMAGE_NAME", "CONTEXT_DIR", "PREBUILT_IMAGE_NAME", "CPUS", "MEMORY")

#: ``main`` overrides Bandpass acts on (see the module docstring).
MAIN_HONOURED = frozenset({"depends_on", "environment", "working_dir", "env_file"})
#: ``main`` overrides that change nothing an episode depends on: a warning each.
MAIN_HARMLESS = {
    "expose": "main's exposed ports change nothing on the task's network (every port is reachable)",
    "ports": "main's ports are not published on the host",
    "labels": "main's labels are Bandpass's",
    "networks": "main joins the task's one network",
    "init": "main always runs under Docker's init",
    "stdin_open": "main's terminal is Bandpass's",
    "tty": "main's terminal is Bandpass's",
    "healthcheck": "main's healthcheck is not run (use [environment].healthcheck, which is)",
    "extra_hosts": "main's extra_hosts are not added",
    "hostname": "main's hostname is Docker's",
    "restart": "main never restarts on its own",
    "container_name": "main's container is named by Bandpass",
    "cpus": "main's limits are task.toml's [environment] cpus and memory_mb",
    "mem_limit": "main's limits are task.toml's [environment] cpus and memory_mb",
    "memswap_limit": "main's limits are task.toml's [environment] cpus and memory_mb",
    "deploy": "main's limits are task.toml's [environment] cpus and memory_mb",
    "shm_size": "main gets Docker's default /dev/shm",
    "ulimits": "main gets Docker's default ulimits",
    "platform": "main runs on this machine's platform",
}
#: Keys on any service that ask for more than a sandbox may have: unsupported.
PRIVILEGED_KEYS = {
    "privileged": "privileged mode",
    "cap_add": "added capabilities",
    "devices": "host devices",
    "device_cgroup_rules": "device cgroup rules",
    "pid": "the host's pid namespace",
    "ipc": "a shared ipc namespace",
    "userns_mode": "the host's user namespace",
    "security_opt": "security options",
    "cgroup_parent": "a cgroup of the host",
    "cgroup": "a cgroup namespace of the host",
    "runtime": "another container runtime",
    "isolation": "Windows isolation",
    "sysctls": "kernel parameters",
    "gpus": "GPUs",
    "volumes_from": "another container's volumes",
    "external_links": "containers outside the task",
    "network_mode": "a network of its own",
    "networks": "networks other than the task's one",
    "secrets": "compose secrets",
    "configs": "compose configs",
    "extends": "a service of another file",
}
#: Keys Bandpass drops from a service, with what that changes.
DROPPED_KEYS = {
    "ports": "not published on the host: the other services reach it by name on the task's network",
    "container_name": "dropped: each episode runs its own project, so names must not collide",
    "restart": "dropped: a service lives as long as its episode (its lifeline)",
}
#: Top-level keys of a compose file Bandpass runs (``name``, ``version`` are ignored by Compose v2 too).
TOP_KEYS = frozenset({"services", "volumes", "name", "version"})

_VAR = re.compile(
    r"\$(?:\{(?P<braced>[A-Za-z_][A-Za-z0-9_]*)(?P<op>:?[-?+])?[^}]*\}|(?P<bare>[A-Za-z_][A-Za-z0-9_]*))"
)


@dataclass(frozen=True)
class ServiceInfo:
    """One service besides ``main``: built from a context under ``environment/`` or a named image."""

    name: str
    build_context: str | None = None  # relative to environment/ (posix), when it is built
    dockerfile: str = "Dockerfile"  # relative to the context
    build_args: tuple[tuple[str, str], ...] = ()
    target: str | None = None
    image: str | None = None  # a named image (used as-is when built too: the tag compose would give it)
    healthcheck: bool = False


@dataclass
class ComposeInfo:
    """What the task's compose file asks for, as far as the files tell."""

    services: list[ServiceInfo] = field(default_factory=list)
    main_depends_on: list[str] = field(default_factory=list)
    main_working_dir: str | None = None
    #: Variables the file takes from the host's environment (Bandpass does not pass it on).
    host_variables: list[str] = field(default_factory=list)

    @property
    def names(self) -> list[str]:
        return [s.name for s in self.services]


def _where(service: str, key: str) -> str:
    return f"services.{service}.{key}"


def _variables(node: Any) -> list[tuple[str, bool]]:
    """(variable, has a default) for every ``$VAR`` / ``${VAR...}`` in the file's strings (``$$`` escaped)."""
    out: list[tuple[str, bool]] = []
    if isinstance(node, dict):
        for k, v in node.items():
            out += _variables(k) + _variables(v)
    elif isinstance(node, list):
        for v in node:
            out += _variables(v)
    elif isinstance(node, str):
        for m in _VAR.finditer(node.replace("$$", "")):
            name = m.group("braced") or m.group("bare")
            out.append((name, bool(m.group("op") and m.group("op").lstrip(":") in ("-", "+"))))
    return out


def _dotenv_names(env_dir: Path) -> set[str]:
    """Names the environment directory's ``.env`` file sets (Compose reads it for interpolation)."""
    try:
        text = (env_dir / ".env").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return set()
    names = set()
    for line in text.splitlines():
        line = line.strip().removeprefix("export ").strip()
        if line and not line.startswith("#") and "=" in line:
            names.add(line.split("=", 1)[0].strip())
    return names


def _inside(env_dir: Path, source: str) -> bool:
    """A bind-mount source (relative to the compose file's folder) that stays inside ``environment/``."""
    if source.startswith(("/", "~")) or "$" in source:
        return False
    resolved = posixpath.normpath(posixpath.join(".", source))
    return not (resolved == ".." or resolved.startswith("../"))


def _volume_problem(env_dir: Path, service: str, entry: Any, named: set[str]) -> tuple[str, str] | None:
    """('unsupported'|'warning', message) for a volume entry that is not a named volume or a file of the
    task's own ``environment/`` (those are fine; the latter is mounted read-only)."""
    source: str | None
    if isinstance(entry, str):
        parts = entry.split(":")
        source = parts[0] if len(parts) > 1 else None  # a bare "/data" is an anonymous volume
        read_only = len(parts) > 2 and "ro" in parts[2].split(",")
        kind = "bind" if source and (source.startswith((".", "/", "~")) or source not in named) else "volume"
    elif isinstance(entry, dict):
        kind = str(entry.get("type", "volume"))
        source = entry.get("source")
        read_only = bool(entry.get("read_only"))
    else:
        return "unsupported", f"{_where(service, 'volumes')}: {entry!r} is not a volume entry"
    if kind in ("volume", "tmpfs") or source is None:
        return None
    if kind != "bind":
        return "unsupported", f"{_where(service, 'volumes')}: a {kind} mount"
    if "docker.sock" in str(source):
        return "unsupported", (
            f"{_where(service, 'volumes')}: mounts the Docker socket ({source}): a service would control "
            "the engine every episode runs on"
        )
    if not _inside(env_dir, str(source)):
        return "unsupported", (
            f"{_where(service, 'volumes')}: bind-mounts {source} from the host (only files under the "
            "task's environment/ can be mounted)"
        )
    if not read_only:
        return "warning", (
            f"{_where(service, 'volumes')}: {source} is mounted read-only (the task's files are its "
            "version; a service writing them would change the task)"
        )
    return None


def read_compose(
    env_dir: Path, task_env: dict[str, str] | None = None
) -> tuple[ComposeInfo | None, list[str], list[str], list[str]]:
    """Reads ``env_dir/docker-compose.yaml``: (info, problems, warnings, unsupported), each message one line
    naming the file and the key. ``info`` is None when the file cannot be read as a compose file."""
    rel = f"environment/{COMPOSE_FILE}"
    problems: list[str] = []
    warnings: list[str] = []
    unsupported: list[str] = []
    try:
        doc = yaml.safe_load((env_dir / COMPOSE_FILE).read_text(encoding="utf-8"))
    except OSError as exc:
        return None, [f"{rel}: cannot be read: {exc.strerror or exc}"], [], []
    except yaml.YAMLError as exc:
        return None, [f"{rel}: invalid YAML: {str(exc).splitlines()[0]}"], [], []
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        return None, [f"{rel}: expected a mapping with services, got {type(doc).__name__}"], [], []
    services = doc.get("services") or {}
    if not isinstance(services, dict) or not all(isinstance(v, dict | type(None)) for v in services.values()):
        return None, [f"{rel}: services: expected a mapping of service names to tables"], [], []

    info = ComposeInfo()
    for key in doc:
        if key not in TOP_KEYS and not str(key).startswith("x-"):
            what = "networks of its own" if key == "networks" else f"top-level {key}"
            unsupported.append(
                f"{rel}: {key}: {what} (Bandpass runs the services on one network per episode)"
            )
    named = set((doc.get("volumes") or {}) if isinstance(doc.get("volumes"), dict) else {})
    known = {**{s: None for s in services}, MAIN: None}
    for name, raw in services.items():
        svc: dict[str, Any] = raw or {}
        name = str(name)
        for key, what in PRIVILEGED_KEYS.items():
            if key not in svc or (key == "networks" and _default_only(svc[key])):
                continue
            if key == "network_mode" and name != MAIN and svc[key] in ("bridge", "default"):
                continue
            unsupported.append(f"{rel}: {_where(name, key)}: {what}: this machine does not give it to a task")
        platform = str(svc.get("platform", ""))
        if platform.lower().startswith("windows"):
            unsupported.append(
                f"{rel}: {_where(name, 'platform')}: {platform!r}: Bandpass runs Linux containers"
            )
        deploy: dict[str, Any] = svc["deploy"] if isinstance(svc.get("deploy"), dict) else {}
        if ((deploy.get("resources") or {}).get("reservations") or {}).get("devices"):
            unsupported.append(
                f"{rel}: {_where(name, 'deploy.resources.reservations.devices')}: GPUs or devices"
            )
        for entry in svc.get("volumes") or []:
            found = _volume_problem(env_dir, name, entry, named)
            if found is not None:
                (unsupported if found[0] == "unsupported" else warnings).append(f"{rel}: {found[1]}")
        deps = svc.get("depends_on") or []
        dep_names = list(deps) if isinstance(deps, dict | list) else []
        for dep in dep_names:
            if str(dep) not in known:
                problems.append(f"{rel}: {_where(name, 'depends_on')}: {dep!r} is not a service of this file")
        if name == MAIN:
            info.main_depends_on = [str(d) for d in dep_names]
            wd = svc.get("working_dir")
            if isinstance(wd, str) and wd.startswith("/"):
                info.main_working_dir = wd
            for key in svc:
                if key in MAIN_HONOURED or key in PRIVILEGED_KEYS:
                    continue
                if key in MAIN_HARMLESS:
                    warnings.append(f"{rel}: {_where(MAIN, key)}: {MAIN_HARMLESS[key]}")
                else:
                    unsupported.append(
                        f"{rel}: {_where(MAIN, key)}: changes what the agent's container is (Bandpass "
                        "builds main from environment/Dockerfile and task.toml)"
                    )
            continue
        if MAIN in [str(d) for d in dep_names]:
            unsupported.append(
                f"{rel}: {_where(name, 'depends_on')}: waits for main (Bandpass starts main after the "
                "services)"
            )
        for key, what in DROPPED_KEYS.items():
            if key in svc:
                warnings.append(f"{rel}: {_where(name, key)}: {what}")
        service = _service_info(env_dir, rel, name, svc, problems, unsupported)
        if service is not None:
            info.services.append(service)

    provided = set(HARBOR_VARIABLES) | set(task_env or {}) | _dotenv_names(env_dir)
    passed = [(var, False) for var in _passed_through(services)]
    for var, has_default in [*_variables(doc), *passed]:
        if var in provided or var in info.host_variables:
            continue
        info.host_variables.append(var)
        fallback = "its default" if has_default else "an empty value"
        warnings.append(
            f"{rel}: ${{{var}}}: Harbor takes it from the host's environment; Bandpass never passes the "
            "host's "
            f"environment to a task, so it gets {fallback} (set it in [environment].env or environment/.env)"
        )
    return info, problems, warnings, unsupported


def _passed_through(services: dict[str, Any]) -> list[str]:
    """Variables a service's ``environment`` takes from the host by name alone (``- KEY``, ``KEY:``)."""
    out: list[str] = []
    for svc in services.values():
        env = (svc or {}).get("environment")
        if isinstance(env, list):
            out += [str(e) for e in env if isinstance(e, str) and "=" not in e]
        elif isinstance(env, dict):
            out += [str(k) for k, v in env.items() if v is None]
    return out


def resolve_env(values: dict[str, str]) -> tuple[dict[str, str], list[str]]:
    """A task's ``[environment] env`` as the compose file sees it: Harbor resolves ``${VAR}`` in these from
    the host's environment, Bandpass from nothing (``${VAR:-default}`` gives the default). Returns the values
    and the host variables they named."""
    named: list[str] = []

    def sub(m: re.Match[str]) -> str:
        name = m.group("braced") or m.group("bare")
        named.append(name)
        whole = m.group(0)
        if m.group("op") and m.group("op").lstrip(":") == "-":
            return whole[whole.index("-", 2 + len(name)) + 1 : -1]
        return ""

    return {k: _VAR.sub(sub, v.replace("$$", "\0")).replace("\0", "$") for k, v in values.items()}, named


def _default_only(networks: Any) -> bool:
    if isinstance(networks, list):
        return all(n == "default" for n in networks)
    if isinstance(networks, dict):
        return all(n == "default" and not v for n, v in networks.items())
    return False


def _service_info(
    env_dir: Path, rel: str, name: str, svc: dict[str, Any], problems: list[str], unsupported: list[str]
) -> ServiceInfo | None:
    build = svc.get("build")
    image = svc.get("image")
    if image is not None and not isinstance(image, str):
        problems.append(f"{rel}: {_where(name, 'image')}: expected an image name, got {image!r}")
        return None
    hc = svc.get("healthcheck")
    healthy = isinstance(hc, dict) and not hc.get("disable") and bool(hc.get("test"))
    if build is None:
        if not image:
            problems.append(f"{rel}: services.{name}: has neither an image nor a build context")
            return None
        return ServiceInfo(name, image=image, healthcheck=healthy)
    if isinstance(build, str):
        build = {"context": build}
    if not isinstance(build, dict):
        problems.append(f"{rel}: {_where(name, 'build')}: expected a path or a table, got {build!r}")
        return None
    context = str(build.get("context", "."))
    if "://" in context or context.startswith("git@"):
        unsupported.append(
            f"{rel}: {_where(name, 'build.context')}: {context!r}: a remote context cannot be fetched here"
        )
        return None
    if not _inside(env_dir, context):
        unsupported.append(
            f"{rel}: {_where(name, 'build.context')}: {context!r} is outside the task's environment/"
        )
        return None
    ctx = posixpath.normpath(context)
    if not (env_dir / ctx).is_dir():
        problems.append(
            f"{rel}: {_where(name, 'build.context')}: {context!r} is not a folder under environment/"
        )
        return None
    dockerfile = str(build.get("dockerfile", "Dockerfile"))
    if "dockerfile_inline" in build:
        unsupported.append(
            f"{rel}: {_where(name, 'build.dockerfile_inline')}: an inline Dockerfile is not built"
        )
        return None
    if not (env_dir / ctx / dockerfile).is_file():
        problems.append(f"{rel}: {_where(name, 'build.dockerfile')}: {ctx}/{dockerfile} is missing")
        return None
    raw_args = build.get("args") or {}
    if isinstance(raw_args, list):
        raw_args = {str(a).partition("=")[0]: str(a).partition("=")[2] for a in raw_args}
    args = tuple(sorted((str(k), "" if v is None else str(v)) for k, v in dict(raw_args).items()))
    target = build.get("target")
    return ServiceInfo(
        name,
        build_context=ctx,
        dockerfile=dockerfile,
        build_args=args,
        target=str(target) if target else None,
        image=image,
        healthcheck=healthy,
    )
