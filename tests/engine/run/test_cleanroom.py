"""The clean room: what crosses from the agent's end state into the verifier's fresh container, what the
verifier gets (capabilities, network, a clean start), and the audit's oracle footprint.

Unit tests for the carry plan and the task fields; the rest runs real Docker episodes with scripted
policies typing into their terminals. The probe-by-verifier matrix is tests/engine/run/test_redteam.py.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import subprocess
import sys
import tarfile
import threading
from pathlib import Path

import pytest

from bandpass.engine.core import outcomes
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run import cleanroom, endstate, phases
from bandpass.engine.run.agents.builtin import NopAgent, OracleAgent
from bandpass.engine.run.endstate import ADDED, DELETED, MODIFIED, Change
from bandpass.engine.run.episode import run_episode
from bandpass.engine.sandbox.attribution import memory_limit_reached
from bandpass.engine.tasks.artifacts import CLEAN_ROOM, IN_PLACE, SERVICE
from bandpass.engine.tasks.importer import import_paths
from bandpass.engine.tasks.taskdir import load_task, validate_task
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import TaskVersion
from bandpass.store.queries import endstate as endstate_store
from tests.support import paths
from tests.support.probes import LISTENING_WRITER, LOOP_WRITER
from tests.support.scripted import Keys
from tests.support.taskfactory import IN_PLACE as TASK_IN_PLACE
from tests.support.taskfactory import make_task

ROOTS = ["/app", "/logs/artifacts", "/etc/site.conf"]


def _c(path: str, kind: str = ADDED, type_: str = "file", **kw: object) -> Change:
    return Change(path, kind, type_, **kw)  # type: ignore[arg-type]


# --- the carry plan ----------------------------------------------------------------------------------


def test_only_files_dirs_and_links_inside_an_artifact_cross() -> None:
    changes = [
        _c("/app", MODIFIED, "dir"),
        _c("/app/out.txt", archived=True),
        _c("/app/sub", ADDED, "dir"),
        _c("/app/sub/link", type_="symlink", link="../out.txt"),  # stays inside /app
        _c("/app/etc", type_="symlink", link="/etc/passwd"),  # leaves /app
        _c("/app/up", type_="symlink", link="../../etc/shadow"),  # leaves /app, relatively
        _c("/app/pipe", type_="other", special="fifo"),
        _c("/app/sock", type_="other", special="socket"),
        _c("/app/old.txt", DELETED, ""),
        _c("/usr/lib/python3.11/pytest.py"),  # not an artifact: evidence only
        _c("/etc/site.conf", MODIFIED, "file"),  # declared
        _c("/root/.bashrc", MODIFIED),
    ]
    carry = cleanroom.plan(changes, ROOTS, "/app")
    assert [c.path for c in carry.put] == [
        "/app",
        "/app/out.txt",
        "/app/sub",
        "/app/sub/link",
        "/etc/site.conf",
    ]
    assert carry.deleted == ["/app/old.txt"]
    dropped = {f.path: f.why for f in carry.dropped}
    assert set(dropped) == {"/app/etc", "/app/up", "/app/pipe", "/app/sock"}
    assert dropped["/app/etc"].startswith("a symlink to /etc/passwd, outside /app")
    assert dropped["/app/pipe"].startswith("a FIFO") and dropped["/app/sock"].startswith("a socket")
    assert carry.left_out == 2 and carry.workdir_replaced == ""
    assert {f.rule for f in carry.dropped} == {cleanroom.DROPPED}


@pytest.mark.parametrize(
    ("changes", "why"),
    [
        ([_c("/app", MODIFIED, "file")], "/app is now a file, not a directory"),
        ([_c("/app", DELETED, "")], "/app was deleted"),
        ([_c("/app", MODIFIED, "symlink", link="/tmp")], "/app is now a symlink, not a directory"),
        ([_c("/srv", DELETED, "")], "/srv was deleted (and the workdir /srv/app with it)"),
    ],
)
def test_a_replaced_workdir_is_named_and_nothing_of_it_crosses(changes: list[Change], why: str) -> None:
    workdir = "/srv/app" if changes[0].path == "/srv" else "/app"
    carry = cleanroom.plan([*changes, _c(f"{workdir}/x")], [workdir], workdir)
    assert carry.workdir_replaced == why
    assert carry.put == []


def test_a_declared_artifact_under_a_deleted_directory_is_deleted_in_the_clean_room() -> None:
    carry = cleanroom.plan([_c("/etc", DELETED, "")], ["/app", "/etc/site.conf"], "/app")
    assert carry.deleted == ["/etc/site.conf"]


def test_harbor_artifacts_and_verifier_fields_load(tmp_path: Path) -> None:
    d = make_task(
        tmp_path,
        "declared",
        top='artifacts = ["/srv/www", { source = "/etc/nginx/site.conf" }, "out/report.json"]',
        verifier='environment_mode = "shared"\nnetwork_mode = "public"',
    )
    spec = load_task(d)
    assert spec.artifacts == ["/srv/www", "/etc/nginx/site.conf", "/app/out/report.json"]
    assert spec.artifact_roots == ["/app", "/logs/artifacts", "/srv/www", "/etc/nginx/site.conf"]
    assert (spec.verify_mode, spec.network, spec.verifier_network) == (SERVICE, False, True)
    assert not any("artifacts" in w for w in spec.warnings)  # used now, not "a setting Bandpass ignores"
    # in place only by the task's own opt-in, in Bandpass's field (Harbor keeps [metadata] as it is)
    assert load_task(make_task(tmp_path, "opt-in", verifier=TASK_IN_PLACE)).verify_mode == IN_PLACE


def test_bad_artifact_and_mode_entries_are_named(tmp_path: Path) -> None:
    d = make_task(
        tmp_path,
        "bad",
        top='artifacts = ["/tests", "../etc", 3]',
        verifier='environment_mode = "elsewhere"\n[metadata.bandpass]\nverify_mode = "beside"',
    )
    problems = [str(p) for p in validate_task(d)]
    # what Harbor's own loader refuses too is a problem...
    assert "task.toml: artifacts[1]: must not contain '..' components, got '../etc'" in problems
    assert "task.toml: artifacts[2]: expected a path or a table with a source, got 3" in problems
    assert (
        'task.toml: [verifier].environment_mode: expected "shared" or "separate", got "elsewhere"' in problems
    )
    assert (
        "task.toml: [metadata.bandpass].verify_mode: expected one of clean_room, service, in_place, got "
        "'beside'" in problems
    )
    # ...a harness path Harbor would take is a warning, and is not carried
    toml = (d / "task.toml").read_text().replace(', "../etc", 3', "").replace("elsewhere", "shared")
    toml = toml.replace('"beside"', '"service"')
    (d / "task.toml").write_text(toml)
    spec = load_task(d)
    assert spec.artifacts == []
    assert "task.toml: artifacts[0]: /tests is the harness's or the kernel's: not carried" in spec.warnings


# --- what a capture and a carry cost: what the policy allocated, never what it claims ----------------------


class _Layers:
    """A container as the capture's layer reader sees it: an overlay2 upper directory over a lower one."""

    def __init__(self, root: Path) -> None:
        self.upper, self.lower = root / "upper", root / "lower"
        (self.upper / "app").mkdir(parents=True)
        (self.lower / "app").mkdir(parents=True)
        self.attrs = {
            "GraphDriver": {
                "Name": "overlay2",
                "Data": {"UpperDir": str(self.upper), "LowerDir": str(self.lower)},
            }
        }


