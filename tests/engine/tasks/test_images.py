"""Images: FROM aliasing, cached task builds, failing builds, base-image import, leak probes.

Docker tests use a per-run version hash and remove every image and container they make, so they can run
next to other people's tests on the same engine. The real debootstrap build (~65 s) is what
``scripts/test`` runs before the suite (its product is checked here; BANDPASS_TEST_BASE_BUILD=1 rebuilds
it in the test); another test drives the same code with a fake debootstrap that lays
down a tiny real rootfs (bash and its libraries), so the import and clean-up paths are exercised for real.
"""

from __future__ import annotations

import contextlib
import os
import stat
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from bandpass.engine.core.events import BuildLog, EventBus
from bandpass.engine.sandbox.docker_engine import DockerUnavailable, get_client
from bandpass.engine.tasks import images
from bandpass.engine.tasks.images import (
    BASE_TAG,
    DEFAULT_IMAGE_ALIASES,
    build_base_image,
    build_task_image,
    from_refs,
    image_contains,
    normalize_ref,
    rewrite_from,
)

ALIASES = {"debian:bookworm-slim": BASE_TAG, "python:3.12-slim": BASE_TAG, "ubuntu:24.04": BASE_TAG}

# ------------------------------------------------------------------------------------------ rewrite_from


def test_rewrite_plain() -> None:
    text, used = rewrite_from("FROM debian:bookworm-slim\nRUN echo hi\n", ALIASES)
    assert text == f"FROM {BASE_TAG}\nRUN echo hi\n"
    assert used == [("debian:bookworm-slim", BASE_TAG)]


def test_rewrite_multistage_as_and_stage_reference() -> None:
    src = (
        "# syntax comment FROM debian:bookworm-slim\n"
        "FROM python:3.12-slim AS build\n"
        "RUN make\n"
        "from ubuntu:24.04 as runtime\n"
        "COPY --from=build /out /out\n"
        "FROM build\n"
        "FROM scratch\n"
    )
    text, used = rewrite_from(src, ALIASES)
    lines = text.splitlines()
    assert lines[0] == "# syntax comment FROM debian:bookworm-slim"  # comments untouched
    assert lines[1] == f"FROM {BASE_TAG} AS build"
    assert lines[3] == f"from {BASE_TAG} as runtime"
    assert lines[5] == "FROM build"  # a stage, not an image
    assert lines[6] == "FROM scratch"
    assert used == [("python:3.12-slim", BASE_TAG), ("ubuntu:24.04", BASE_TAG)]


def test_rewrite_platform_flag_and_docker_io_prefix() -> None:
    text, used = rewrite_from(
        "FROM --platform=linux/amd64 docker.io/library/debian:bookworm-slim AS x\n", ALIASES
    )
    assert text == f"FROM --platform=linux/amd64 {BASE_TAG} AS x\n"
    assert used == [("docker.io/library/debian:bookworm-slim", BASE_TAG)]


def test_rewrite_keeps_local_unknown_and_variable_images() -> None:
    src = "FROM debian:bookworm-slim\nFROM alpine:3.19\nFROM $BASE\nFROM python:3.12-slim\n"
    text, used = rewrite_from(src, ALIASES, is_local={"debian:bookworm-slim"})
    assert text.splitlines() == [
        "FROM debian:bookworm-slim",
        "FROM alpine:3.19",
        "FROM $BASE",
        f"FROM {BASE_TAG}",
    ]
    assert used == [("python:3.12-slim", BASE_TAG)]
    text2, used2 = rewrite_from(src, ALIASES, is_local=lambda ref: ref.startswith("debian"))
    assert (text2, used2) == (text, used)


def test_rewrite_dedupes_and_keeps_crlf_and_continuations() -> None:
    src = (
        "FROM debian:bookworm-slim\r\n"
        "RUN echo \\\r\n"
        "  FROM debian:bookworm-slim\r\n"
        "FROM debian:bookworm-slim\r\n"
    )
    text, used = rewrite_from(src, ALIASES)
    assert text == (f"FROM {BASE_TAG}\r\nRUN echo \\\r\n  FROM debian:bookworm-slim\r\nFROM {BASE_TAG}\r\n")
    assert used == [("debian:bookworm-slim", BASE_TAG)]


def test_normalize_ref_and_from_refs() -> None:
    assert normalize_ref("debian") == "debian:latest"
    assert normalize_ref("library/debian:12@sha256:abc") == "debian:12"
    assert normalize_ref("localhost:5000/x/y") == "localhost:5000/x/y:latest"
    assert from_refs("FROM a:1 AS b\nFROM b\nFROM scratch\nFROM c\n") == ["a:1", "c"]
    assert DEFAULT_IMAGE_ALIASES["python:3-slim"] == BASE_TAG


