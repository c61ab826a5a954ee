"""Images: the offline base image, per-task-version images, and answer-leak checks.

No registry is reachable from the machines Bandpass runs on, so a task whose Dockerfile says
``FROM python:3.12-slim`` can only be built by substituting a local image. That substitution changes the
environment the task author meant (Python 3.11 instead of 3.12, Debian instead of Ubuntu), so it is never
silent: :func:`rewrite_from` reports every substitution and the caller records it on the task version as a
validity risk the curator sees.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import subprocess
import tempfile
import threading
import time
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors

from ..core.events import BuildLog, EventBus
from .taskdir import TaskSpec

BASE_TAG = "bandpass/base:bookworm"
DEBIAN_MIRROR = "http://deb.debian.org/debian"
BASE_SUITE = "bookworm"

#: What task authors' Dockerfiles usually assume is present. python3-pip because the python:* images the
#: aliases stand in for ship pip; the rest is what test.sh scripts reach for.
BASE_PACKAGES: tuple[str, ...] = (
    "bash",
    "coreutils",
    "python3",
    "python3-pytest",
    "python3-pip",
    "procps",
    "make",
    "gawk",
    "jq",
    "diffutils",
    "less",
    "ca-certificates",
)

#: Image config for the imported rootfs. ``docker import`` gives an image with no Env/Cmd at all; these
#: make it behave like the official debian images the aliases replace.
BASE_CHANGES: tuple[str, ...] = (
    "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "ENV LANG=C.UTF-8",
    'CMD ["bash"]',
)

#: FROM references that cannot be pulled here, mapped to local images. A workspace's bandpass.toml
#: ``[images.aliases]`` extends/overrides this (the caller merges and passes the result).
DEFAULT_IMAGE_ALIASES: dict[str, str] = {
    ref: BASE_TAG
    for ref in (
        "debian:bookworm-slim",
        "debian:bookworm",
        "debian:12",
        "debian:12-slim",
        "debian:stable-slim",
        "debian:latest",
        "ubuntu:24.04",
        "ubuntu:22.04",
        "ubuntu:latest",
        "python:3.11-slim",
        "python:3.11-slim-bookworm",
        "python:3.11",
        "python:3.12-slim",
        "python:3.12",
        "python:3-slim",
        "python:3.13-slim",
    )
}

LogFn = Callable[[str], None]


# --------------------------------------------------------------------------------------------- FROM rewrite

_FROM_RE = re.compile(
    r"^(?P<head>\s*FROM\s+(?:--[A-Za-z-]+=\S+\s+)*)(?P<image>[^\s#]+)(?P<tail>.*)$",
    re.IGNORECASE,
)
_AS_RE = re.compile(r"^\s+AS\s+(?P<name>\S+)", re.IGNORECASE)


def normalize_ref(ref: str) -> str:
    """Canonical ``name:tag`` for matching: drops ``docker.io/``, ``library/``, a digest; adds ``:latest``.

    A digest pin is dropped for matching because the alias replaces the image anyway; the original text
    (with its digest) is what gets reported.
    """
    ref = ref.strip().split("@", 1)[0]
    for prefix in ("docker.io/", "index.docker.io/", "registry-1.docker.io/"):
        if ref.startswith(prefix):
            ref = ref[len(prefix) :]
            break
    if ref.startswith("library/"):
        ref = ref[len("library/") :]
    last = ref.rsplit("/", 1)[-1]
    if ":" not in last:
        ref += ":latest"
    return ref


def rewrite_from(
    dockerfile_text: str,
    aliases: Mapping[str, str],
    *,
    is_local: Callable[[str], bool] | Collection[str] | None = None,
) -> tuple[str, list[tuple[str, str]]]:
    """Replace each ``FROM`` image that is not available locally but has an alias.

    Returns the new text and the ``(original, alias)`` pairs used, in order, without duplicates. Stage
    names (``FROM builder``), ``scratch`` and references containing variables are left alone: the first two
    are not images, and ARG-substituted names cannot be resolved without evaluating the build.
    ``is_local`` says which references already exist in the engine (callable or collection); a local image
    always wins over an alias, so a curator who loads the real image gets the real environment.
    """
    norm_aliases = {normalize_ref(k): v for k, v in aliases.items()}
    local: Callable[[str], bool]
    if is_local is None:

        def nothing_local(_ref: str) -> bool:
            return False

        local = nothing_local
    elif callable(is_local):
        local = is_local
    else:
        local_set = {normalize_ref(r) for r in is_local}

        def in_local_set(ref: str) -> bool:
            return normalize_ref(ref) in local_set

        local = in_local_set

    stages: set[str] = set()
    used: list[tuple[str, str]] = []
    out: list[str] = []
    continued = False
    for line in dockerfile_text.splitlines(keepends=True):
        body = line.rstrip("\r\n")
        was_continued, continued = continued, body.rstrip().endswith("\\")
        if was_continued or body.lstrip().startswith("#"):
            out.append(line)
            continue
        m = _FROM_RE.match(body)
        if not m:
            out.append(line)
            continue
        image, tail = m.group("image"), m.group("tail")
        as_match = _AS_RE.match(tail)
        replacement = None
        if image.lower() != "scratch" and "$" not in image and image not in stages:
            target = norm_aliases.get(normalize_ref(image))
            if target is not None and not local(image):
                replacement = target
        if as_match:
            stages.add(as_match.group("name"))
        if replacement is None:
            out.append(line)
            continue
        if (image, replacement) not in used:
            used.append((image, replacement))
        newline = line[len(body) :]
        out.append(f"{m.group('head')}{replacement}{tail}{newline}")
    return "".join(out), used


def from_refs(dockerfile_text: str) -> list[str]:
    """Images named by ``FROM`` lines (stage references, ``scratch`` and ``$VAR`` names excluded)."""
    refs: list[str] = []
    stages: set[str] = set()
    continued = False
    for line in dockerfile_text.splitlines():
        was_continued, continued = continued, line.rstrip().endswith("\\")
        if was_continued or line.lstrip().startswith("#"):
            continue
        m = _FROM_RE.match(line)
        if not m:
            continue
        image = m.group("image")
        if image.lower() != "scratch" and "$" not in image and image not in stages and image not in refs:
            refs.append(image)
        as_match = _AS_RE.match(m.group("tail"))
        if as_match:
            stages.add(as_match.group("name"))
    return refs


# --------------------------------------------------------------------------------------------- helpers


def image_exists(client: docker.DockerClient, ref: str) -> bool:
    try:
        client.images.get(ref)
        return True
    except docker.errors.ImageNotFound:
        return False


def slugify(name: str) -> str:
    """A Docker repository component from a task directory name (lowercase, ``[a-z0-9._-]``)."""
    slug = re.sub(r"[^a-z0-9._-]+", "-", name.lower())
    slug = re.sub(r"[._-]{2,}", "-", slug).strip("._-")
    return slug[:100] or "task"


def task_image_tag(task_dir: Path, version_hash: str) -> str:
    return f"bandpass-task/{slugify(task_dir.name)}:{version_hash[:16]}"


# --------------------------------------------------------------------------------------------- base image


def _run_streaming(cmd: list[str], on_log: LogFn | None, *, timeout: float) -> int:
    """Run a command, feeding each output line to ``on_log`` as it arrives (debootstrap is chatty and slow;
    the curator should see it move)."""
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace"
    )
    deadline = time.monotonic() + timeout
    assert proc.stdout is not None
    for line in proc.stdout:
        if on_log:
            on_log(line.rstrip("\n"))
        if time.monotonic() > deadline:
            proc.kill()
            break
    try:
        return proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
        return -9


def _ensure_debootstrap(on_log: LogFn | None) -> str:
    found = shutil.which("debootstrap") or (
        os.path.exists("/usr/sbin/debootstrap") and "/usr/sbin/debootstrap"
    )
    if found:
        return str(found)
    env_cmd = ["env", "DEBIAN_FRONTEND=noninteractive"]
    if _run_streaming([*env_cmd, "apt-get", "update", "-qq"], on_log, timeout=300) != 0:
        raise RuntimeError("apt-get update failed while installing debootstrap")
    if _run_streaming([*env_cmd, "apt-get", "install", "-y", "-qq", "debootstrap"], on_log, timeout=300) != 0:
        raise RuntimeError("apt-get install debootstrap failed")
    found = shutil.which("debootstrap") or "/usr/sbin/debootstrap"
    return str(found)


def _mounts_under(root: Path) -> list[str]:
    root_s = str(root.resolve())
    try:
        lines = Path("/proc/mounts").read_text().splitlines()
    except OSError:
        return []
    points = [ln.split()[1].replace("\\040", " ") for ln in lines if len(ln.split()) > 1]
    return sorted((p for p in points if p == root_s or p.startswith(root_s + "/")), key=len, reverse=True)


def _remove_rootfs(root: Path, on_log: LogFn | None) -> None:
    """Delete a debootstrap target. A debootstrap that died mid-way can leave /proc or /sys mounted inside
    it; deleting through a live mount would be destructive, so unmount first and refuse if that fails."""
    for point in _mounts_under(root):
        subprocess.run(["umount", "-l", point], capture_output=True)
    remaining = _mounts_under(root)
    if remaining:
        if on_log:
            on_log(f"[bandpass] not deleting {root}: still mounted: {', '.join(remaining)}")
        return
    shutil.rmtree(root, ignore_errors=True)


def _check_import_result(raw: Any) -> str:
    """The import endpoint answers 200 even on failure, with the error inside its JSON stream."""
    text = raw if isinstance(raw, str) else json.dumps(raw)
    image_id = ""
    for chunk in text.splitlines():
        chunk = chunk.strip()
        if not chunk:
            continue
        try:
            obj = json.loads(chunk)
        except json.JSONDecodeError:
            continue
        if obj.get("error") or obj.get("errorDetail"):
            raise RuntimeError(f"docker import failed: {obj.get('error') or obj.get('errorDetail')}")
        if isinstance(obj.get("status"), str) and obj["status"].startswith("sha256:"):
            image_id = obj["status"]
    return image_id


def import_rootfs(
    client: docker.DockerClient,
    rootfs_dir: Path,
    tag: str,
    *,
    changes: Iterable[str] = BASE_CHANGES,
) -> str:
    """``tar -C rootfs_dir -c . | docker import`` through the SDK; returns the image id.

    The tarball is written by GNU tar (it keeps owners, modes, device nodes, hard links and xattrs the
    way debootstrap made them, which Python's tarfile does not fully) to a temp file next to the rootfs,
    then sent with ``import_image_from_file`` (no request timeout, known length). Streaming tar's stdout
    straight in as a chunked request also works but turns a tar failure into a half-imported image.
    """
    repository, _, tag_part = tag.rpartition(":")
    if not repository or "/" in tag_part:
        repository, tag_part = tag, "latest"
    fd, tar_path = tempfile.mkstemp(prefix="bandpass-rootfs-", suffix=".tar", dir=rootfs_dir.parent)
    os.close(fd)
    try:
        proc = subprocess.run(
            ["tar", "--numeric-owner", "--xattrs", "-C", str(rootfs_dir), "-cf", tar_path, "."],
            capture_output=True,
            text=True,
        )
        if proc.returncode != 0:
            raise RuntimeError(f"tar of {rootfs_dir} failed: {proc.stderr.strip()[-300:]}")
        raw = client.api.import_image_from_file(
            tar_path, repository=repository, tag=tag_part, changes=list(changes)
        )
        image_id = _check_import_result(raw)
        if image_id:
            return image_id
        imported = client.images.get(tag).id
        if imported is None:
            raise RuntimeError(f"docker import of {rootfs_dir} left no image id for {tag}")
        return imported
    finally:
        with contextlib.suppress(OSError):
            os.unlink(tar_path)


def build_base_image(
    client: docker.DockerClient,
    tag: str = BASE_TAG,
    *,
    force: bool = False,
    packages: Iterable[str] = BASE_PACKAGES,
    on_log: LogFn | None = None,
    mirror: str = DEBIAN_MIRROR,
    suite: str = BASE_SUITE,
    timeout_sec: float = 900,
) -> str:
    """Build the offline base image with debootstrap (~1 min, ~280 MB) unless ``tag`` already exists.

    Returns the tag. Raises RuntimeError on failure: unlike task builds this is an operator action
    (``bandpass doctor --fix``), so a loud error is the right answer.
    """
    if not force and image_exists(client, tag):
        if on_log:
            on_log(f"[bandpass] {tag} present, not rebuilding")
        return tag
    debootstrap = _ensure_debootstrap(on_log)
    work = Path(tempfile.mkdtemp(prefix="bandpass-base-", dir=os.environ.get("BANDPASS_TMP") or "/var/tmp"))
    rootfs = work / "rootfs"
    try:
        cmd = [
            debootstrap,
            "--variant=minbase",
            f"--include={','.join(packages)}",
            suite,
            str(rootfs),
            mirror,
        ]
        if on_log:
            on_log("[bandpass] " + " ".join(cmd))
        rc = _run_streaming(cmd, on_log, timeout=timeout_sec)
        if rc != 0:
            raise RuntimeError(f"debootstrap exited {rc}; see the build log")
        # pip in the python:* images installs system-wide; Debian's PEP 668 marker would make the same
        # `RUN pip install ...` fail here only because of the alias.
        for marker in rootfs.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
            marker.unlink()
        for cache in ("var/cache/apt/archives", "var/lib/apt/lists"):
            for f in (rootfs / cache).glob("*"):
                if f.is_file():
                    f.unlink()
        if on_log:
            on_log(f"[bandpass] importing rootfs as {tag}")
        import_rootfs(client, rootfs, tag)
        if on_log:
            on_log(f"[bandpass] {tag} ready")
        return tag
    finally:
        _remove_rootfs(work, on_log)


# --------------------------------------------------------------------------------------------- task images


@dataclass
class BuildResult:
    tag: str
    ok: bool
    log: str
    aliases_used: list[tuple[str, str]] = field(default_factory=list)
    cached: bool = False
    duration: float = 0.0
    #: Short reason when ok is False ("timeout", "error", "no Dockerfile", ...): the log has the detail.
    error: str | None = None


class _LineSplitter:
    """Build output arrives as JSON chunks holding partial or multiple lines; emit whole lines."""

    def __init__(self, emit: LogFn) -> None:
        self._buf = ""
        self._emit = emit

    def feed(self, text: str) -> None:
        self._buf += text.replace("\r\n", "\n")
        *lines, self._buf = self._buf.split("\n")
        for line in lines:
            self._emit(line)

    def flush(self) -> None:
        if self._buf:
            self._emit(self._buf)
            self._buf = ""


def _shutdown_response(resp: Any) -> None:
    """Cut the HTTP connection of a streaming build. The daemon cancels a build whose client went away,
    which is the only way to stop a legacy-builder build from outside."""
    import socket

    candidates = [
        getattr(getattr(resp, "raw", None), "_connection", None),
        getattr(getattr(getattr(resp, "raw", None), "_fp", None), "fp", None),
    ]
    for cand in candidates:
        sock = getattr(cand, "sock", None)
        if sock is None:
            raw = getattr(cand, "raw", None)
            sock = getattr(raw, "_sock", None)
        if sock is not None:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
    with contextlib.suppress(Exception):
        resp.close()


def build_task_image(
    client: docker.DockerClient,
    task_dir: Path,
    version_hash: str,
    *,
    aliases: Mapping[str, str] | None = None,
    timeout_sec: float = 600,
    network: str = "host",
    on_log: LogFn | None = None,
    bus: EventBus | None = None,
) -> BuildResult:
    """Build ``task_dir/environment`` as ``bandpass-task/<slug>:<hash[:16]>``; cached per version hash.

    Never raises for a failing build (bad RUN, missing base, timeout): the result carries ok=False and the
    full log, and the caller records ``infra_error:image_build_failed``. The task's files are not touched:
    the rewritten Dockerfile lives in a temp file the SDK injects into the context tarball.
    ``network`` is the *build* network (``host`` so ``RUN apt-get install`` reaches the mirror); episodes
    get their own, normally none.
    """
    task_dir = Path(task_dir)
    context = task_dir / "environment"
    return build_image(
        client,
        context,
        context / "Dockerfile",
        task_image_tag(task_dir, version_hash),
        labels={"bandpass.task": slugify(task_dir.name), "bandpass.version": version_hash},
        aliases=aliases,
        timeout_sec=timeout_sec,
        network=network,
        on_log=on_log,
        bus=bus,
    )


def build_image(
    client: docker.DockerClient,
    context: Path,
    dockerfile: Path,
    tag: str,
    *,
    labels: Mapping[str, str] | None = None,
    aliases: Mapping[str, str] | None = None,
    build_args: Mapping[str, str] | None = None,
    target: str | None = None,
    timeout_sec: float = 600,
    network: str = "host",
    on_log: LogFn | None = None,
    bus: EventBus | None = None,
) -> BuildResult:
    """Build ``dockerfile`` over ``context`` as ``tag`` (cached: an existing tag is the build), every
    ``FROM`` this machine cannot pull rewritten through the alias map and reported. What
    :func:`build_task_image` and a compose service's build (:func:`build_service_images`) share."""
    aliases = DEFAULT_IMAGE_ALIASES if aliases is None else aliases
    started = time.monotonic()
    lines: list[str] = []

    def emit(line: str) -> None:
        lines.append(line)
        if on_log:
            on_log(line)
        if bus is not None:
            bus.publish(BuildLog(image=tag, line=line))

    def result(
        ok: bool, used: list[tuple[str, str]], *, cached: bool = False, error: str | None = None
    ) -> BuildResult:
        return BuildResult(
            tag=tag,
            ok=ok,
            log="\n".join(lines),
            aliases_used=used,
            cached=cached,
            duration=time.monotonic() - started,
            error=error,
        )

    try:
        existing = client.images.get(tag)
    except docker.errors.ImageNotFound:
        existing = None
    if existing is not None:
        found = (existing.attrs.get("Config") or {}).get("Labels") or {}
        try:
            used = [tuple(p) for p in json.loads(found.get("bandpass.aliases", "[]"))]
        except (ValueError, TypeError):
            used = []
        emit(f"[bandpass] {tag} cached")
        return result(True, used, cached=True)

    if not dockerfile.is_file():
        emit(f"[bandpass] no Dockerfile at {dockerfile}")
        return result(False, [], error="no Dockerfile")

    text, used = rewrite_from(dockerfile.read_text(), aliases, is_local=lambda ref: image_exists(client, ref))
    for original, alias in used:
        emit(f"[bandpass] FROM {original} -> {alias} (alias: {original} cannot be pulled here)")
        if not image_exists(client, alias):
            emit(f"[bandpass] alias target {alias} is missing — `bandpass doctor --fix` builds it")
    for ref in from_refs(text):
        if ref not in {a for _, a in used} and not image_exists(client, ref):
            emit(
                f"[bandpass] FROM {ref}: not in the engine and no alias; no registry is reachable here "
                "— add it to [images.aliases] in bandpass.toml"
            )

    with tempfile.TemporaryDirectory(prefix="bandpass-build-") as tmp:
        df_path = Path(tmp) / "Dockerfile"
        df_path.write_text(text)
        return _stream_build(
            client,
            context=context,
            dockerfile=df_path,
            tag=tag,
            labels={**(labels or {}), "bandpass.aliases": json.dumps(used)},
            network=network,
            timeout_sec=timeout_sec,
            emit=emit,
            finish=lambda ok, err: result(ok, used, error=err),
            build_args=dict(build_args or {}) or None,
            target=target,
        )


@dataclass
class ServiceImages:
    """The images of a compose task's services (engine/tasks/compose.py): the tag each service runs, the
    aliases used, and the failures (a build that failed, an ``image:`` this machine cannot pull)."""

    tags: dict[str, str] = field(default_factory=dict)
    builds: dict[str, BuildResult] = field(default_factory=dict)
    failed: dict[str, BuildResult] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.failed

    @property
    def aliases_used(self) -> list[tuple[str, str]]:
        out: list[tuple[str, str]] = []
        for b in self.builds.values():
            out += [a for a in b.aliases_used if a not in out]
        return out

    def failure(self) -> tuple[str, BuildResult] | None:
        return next(iter(self.failed.items()), None)


def service_image_tag(task_dir: Path, service: str, version_hash: str) -> str:
    return f"bandpass-svc/{slugify(task_dir.name)}-{slugify(service)}:{version_hash[:16]}"


def build_service_images(
    client: docker.DockerClient,
    spec: TaskSpec,
    version_hash: str,
    *,
    aliases: Mapping[str, str] | None = None,
    timeout_sec: float = 600,
    bus: EventBus | None = None,
) -> ServiceImages:
    """Builds each service of the task's compose file that has a ``build:`` context (offline, its FROMs
    through the alias map, cached per version) and finds each ``image:`` service's image in the engine (or
    its alias): no registry is reachable here, so an image this machine does not hold is a failure that
    says so — never a pull."""
    out = ServiceImages()
    if spec.compose is None:
        return out
    aliases = DEFAULT_IMAGE_ALIASES if aliases is None else aliases
    env_dir = spec.environment_dir
    for svc in spec.compose.services:
        if svc.build_context is not None:
            context = env_dir / svc.build_context
            res = build_image(
                client,
                context,
                context / svc.dockerfile,
                service_image_tag(spec.path, svc.name, version_hash),
                labels={"bandpass.task": slugify(spec.path.name), "bandpass.service": svc.name},
                aliases=aliases,
                build_args=dict(svc.build_args),
                target=svc.target,
                timeout_sec=timeout_sec,
                bus=bus,
            )
            res.log = f"[bandpass] service {svc.name}: build of environment/{svc.build_context}\n{res.log}"
            out.builds[svc.name] = res
            if res.ok:
                out.tags[svc.name] = res.tag
            else:
                out.failed[svc.name] = res
            continue
        ref = str(svc.image)
        alias = {normalize_ref(k): v for k, v in aliases.items()}.get(normalize_ref(ref))
        if image_exists(client, ref):
            out.tags[svc.name] = ref
        elif alias is not None and image_exists(client, alias):
            out.tags[svc.name] = alias
            out.builds[svc.name] = BuildResult(
                tag=alias,
                ok=True,
                log=f"[bandpass] service {svc.name}: image {ref} -> {alias} (alias)",
                aliases_used=[(ref, alias)],
                cached=True,
            )
        else:
            out.failed[svc.name] = BuildResult(
                tag=ref,
                ok=False,
                log=f"[bandpass] service {svc.name}: image {ref}: not in the engine and no alias; no "
                "registry "
                "is reachable here — add it to [images.aliases] in bandpass.toml or load it "
                "(`docker load`)",
                error="no image",
            )
    return out


def _stream_build(
    client: docker.DockerClient,
    *,
    context: Path,
    dockerfile: Path,
    tag: str,
    labels: dict[str, str],
    network: str,
    timeout_sec: float,
    emit: LogFn,
    finish: Callable[[bool, str | None], BuildResult],
    build_args: dict[str, str] | None = None,
    target: str | None = None,
) -> BuildResult:
    """Run the build on a worker thread so the caller's deadline holds even while a RUN step is silent.

    A dedicated client is used so its streaming response can be cut on timeout without disturbing the
    shared client's connection pool.
    """
    # Same engine as ``client`` (both come from the environment); no read timeout: our deadline rules.
    api = docker.from_env(
        version=client.api.api_version,
        timeout=None,  # type: ignore[arg-type]  # docker-py passes None on to requests (no read timeout); its stub says int
    ).api
    holder: dict[str, Any] = {}
    real_post = api._post  # type: ignore[attr-defined]  # docker-py's private request method, not in its stub

    def capturing_post(*args: Any, **kwargs: Any) -> Any:
        resp = real_post(*args, **kwargs)
        holder["response"] = resp
        return resp

    api._post = capturing_post  # type: ignore[attr-defined]  # wraps docker-py's private request method
    state: dict[str, Any] = {"error": None, "exc": None, "done": False}
    splitter = _LineSplitter(emit)
    stop = threading.Event()

    def worker() -> None:
        try:
            for chunk in api.build(
                path=str(context),
                dockerfile=str(dockerfile),
                tag=tag,
                rm=True,
                forcerm=True,
                decode=True,
                network_mode=network,
                labels=labels,
                buildargs=build_args,
                target=target,
            ):
                if stop.is_set():
                    break
                if "stream" in chunk:
                    splitter.feed(chunk["stream"])
                elif "error" in chunk or "errorDetail" in chunk:
                    splitter.flush()
                    msg = chunk.get("error") or (chunk.get("errorDetail") or {}).get("message", "")
                    state["error"] = str(msg).strip()
                    emit(f"[error] {state['error']}")
                elif "status" in chunk:
                    splitter.feed(f"{chunk['status']} {chunk.get('progress', '')}".rstrip() + "\n")
            splitter.flush()
        except Exception as exc:  # noqa: BLE001 - connection cut, daemon gone, bad context: all are build failures here
            if not stop.is_set():
                state["exc"] = exc
        finally:
            state["done"] = True

    thread = threading.Thread(target=worker, name=f"build {tag}", daemon=True)
    thread.start()
    thread.join(timeout_sec)
    if thread.is_alive():
        stop.set()
        if "response" in holder:
            _shutdown_response(holder["response"])
        thread.join(5)
        splitter.flush()
        emit(f"[bandpass] build timed out after {timeout_sec:g} s")
        with contextlib.suppress(Exception):
            api.close()
        return finish(False, "timeout")
    with contextlib.suppress(Exception):
        api.close()
    if state["exc"] is not None:
        emit(f"[bandpass] build failed: {type(state['exc']).__name__}: {state['exc']}")
        return finish(False, "error")
    if state["error"]:
        return finish(False, "error")
    if not image_exists(client, tag):
        emit(f"[bandpass] build ended without producing {tag}")
        return finish(False, "no image")
    return finish(True, None)


# --------------------------------------------------------------------------------------------- audit helpers


def image_contains(client: docker.DockerClient, tag: str, paths: Iterable[str]) -> dict[str, bool]:
    """Which of ``paths`` exist in the image's filesystem (e.g. /tests, /solution: a leaked answer).

    Uses a created-but-never-started container and the archive HEAD endpoint, so nothing in the image
    runs and no shell is needed in it.
    """
    container = client.containers.create(
        tag, command=["true"], labels={"bandpass": "1", "bandpass.role": "probe"}
    )
    try:
        found: dict[str, bool] = {}
        for path in paths:
            url = client.api._url(  # type: ignore[attr-defined]  # docker-py's private URL builder
                "/containers/{0}/archive", container.id
            )
            resp = client.api.head(url, params={"path": path})
            found[path] = resp.status_code == 200
        return found
    finally:
        with contextlib.suppress(docker.errors.NotFound):
            container.remove(force=True)


#: Build failures that are the environment's (registry, network, daemon, disk, load), not the Dockerfile's.
_ENVIRONMENT_FAILURES = re.compile(
    r"pull access denied|manifest unknown|manifest for .* not found|repository does not exist|"
    r"failed to resolve source metadata|error pulling image|toomanyrequests|rate limit|"
    r"no registry is reachable|alias target .* is missing|dial tcp|i/o timeout|TLS handshake|"
    r"Temporary failure (?:in name resolution|resolving)|Could not resolve|no such host|"
    r"Network is unreachable|"
    r"Connection (?:refused|timed out|reset)|Could not connect to|Failed to fetch|Read timed out|"
    r"NewConnectionError|ConnectTimeoutError|Max retries exceeded|Failed to establish a new connection|"
    r"no space left on device|Cannot connect to the Docker daemon|context deadline exceeded|"
    r"No matching distribution found|Could not find a version that satisfies|"
    r"Could not fetch URL|ProxyError|SSLError",
    re.IGNORECASE,
)
#: Build failures that are the Dockerfile's own: a step that fails, a file it names that is not there.
_TASK_FAILURES = re.compile(
    r"returned a non-zero code|COPY failed|ADD failed|failed to compute cache key|"
    r"no such file or directory|dockerfile parse error|unknown instruction|failed to process|"
    r"failed to solve|executor failed running",
    re.IGNORECASE,
)


_ANSI = re.compile(r"\x1b\[[0-9;]*[A-Za-z]")
#: What a stand-in image (an alias) lacks that the author's image had: a tool, a package manager's leave.
_ALIAS_SUSPECT = re.compile(
    r"externally-managed-environment|command not found|No module named|Unable to locate package|"
    r"has no installation candidate|: not found|non-zero code: 127",
    re.IGNORECASE,
)


def build_failure_blame(build: BuildResult) -> tuple[str, str]:
    """("environment" | "task", the log line that says so) for a failed build.

    A failure the environment caused — an unreachable registry, no network for ``apt-get``, a timeout on a
    loaded machine, an image this machine cannot pull — says nothing about the task: its audit is *could not
    audit*, retried later. A Dockerfile whose own step fails or names a file the context lacks is the task's.
    A failing RUN whose output shows a network error is the environment's, and so is a step of a build whose
    FROM was replaced by a local alias that failed for want of a tool or package (``command not found``,
    pip's ``externally-managed-environment``): the stand-in, not the author's image, lacked it.
    Unknown failures are the environment's: "never a task defect" is the safe side of an unknown.
    """
    lines = [_ANSI.sub("", ln) for ln in build.log.splitlines()]  # pip and apt colour their errors
    if build.error == "no Dockerfile":
        return "task", "environment/Dockerfile is missing"
    if build.error == "timeout":
        return "environment", next((ln for ln in reversed(lines) if "timed out" in ln), "the build timed out")
    env_line = next((ln for ln in lines if _ENVIRONMENT_FAILURES.search(ln)), None)
    if env_line is not None:
        return "environment", env_line.strip()
    task_line = next((ln for ln in reversed(lines) if _TASK_FAILURES.search(ln)), None)
    suspect = next((ln for ln in lines if _ALIAS_SUSPECT.search(ln)), None)
    if task_line is not None and build.aliases_used and suspect is not None:
        # the step ran on a stand-in for the image the author chose, and failed for want of a tool or a
        # package the author's image has: the substitute, not the Dockerfile, is what failed
        subs = ", ".join(f"{a} for {o}" for o, a in build.aliases_used)
        return "environment", f"{task_line.strip()} (built on an image alias: {subs})"
    if task_line is not None:
        return "task", task_line.strip()
    return "environment", (lines[-1].strip() if lines else build.error or "the build failed")


def resolve_workdir(client: docker.DockerClient, spec: TaskSpec, tag: str) -> str:
    """Harbor's rule for a task that declares no ``workdir``: the image's own WORKDIR (Docker's "/" when it
    has none), read from the built image because a base image's WORKDIR is invisible in the task's
    Dockerfile (Terminal-Bench's base images set /app). Sets and returns ``spec.workdir``."""
    if spec.workdir_declared:
        return spec.workdir
    try:
        config = client.images.get(tag).attrs.get("Config") or {}
    except docker.errors.DockerException:
        return spec.workdir  # a prebuilt image not pulled yet: the Dockerfile's reading stands
    spec.workdir = config.get("WorkingDir") or "/"
    return spec.workdir


__all__ = [
    "BASE_CHANGES",
    "BASE_PACKAGES",
    "BASE_TAG",
    "DEFAULT_IMAGE_ALIASES",
    "BuildResult",
    "ServiceImages",
    "build_base_image",
    "build_failure_blame",
    "build_image",
    "build_service_images",
    "build_task_image",
    "from_refs",
    "image_contains",
    "image_exists",
    "import_rootfs",
    "normalize_ref",
    "resolve_workdir",
    "rewrite_from",
    "service_image_tag",
    "slugify",
    "task_image_tag",
]