def test_a_capture_reads_what_was_allocated_once_and_lists_the_rest(tmp_path: Path) -> None:
    """``truncate -s 200G`` costs the capture one stat; five hard links to a file are read once; a file
    over the per-file limit is listed with its size and allocated bytes, never read."""
    box = _Layers(tmp_path)
    with open(box.upper / "app" / "junk.bin", "wb") as fh:
        fh.truncate(200 << 30)
    data = box.upper / "app" / "data.bin"
    data.write_bytes(b"x" * (1 << 20))
    for i in range(5):
        os.link(data, box.upper / "app" / f"link{i}")
    state = endstate.capture(None, box, tmp_path / "es.tar", cap_bytes=4 << 20, reader="layer")  # type: ignore[arg-type]
    by = {c.path: c for c in state.changes}
    junk = by["/app/junk.bin"]
    assert (junk.size, junk.sha256) == (200 << 30, "") and junk.alloc is not None and junk.alloc < 1 << 20
    assert state.unread == 1 and state.read_bytes == 1 << 20  # the data once, the sparse file never
    links = [by[f"/app/link{i}"] for i in range(5)]
    first = by["/app/data.bin"]
    assert first.sha256 == hashlib.sha256(b"x" * (1 << 20)).hexdigest() and first.archived
    assert all(c.same_as == "/app/data.bin" and c.sha256 == first.sha256 and c.archived for c in links)
    with tarfile.open(tmp_path / "es.tar") as tar:  # archived once, the others as hard links
        assert tar.getmember("app/link0").islnk() and tar.getmember("app/data.bin").isreg()
    assert not state.truncated


