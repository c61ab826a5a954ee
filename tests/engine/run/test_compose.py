"""Compose tasks (issue 41, item 2): a task's ``environment/docker-compose.yaml`` services run with the real
Docker Compose v2, Harbor's way (the task adds services and overrides to ``main``), bounded like every
Bandpass container.

* the services come up healthy on the episode's own network, reachable by name from the agent's container
  (``main``), the internet off, each labelled like a sandbox and under its lifeline;
* a compose task whose answer only its sidecar knows: the agent and the verifier (in the clean room, as a
  service and in place) both reach the sidecar — nop fails, the oracle passes — and no container, network
  or volume of the workspace is left afterwards;
* a SIGKILLed owner leaves no service running (the lifeline), and the next start reaps its containers and
  its network;
* a service that cannot start is an infra error that names it; what this machine cannot give is a clear
  could-not-audit reason (tests/test_audit_verdicts.py);
* the cookbook's multi-container recipe imports as Harbor's own example of a compose task.

Containers here carry a per-test workspace label; nothing else on the shared engine is touched.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import docker
import docker.errors
import pytest

from bandpass.engine.audit.task_audit import audit_version
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import NopAgent, OracleAgent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox import labels as L
from bandpass.engine.sandbox import leftovers, services
from bandpass.engine.sandbox import pool as sandbox_pool
from bandpass.engine.sandbox.container import Sandbox, SandboxSpec
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.images import build_service_images, build_task_image
from bandpass.engine.tasks.importer import import_paths
from bandpass.engine.tasks.taskdir import load_task
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.paths import REPO
from tests.support.taskfactory import FETCH, IN_PLACE, SIDECAR_COMPOSE, make_compose_task, make_task
from tests.support.waiting import wait_until

COOKBOOK = REPO / "tests" / "fixtures" / "harbor_cookbook"
#: The issue's bound for the lifeline: a dead owner's containers stop well within this.
OUTLIVE_S = 60.0


@pytest.fixture(autouse=True)
def _no_reaping_here(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(leftovers.ENV, "0")


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    yield get_client(reap=False)


def _containers(client: docker.DockerClient, ws: Workspace | Path) -> list[dict[str, Any]]:
    root = ws.root if isinstance(ws, Workspace) else ws
    return list(client.api.containers(all=True, filters={"label": [f"{L.LABEL}=1", f"{L.WORKSPACE}={root}"]}))


def _networks(client: docker.DockerClient, ws: Workspace | Path) -> list[dict[str, Any]]:
    root = ws.root if isinstance(ws, Workspace) else ws
    return list(client.api.networks(filters={"label": [f"{L.WORKSPACE}={root}"]}))


def _version(ws: Workspace, task: Path) -> int:
    report = import_paths(ws, [task])
    assert report.ok, [i.problems for i in report.items]
    assert report.items[0].unsupported == []
    with session(ws.engine) as s:
        return next(r.version_id for r in queries.task_rows(s) if r.source == str(task.resolve()))


@pytest.mark.docker
def test_services_come_up_reachable_by_name_with_the_internet_off_and_bandpass_labels(
    client: docker.DockerClient, tmp_path: Path
) -> None:
    spec = load_task(make_compose_task(tmp_path, "direct"))
    version = spec.version_hash()
    main = build_task_image(client, spec.path, version)
    images = build_service_images(client, spec, version)
    assert main.ok and images.ok, (main.log, images.failed)
    labels = {L.WORKSPACE: str(tmp_path)}
    project = services.Services(
        client, spec, images.tags, main.tag, services.project_name("direct"), labels=labels, lifetime_s=300
    )
    project.up()
    try:
        (svc,) = project.containers()
        got = svc["Labels"]
        assert got[L.LABEL] == "1" and got[L.WORKSPACE] == str(tmp_path) and got["bandpass.role"] == "service"
        assert got[L.OWNER] and got[L.EXPIRES].isdigit()
        # the service's own command runs beside its lifeline's watchdog
        assert (
            svc["Command"].startswith("/bin/sh /dev/bandpass-service ") and "/srv/server.py" in svc["Command"]
        )
        net = client.api.inspect_network(project.network_name)
        assert net["Internal"] is True and net["Labels"][L.WORKSPACE] == str(tmp_path)
        # main's environment from the task's override; the service by name; no way out
        assert project.main_environment == {"API_URL": "http://api:8000"}
        box = Sandbox(
            client,
            SandboxSpec(
                image=main.tag,
                network_name=project.network_name,
                aliases=("main",),
                env=project.main_environment,
                labels=labels,
            ),
        ).start()
        try:
            code, token = box.exec(FETCH, timeout=30)
            assert code == 0 and len(token.strip()) == 16, token
            code, out = box.exec(
                "python3 -c \"import urllib.request as u; u.urlopen('http://deb.debian.org', timeout=5)\"",
                timeout=30,
            )
            assert code != 0 and ("name resolution" in out or "unreachable" in out), out
        finally:
            box.remove()
    finally:
        project.down()
    assert project.containers() == []
    assert _networks(client, tmp_path) == []


@pytest.mark.docker
@pytest.mark.parametrize("mode", ["clean_room", "service", "in_place"])
def test_agent_and_verifier_reach_the_sidecar_nop_fails_oracle_passes_nothing_left(
    client: docker.DockerClient, workspace: Workspace, tmp_path: Path, mode: str
) -> None:
    """The verifier reaches the sidecar by name wherever it runs: the clean room joins the project's
    network, the service verifier the agent container's namespace (Harbor's ``shared``), in place is the
    agent's container."""
    verifier = {"clean_room": "", "service": 'environment_mode = "shared"', "in_place": IN_PLACE}[mode]
    task = make_compose_task(tmp_path / "src", f"sidecar-{mode.replace('_', '-')}", verifier=verifier)
    version_id = _version(workspace, task)
    oracle = run_episode(workspace, version_id, OracleAgent, max_infra_retries=0)
    assert (oracle.outcome, oracle.reward, oracle.verify_mode) == ("passed", 1.0, mode), oracle.detail
    nop = run_episode(workspace, version_id, NopAgent, max_infra_retries=0)
    assert (nop.outcome, nop.reward) == ("failed", 0.0), nop.detail
    sandbox_pool.drain()
    assert _containers(client, workspace) == []
    assert _networks(client, workspace) == []