# ------------------------------------------------------------------------------------------ docker fixtures


@pytest.fixture(scope="module")
def client() -> docker.DockerClient:
    try:
        return get_client()
    except DockerUnavailable as exc:
        pytest.fail(f"{exc} (Docker tests never skip: scripts/test starts an engine)")


@pytest.fixture(scope="module")
def made_images(client: docker.DockerClient) -> Iterator[list[str]]:
    """Tags created by this module; removed (with any container using them) at the end."""
    tags: list[str] = []
    yield tags
    for tag in tags:
        if not images.image_exists(client, tag):
            continue
        for c in client.containers.list(all=True, filters={"ancestor": tag}):
            with contextlib.suppress(docker.errors.NotFound):
                c.remove(force=True)
        with contextlib.suppress(docker.errors.ImageNotFound, docker.errors.APIError):
            client.images.remove(tag, force=True)


def _task(tmp_path: Path, name: str, dockerfile: str) -> Path:
    env = tmp_path / name / "environment"
    env.mkdir(parents=True)
    (env / "Dockerfile").write_text(dockerfile)
    return tmp_path / name


def _hash() -> str:
    return uuid.uuid4().hex + uuid.uuid4().hex


@pytest.mark.docker
def test_build_via_alias_then_cached(
    client: docker.DockerClient, made_images: list[str], tmp_path: Path
) -> None:
    task = _task(tmp_path, "Tiny Task", "FROM debian:bookworm-slim\nRUN echo hi > /hello\n")
    before = (task / "environment" / "Dockerfile").read_text()
    bus = EventBus()
    seen: list[BuildLog] = []
    bus.subscribe(BuildLog, seen.append)
    lines: list[str] = []
    version = _hash()

    first = build_task_image(client, task, version, aliases=ALIASES, bus=bus, on_log=lines.append)
    made_images.append(first.tag)
    assert first.ok, first.log
    assert not first.cached
    assert first.tag == f"bandpass-task/tiny-task:{version[:16]}"
    assert first.aliases_used == [("debian:bookworm-slim", BASE_TAG)]
    assert "Successfully tagged" in first.log
    assert (task / "environment" / "Dockerfile").read_text() == before  # task files untouched
    assert [e.line for e in seen] == lines == first.log.splitlines()
    assert all(e.image == first.tag for e in seen)
    out = client.containers.run(first.tag, ["cat", "/hello"], remove=True, network_mode="none")
    assert out == b"hi\n"

    second = build_task_image(client, task, version, aliases=ALIASES)
    assert second.ok and second.cached
    assert second.aliases_used == first.aliases_used  # recovered from the image label

    found = image_contains(client, first.tag, ["/hello", "/tests", "/solution", "/oracle"])
    assert found == {"/hello": True, "/tests": False, "/solution": False, "/oracle": False}


@pytest.mark.docker
def test_failing_run_step_is_reported_not_raised(
    client: docker.DockerClient, made_images: list[str], tmp_path: Path
) -> None:
    task = _task(tmp_path, "broken", "FROM debian:bookworm-slim\nRUN echo before-fail\nRUN exit 7\n")
    bus = EventBus()
    seen: list[str] = []
    bus.subscribe(BuildLog, lambda e: seen.append(e.line))
    res = build_task_image(client, task, _hash(), aliases=ALIASES, bus=bus)
    made_images.append(res.tag)
    assert not res.ok and not res.cached
    assert res.error == "error"
    assert "RUN exit 7" in res.log
    assert "returned a non-zero code: 7" in res.log
    assert "before-fail" in res.log
    assert seen == res.log.splitlines()
    with pytest.raises(docker.errors.ImageNotFound):
        client.images.get(res.tag)


@pytest.mark.docker
def test_missing_base_without_alias_fails_with_hint(client: docker.DockerClient, tmp_path: Path) -> None:
    task = _task(tmp_path, "nobase", "FROM bandpass-nonexistent/never:1\nRUN true\n")
    res = build_task_image(client, task, _hash(), aliases=ALIASES, timeout_sec=60)
    assert not res.ok
    assert "no alias" in res.log
    assert res.aliases_used == []


@pytest.mark.docker
def test_missing_dockerfile(client: docker.DockerClient, tmp_path: Path) -> None:
    (tmp_path / "empty" / "environment").mkdir(parents=True)
    res = build_task_image(client, tmp_path / "empty", _hash(), aliases=ALIASES)
    assert not res.ok and res.error == "no Dockerfile"