def test_a_listing_past_its_limit_is_cut_short_and_said_so(tmp_path: Path) -> None:
    box = _Layers(tmp_path)
    for i in range(30):
        (box.upper / "app" / f"f{i:02}").write_text("x")
    limits = endstate.Limits(entries=10)
    state = endstate.capture(None, box, tmp_path / "es.tar", reader="layer", limits=limits)  # type: ignore[arg-type]
    assert state.truncated == "over 10 changed entries" and len(state.changes) == 10
    assert endstate.capture(None, box, tmp_path / "es2.tar", reader="layer").truncated == ""  # type: ignore[arg-type]


def test_the_carry_streams_a_hard_linked_file_once_and_never_one_over_its_limit(tmp_path: Path) -> None:
    """Over the capture cap, an artifact is read from the agent's container: once for all its hard links,
    and not at all when it is over what is left of the carry's bytes (dropped, its size named)."""
    changes = [
        _c("/app/big.bin", size=3000, alloc=4096),
        _c("/app/hard", size=3000, same_as="/app/big.bin"),
        _c("/app/junk.bin", size=200 << 30, alloc=0),
    ]
    fetched: list[tuple[str, int]] = []

    def fetch(path: str, limit: int) -> tuple[io.BytesIO, int]:
        fetched.append((path, limit))
        return io.BytesIO(b"y" * 3000), 3000

    carry = cleanroom.plan(changes, ["/app"], "/app")
    data = cleanroom.build(carry, None, fetch, carry_bytes=10_000)
    assert fetched == [("/app/big.bin", 10_000)]
    with tarfile.open(fileobj=data) as tar:
        assert tar.getmember("app/big.bin").isreg() and tar.getmember("app/hard").islnk()
        assert tar.getmember("app/hard").linkname == "app/big.bin"
    (junk,) = carry.dropped
    assert junk.path == "/app/junk.bin"
    assert junk.why.startswith("200.0 GiB, 0 B allocated: over what the clean room carries")
    assert [c.path for c in carry.put] == ["/app/big.bin", "/app/hard"]


def test_memory_limit_reached_reads_the_cgroups_peak(tmp_path: Path) -> None:
    """An OOM kill in a cgroup whose usage never reached its limit is the host's
    (tests/engine/sandbox/test_attribution)."""
    (tmp_path / "memory.limit_in_bytes").write_text("67108864\n")
    (tmp_path / "memory.failcnt").write_text("0\n")
    (tmp_path / "memory.max_usage_in_bytes").write_text("67108864\n")
    assert memory_limit_reached(tmp_path) is True  # this kernel's v1 failcnt stays 0 at a limit OOM
    (tmp_path / "memory.max_usage_in_bytes").write_text("3825664\n")
    assert memory_limit_reached(tmp_path) is False
    (tmp_path / "memory.limit_in_bytes").unlink()
    assert memory_limit_reached(tmp_path) is None


def test_a_phase_past_its_timeout_is_abandoned_and_what_blocked_it_released() -> None:
    """Phase timeouts are enforced (capture, verify, control): ``mkfifo /dev/null`` once held a capture's
    ``docker exec`` for 10+ minutes while the timeout was only recorded."""
    gate, released = threading.Event(), []

    def blocked() -> str:
        gate.wait(120)
        return "too late"

    def unblock() -> None:
        released.append("container removed")
        gate.set()

    with pytest.raises(phases.PhaseTimeout) as err:
        phases.bounded(blocked, 0.2, what="the capture", code="orchestrator_failure", on_timeout=unblock)
    assert err.value.outcome == "infra_error:orchestrator_failure"
    assert err.value.detail == "the capture ran past its 0.2 s and was stopped"
    assert released == ["container removed"]
    assert phases.bounded(lambda: 42, 30, what="x", code="y") == 42  # in time: its value...
    empty: dict[str, int] = {}
    with pytest.raises(KeyError):  # ...or its own error, unchanged
        phases.bounded(lambda: empty["k"], 30, what="x", code="y")