COLLECT = """
[[verifier.collect]]
command = "wc -l < /srv/requests.log > /srv/count.txt"
service = "api"

[[verifier.collect]]
command = "echo main > /app/hooked.txt"
"""


@pytest.mark.docker
def test_collect_hooks_run_and_a_services_artifact_reaches_the_clean_room(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Harbor's ``[[verifier.collect]]`` (in main before its end state is read, in a service after) and an
    artifact declared from a service (``service = "api"``): the verifier reads how many times the agent
    asked the API from the service's own log, carried into the clean room at its source path."""
    task = make_compose_task(
        tmp_path / "src",
        "collected",
        verifier=COLLECT,
        top='artifacts = [{ source = "/srv/count.txt", service = "api" }]',
    )
    test = task / "tests" / "test.sh"
    test.write_text(
        test.read_text().replace(
            'if [ -n "$want" ]',
            'if [ "$(cat /srv/count.txt)" -ge 1 ] && [ "$(cat /app/hooked.txt)" = main ] && [ -n "$want" ]',
        )
    )
    version_id = _version(workspace, task)
    res = run_episode(workspace, version_id, OracleAgent, max_infra_retries=0)
    assert (res.outcome, res.reward) == ("passed", 1.0), res.detail
    notes = res.carry["collect"]
    assert [(n["service"], n.get("exit_code")) for n in notes if "command" in n] == [("main", 0), ("api", 0)]
    assert [(n["service"], n["artifact"], n.get("files")) for n in notes if "artifact" in n] == [
        ("api", "/srv/count.txt", 1)
    ]
    kept = workspace.root / "recordings" / f"episode-{res.episode_id}" / "artifacts.services.tar"
    with tarfile.open(kept) as tar:
        assert tar.getnames() == ["srv/count.txt"]
    nop = run_episode(workspace, version_id, NopAgent, max_infra_retries=0)
    assert (nop.outcome, nop.reward) == ("failed", 0.0), nop.detail


@pytest.mark.docker
def test_a_service_that_cannot_start_is_an_infra_error_naming_it(
    client: docker.DockerClient, workspace: Workspace, tmp_path: Path
) -> None:
    broken = SIDECAR_COMPOSE.replace(
        "context: ./api", "context: ./api\n    command: python3 -c 'raise SystemExit(3)'"
    )
    version_id = _version(workspace, make_compose_task(tmp_path / "src", "broken-sidecar", compose=broken))
    res = run_episode(workspace, version_id, OracleAgent, max_infra_retries=0)
    assert res.outcome == "infra_error:env_start_timeout"
    assert "the task's services did not come up" in res.detail and "service api" in res.detail, res.detail
    sandbox_pool.drain()
    assert _containers(client, workspace) == [] and _networks(client, workspace) == []


@pytest.mark.docker
def test_an_image_this_machine_cannot_pull_is_a_could_not_audit_reason_naming_the_service(
    workspace: Workspace, tmp_path: Path
) -> None:
    task = make_compose_task(tmp_path / "src", "unpullable")
    (task / "environment" / "docker-compose.yaml").write_text(
        SIDECAR_COMPOSE + "  cache:\n    image: registry.example.invalid/redis:7\n"
    )
    version_id = _version(workspace, task)
    report = audit_version(workspace, version_id, reruns=1)
    assert (report.verdict, report.reasons) == ("could_not_audit", ["infra.image_build_failed"])
    (finding,) = report.checks["findings"]
    assert finding["detail"].startswith("service cache's image failed for the environment: ")
    assert "registry.example.invalid/redis:7: not in the engine and no alias" in finding["detail"]
    assert report.checks["service_images"]["api"]["ok"] and not report.checks["service_images"]["cache"]["ok"]
    assert "episodes" not in report.checks


SLOW_ORACLE = "#!/bin/bash\nsleep 300\n"


@pytest.mark.docker
def test_a_sigkilled_owner_leaves_no_service_running_and_the_next_start_reaps_the_rest(
    client: docker.DockerClient, workspace: Workspace, tmp_path: Path
) -> None:
    task = make_compose_task(tmp_path / "src", "sigkill", agent_timeout=600)
    (task / "solution" / "solve.sh").write_text(SLOW_ORACLE)
    _version(workspace, task)
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "bandpass.tui.cli",
            "-w",
            str(workspace.root),
            "run",
            "--agent",
            "oracle",
            "--k",
            "1",
        ],
        cwd=REPO,
        env={**os.environ, "PYTHONUNBUFFERED": "1", leftovers.ENV: "0"},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )

    def running(role: str) -> list[dict[str, Any]]:
        return [
            c
            for c in _containers(client, workspace)
            if c["State"] == "running" and c["Labels"].get("bandpass.role") == role
        ]

    try:
        wait_until(lambda: proc.poll() is None and running("agent") != [], 300, "the agent's container runs")
        assert running("service"), "the sidecar runs beside the agent"
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
        proc.communicate()
    try:
        wait_until(lambda: not running("service") and not running("agent"), OUTLIVE_S, "no container runs")
        assert _networks(client, workspace), "the dead owner's network is still there to reap"
        report = leftovers.reap(client)
        assert report.networks >= 1, report
        assert _containers(client, workspace) == []
        assert _networks(client, workspace) == []
    finally:
        for c in _containers(client, workspace):
            with contextlib.suppress(docker.errors.NotFound):
                client.api.remove_container(c["Id"], force=True)
        for n in _networks(client, workspace):
            with contextlib.suppress(docker.errors.APIError):
                client.api.remove_network(n["Id"])