@pytest.mark.docker
def test_build_timeout_cancels_the_build(client: docker.DockerClient, tmp_path: Path) -> None:
    token = uuid.uuid4().hex
    task = _task(tmp_path, "slow", f"FROM debian:bookworm-slim\nRUN echo {token}; sleep 60\n")
    res = build_task_image(client, task, _hash(), aliases=ALIASES, timeout_sec=3)
    assert not res.ok and res.error == "timeout"  # the RUN sleeps 60 s: only the timeout ends it early
    assert token in res.log and "timed out" in res.log

    def leftover() -> list[dict[str, Any]]:
        # the low-level list: the high-level one inspects each container and races other users' removals
        return [c for c in client.api.containers(all=True) if token in (c.get("Command") or "")]

    deadline = time.monotonic() + 15
    while leftover() and time.monotonic() < deadline:
        time.sleep(0.5)
    assert leftover() == []  # the daemon cancelled the build and removed its container


# ------------------------------------------------------------------------------------------ base image

FAKE_DEBOOTSTRAP = r"""#!/bin/sh
# Stands in for debootstrap: same argv shape, lays down bash and its libraries as a minimal real rootfs.
set -e
target=$4
echo "I: fake debootstrap $*"
mkdir -p "$target/tmp"
for f in /bin/bash $(ldd /bin/bash | grep -o '/[^ ]*'); do cp --parents -L "$f" "$target"; done
ln -s bash "$target/bin/sh" 2>/dev/null || true
echo "I: Base system installed successfully."
"""


@pytest.mark.docker
def test_base_image_is_cached_by_tag(client: docker.DockerClient, monkeypatch: pytest.MonkeyPatch) -> None:
    if not images.image_exists(client, BASE_TAG):
        pytest.fail(f"{BASE_TAG} not built on this engine: run `bandpass images base`")

    def boom(_on_log: object) -> None:
        raise AssertionError("debootstrap must not run when the tag exists")

    monkeypatch.setattr(images, "_ensure_debootstrap", boom)
    assert build_base_image(client) == BASE_TAG


@pytest.mark.docker
def test_base_build_pipeline_with_fake_debootstrap(
    client: docker.DockerClient, made_images: list[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = tmp_path / "debootstrap"
    fake.write_text(FAKE_DEBOOTSTRAP)
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("BANDPASS_TMP", str(work))
    monkeypatch.setattr(images, "_ensure_debootstrap", lambda _on_log: str(fake))
    tag = f"bandpass-test/base-fake:{uuid.uuid4().hex[:12]}"
    made_images.append(tag)
    lines: list[str] = []

    assert build_base_image(client, tag, on_log=lines.append) == tag
    assert any("fake debootstrap" in ln for ln in lines)
    assert list(work.iterdir()) == []  # rootfs and tarball cleaned up
    out = client.containers.run(
        tag, ["/bin/bash", "-c", "echo $((6*7)) $LANG"], remove=True, network_mode="none"
    )
    assert out == b"42 C.UTF-8\n"
    cfg = client.images.get(tag).attrs["Config"]
    assert cfg["Cmd"] == ["bash"]


@pytest.mark.docker
def test_base_image_has_what_tasks_rely_on(client: docker.DockerClient, made_images: list[str]) -> None:
    """``scripts/test`` builds BASE_TAG for real (debootstrap + import) before the suite runs, so this
    checks the product of the real build path. BANDPASS_TEST_BASE_BUILD=1 rebuilds it from scratch under a
    throwaway tag first (~65 s, needs the Debian mirror)."""
    tag = BASE_TAG
    if os.environ.get("BANDPASS_TEST_BASE_BUILD"):
        tag = f"bandpass-test/base-real:{uuid.uuid4().hex[:12]}"
        made_images.append(tag)
        t0 = time.monotonic()
        build_base_image(client, tag, force=True)
        print(f"base build took {time.monotonic() - t0:.1f} s")
    out = client.containers.run(
        tag,
        ["bash", "-c", "python3 -m pytest --version; jq --version; make --version | head -1; ps --version"],
        remove=True,
        network_mode="none",
    )
    assert b"pytest" in out and b"jq-" in out and b"GNU Make" in out and b"procps" in out


@pytest.mark.docker
def test_zz_module_leaves_no_containers(client: docker.DockerClient, made_images: list[str]) -> None:
    for tag in made_images:
        if images.image_exists(client, tag):
            assert client.containers.list(all=True, filters={"ancestor": tag}) == [], tag