# --- real episodes -----------------------------------------------------------------------------------


def _import(ws: Workspace, d: Path) -> int:
    report = import_paths(ws, [d])
    assert report.ok, [i.problems for i in report.items]
    with session(ws.engine) as s:
        return next(r.version_id for r in queries.task_rows(s) if r.name == d.name)


@pytest.mark.docker
def test_links_inside_cross_links_outside_do_not(workspace: Workspace, tmp_path: Path) -> None:
    vid = _import(workspace, make_task(tmp_path, "links"))
    inside = run_episode(workspace, vid, Keys("echo 42 > /app/real.txt && ln -s real.txt /app/answer.txt"))
    assert (inside.outcome, inside.verify_mode) == ("passed", CLEAN_ROOM), inside.detail
    # a link to a file the policy controls outside the artifacts: its target never crosses
    outside = run_episode(workspace, vid, Keys("echo 42 > /opt/a && ln -s /opt/a /app/answer.txt"))
    assert (outside.outcome, outside.reward) == ("agent_error:artifact_invalid", 0.0)
    assert "a symlink to /opt/a, outside /app" in outside.detail
    with session(workspace.engine) as s:
        row = endstate_store.get_endstate(s, outside.episode_id)
        assert row is not None and json.loads(row.carry_json)["dropped"][0]["path"] == "/app/answer.txt"