def test_the_cookbook_multi_container_recipe_imports_as_a_compose_task(workspace: Workspace) -> None:
    """Harbor's own example: ``main`` depends on a healthy ``api-server`` built from ./api-server. It imports
    with nothing unsupported and no warning: it sets no network_mode and its scripts download (test.sh
    installs curl and uv from the internet; its API's image runs ``pip install flask``), so it gets Harbor's
    default, a public network, as Harbor runs it (on this offline machine it cannot verify: SOURCE.md)."""
    task = COOKBOOK / "multi-container"
    spec = load_task(task)
    assert spec.compose is not None
    assert [s.name for s in spec.compose.services] == ["api-server"]
    assert spec.compose.services[0].build_context == "api-server" and spec.compose.services[0].healthcheck
    assert spec.compose.main_depends_on == ["api-server"]
    report = import_paths(workspace, [task])
    (item,) = report.items
    assert (item.status, item.problems, item.unsupported, item.warnings) == ("new", [], [], [])
    assert (spec.network, spec.network_mode) == (True, "public")  # Harbor's default, its scripts rely on it
    assert "astral.sh/uv" in (task / "tests" / "test.sh").read_text()  # needs the internet to verify


def test_environment_env_of_a_compose_task_interpolates_the_compose_file_silently(tmp_path: Path) -> None:
    """Harbor's docker environment uses ``[environment] env`` of a compose task only to interpolate the
    compose file (no container gets it), as Bandpass does: no warning there. Without a compose file Harbor
    sets the variables in the container and Bandpass does not: that difference stays a warning."""
    env = 'env = { API_PORT = "8000" }'
    compose = load_task(
        make_compose_task(
            tmp_path, "env-compose", environment=env, compose=SIDECAR_COMPOSE.replace("8000", "${API_PORT}")
        )
    )
    assert compose.environment_env == {"API_PORT": "8000"}
    assert not any("[environment].env" in w for w in compose.warnings), compose.warnings
    plain = load_task(make_task(tmp_path, "env-plain", environment=env))
    assert any("[environment].env: these variables are not set" in w for w in plain.warnings), plain.warnings