@pytest.mark.docker
def test_an_artifact_over_the_capture_cap_is_read_from_the_agents_container(tmp_path: Path) -> None:
    ws = Workspace.open(tmp_path / "ws")
    (ws.root / "bandpass.toml").write_text("[endstate]\ncap_mb = 0.05\n")
    ws = Workspace.open(ws.root)
    test = (
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        'if [ "$(cat /app/answer.txt)" = 42 ] && [ "$(wc -c < /app/big.bin)" = 300000 ]; '
        "then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    vid = _import(ws, make_task(tmp_path, "big", test=test))
    res = run_episode(ws, vid, Keys("head -c 300000 /dev/urandom > /app/big.bin; echo 42 > /app/answer.txt"))
    assert res.outcome == "passed", res.detail
    assert res.endstate is not None and res.endstate.over_cap == 1  # listed only in the end state...
    assert res.carry["carried"] >= 2 and res.carry["dropped"] == []  # ...yet carried, read from the engine


FIXTURES = paths.FIXTURES / "cleanroom"
#: A local apt repository inside the image holding one package: apt-get without a network.
APT_DOCKERFILE = (FIXTURES / "apt.Dockerfile").read_text()
APT_TEST = """#!/bin/bash
mkdir -p /logs/verifier
apt-get update -q && apt-get install -y -q bp-hello
if [ "$(bp-hello)" = hello-from-apt ] && [ "$(cat /app/answer.txt)" = 42 ]
then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


@pytest.mark.docker
@pytest.mark.parametrize(
    "verifier",
    ["", 'environment_mode = "shared"', TASK_IN_PLACE],
    ids=["clean-room", "service", "in-place"],
)
def test_a_test_sh_that_apt_get_installs_a_package_works(
    workspace: Workspace, tmp_path: Path, verifier: str
) -> None:
    """35 of 39 Terminal-Bench run-tests.sh call apt-get; with every capability dropped it failed
    (``setgroups ... Operation not permitted``). The verifier's container has Docker's default set; the
    repository is a local one in the image, so no network is needed."""
    d = make_task(
        tmp_path,
        "apt-test",
        dockerfile=APT_DOCKERFILE,
        test=APT_TEST,
        verifier=verifier,
        memory_mb=512,
    )
    vid = _import(workspace, d)
    res = run_episode(workspace, vid, OracleAgent())
    assert res.outcome == "passed", res.verifier_output[-2000:]
    assert "Setting up bp-hello" in res.verifier_output


@pytest.mark.docker
def test_the_verifier_gets_its_declared_network_and_the_agent_none(
    workspace: Workspace, tmp_path: Path
) -> None:
    """Harbor's ``[verifier] network_mode`` overrides the environment's for the verifier only."""
    test = (
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        'if [ "$(ls /sys/class/net | grep -vc "^lo$")" -gt 0 ] && [ "$(cat /app/net.txt)" = lo ]; '
        "then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    d = make_task(tmp_path, "net", test=test, verifier='network_mode = "public"')
    vid = _import(workspace, d)
    res = run_episode(workspace, vid, Keys("ls /sys/class/net > /app/net.txt"))
    assert res.outcome == "passed", res.verifier_output[-1000:]


@pytest.mark.docker
def test_a_looping_answer_is_the_policys_timeout_only_against_the_oracles_yardstick(
    workspace: Workspace, tmp_path: Path
) -> None:
    test = (
        "#!/bin/bash\nmkdir -p /logs/verifier\n"
        'if [ "$(bash /app/answer.sh)" = 42 ]; '
        "then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
    )
    solve = "#!/bin/bash\nprintf '#!/bin/bash\\necho 42\\n' > /app/answer.sh\n"
    vid = _import(workspace, make_task(tmp_path, "loops", test=test, solve=solve, verifier_timeout=8))
    loop = Keys("printf '#!/bin/bash\\nwhile :; do sleep 1; done\\n' > /app/answer.sh")
    # no oracle has verified this version yet: nothing says the verifier is fast, the infra code stands
    # (and is not retried: the same end state would time out again)
    before = run_episode(workspace, vid, loop, max_infra_retries=2, retry_backoff_s=0.1)
    assert (before.outcome, before.retries) == ("infra_error:verifier_timeout", 0)
    oracle = run_episode(workspace, vid, OracleAgent())
    assert oracle.outcome == "passed"
    after = run_episode(workspace, vid, loop)
    assert (after.outcome, after.reward) == ("agent_error:verifier_timeout", 0.0), after.detail
    assert "the oracle's artifacts verify in" in after.detail
    assert outcomes.suggested_tag(after.outcome) == "agent.verifier_timeout"


# --- the audit's footprint ---------------------------------------------------------------------------

SERVICE_SOLVE = (FIXTURES / "service_solve.sh").read_text()
SERVICE_TEST = (FIXTURES / "service_test.sh").read_text()


@pytest.mark.docker
def test_a_service_task_is_accepted_by_the_audit_and_verified_as_a_service(tmp_path: Path) -> None:
    """The oracle starts a server and the test asks it: the clean room has no server, so the audit finds
    the listening process, confirms the oracle passes verified as a service (a fresh container in the
    agent container's network namespace), settles the version that way, and its probes run that way."""
    ws = Workspace.open(tmp_path / "ws")
    d = make_task(
        tmp_path / "src",
        "serve-answer",
        instruction="Serve /app/answer.txt, containing 42, over HTTP on 127.0.0.1:8000.",
        solve=SERVICE_SOLVE,
        test=SERVICE_TEST,
    )
    vid = _import(ws, d)
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "bandpass.tui.cli",
            "--workspace",
            str(ws.root),
            "audit",
            "serve-answer",
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=900,
    )
    report = json.loads(next(line for line in proc.stdout.splitlines() if line.startswith("{")))
    fp = report["checks"]["footprint"]
    assert fp["mode"] == SERVICE, fp
    assert fp["clean_room"]["outcome"] == "failed" and fp["in_place"]["outcome"] == "passed"
    assert fp["service"]["outcome"] == "passed", fp
    assert [s["port"] for s in fp["services"]] == [8000] and "python3" in fp["services"][0]["cmd"]
    assert report["verdict"] == "accepted", report["checks"].get("findings")
    with session(ws.engine) as s:
        assert s.get(TaskVersion, vid).verify_mode == SERVICE  # type: ignore[union-attr]
        eps = queries.episodes(s, version_id=vid)
    # every probe after the footprint ran as a service (one clean-room and one in-place oracle are the
    # footprint's own)
    assert (
        sum(e.verify_mode == CLEAN_ROOM for e in eps) == 1
        and sum(e.verify_mode == IN_PLACE for e in eps) == 1
    )
    assert {e.agent for e in eps if e.verify_mode == SERVICE} >= {"oracle", "nop", "cheat:background_loop"}
    # a later episode follows the version: the policy's own server is what the verifier asks
    assert run_episode(ws, vid, NopAgent()).verify_mode == SERVICE


#: A wrong answer served (the oracle's service, serving 41): the test asks it and gets 41.
WRONG_SERVICE = SERVICE_SOLVE.replace("echo 42", "echo 41").splitlines()[1:]


@pytest.mark.docker
def test_a_service_is_verified_beside_the_policys_processes_never_among_them(tmp_path: Path) -> None:
    """Verified as a service, the verifier shares only the agent container's network: the honest service
    passes, and a service started together with a reward writer (a background loop, or a process that
    listens on a port so it is kept alive beside the service, and writes the reward) forges nothing."""
    ws = Workspace.open(tmp_path / "ws")
    d = make_task(
        tmp_path / "src",
        "serve-shared",
        solve=SERVICE_SOLVE,
        test=SERVICE_TEST,
        verifier='environment_mode = "shared"',  # Harbor's shared environment: verified as a service
    )
    vid = _import(ws, d)
    honest = run_episode(ws, vid, OracleAgent())
    assert (honest.outcome, honest.verify_mode) == ("passed", SERVICE), honest.verifier_output[-1000:]
    assert [k["port"] for k in honest.carry["kept"]] == [8000]
    for name, keys in {
        "loop": Keys(*WRONG_SERVICE, LOOP_WRITER),
        "listening writer": Keys(*WRONG_SERVICE, *LISTENING_WRITER),
    }.items():
        r = run_episode(ws, vid, keys, max_infra_retries=0)
        assert (r.outcome, r.reward) == ("failed", 0.0), (name, r.outcome, r.detail, r.verifier_output[-800:])
        assert r.verify_mode == SERVICE
        if name == "listening writer":  # it was kept alive beside the service, and still reached nothing
            assert sorted(k["port"] for k in r.carry["kept"]) == [8000, 8001], r.carry


@pytest.mark.docker
def test_the_kv_example_passes_verified_as_a_service(workspace: Workspace) -> None:
    """configure-kv-service's test starts its own server on :8091: in the service verifier's container,
    beside an agent container where nothing listens, it passes as in the clean room."""
    report = import_paths(workspace, [paths.EXAMPLES / "configure-kv-service"])
    assert report.ok
    with session(workspace.engine) as s:
        vid = next(r.version_id for r in queries.task_rows(s) if r.name == "configure-kv-service")
    res = run_episode(workspace, vid, OracleAgent(), verify_mode=SERVICE)
    assert (res.outcome, res.verify_mode) == ("passed", SERVICE), res.verifier_output[-1000:]


UNDECLARED_SOLVE = (
    "#!/bin/bash\necho 42 > /app/answer.txt\nmkdir -p /etc/answer && echo 42 > /etc/answer/conf\n"
)
UNDECLARED_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt)" = 42 ] && [ "$(cat /etc/answer/conf)" = 42 ]
then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


@pytest.mark.docker
def test_the_audit_names_the_artifacts_a_verifier_reads_outside_the_workdir(tmp_path: Path) -> None:
    from bandpass.engine.audit import footprint
    from bandpass.engine.sandbox.docker_engine import get_client

    ws = Workspace.open(tmp_path / "ws")
    src = make_task(tmp_path / "src", "conf-answer", solve=UNDECLARED_SOLVE, test=UNDECLARED_TEST)
    vid = _import(ws, src)
    spec = load_task(src)
    fp = footprint.settle(ws, vid, spec, client=get_client(), bus=None, batch="fp-test")
    assert fp.mode == CLEAN_ROOM and fp.services == []
    assert fp.needed == ["/etc/answer"]  # the new directory, once; /root/.bash_history and the like are noise
    code, detail = footprint.report_finding(fp)  # type: ignore[misc]
    assert code == "invalidity.artifacts_undeclared"
    assert 'Declare it in task.toml: artifacts = ["/etc/answer"]' in detail
    # adopted for the version meanwhile: its own oracle now passes in the clean room, nothing edited
    assert fp.adopted == ["/etc/answer"]
    adopted = run_episode(ws, vid, OracleAgent())
    assert (adopted.outcome, adopted.verify_mode) == ("passed", CLEAN_ROOM), adopted.verifier_output[-800:]
    # the curator adds the line: the oracle passes in the clean room
    text = (src / "task.toml").read_text()
    (src / "task.toml").write_text('artifacts = ["/etc/answer"]\n' + text)
    fixed = _import(ws, src)
    assert run_episode(ws, fixed, OracleAgent()).outcome == "passed"
