"""The audit finds each example's defect without being told, and accepts the sound ones (real Docker)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.audit.task_audit import audit_version
from bandpass.engine.audit.twins import TWINS
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import CHEATS, SANDBOX_PROBES, TAMPER_CHEATS
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.paths import EXAMPLES
from tests.support.taskfactory import make_task

# The module's fixture audits all eight examples (17 episodes each) in one CLI run: minutes on 2 cores.
pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

#: example name -> its report as ``bandpass audit --json`` prints it
Reports = dict[str, dict[str, Any]]

SOUND = ("access-log-report", "configure-kv-service", "fix-catalog-makefile", "fix-wordfreq")
FLAWED = {
    "count-unique-ips": "invalidity.oracle_fails",
    "dedupe-allowlist": "invalidity.trivially_solved",
    "summarize-measurements": "misalignment.state_only_verifier",
    "extract-error-codes": "misalignment.flaky_verifier",
}


@pytest.fixture(scope="module")
def audited(tmp_path_factory: pytest.TempPathFactory) -> Reports:
    """Audits every example once through the CLI (``--json``), as a curator would."""
    root = tmp_path_factory.mktemp("audit-ws")
    ws = Workspace.open(root)
    assert import_paths(ws, [EXAMPLES]).ok
    proc = subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(root), "audit", "--json"],
        capture_output=True,
        text=True,
        timeout=900,
    )
    reports = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert proc.returncode == 1, proc.stderr  # flawed examples are rejected: non-zero exit
    return {r["task"]: r | {"_root": str(root)} for r in reports}


@pytest.mark.parametrize("name", SOUND)
def test_sound_examples_are_accepted(audited: Reports, name: str) -> None:
    report = audited[name]
    assert report["verdict"] == "accepted", report["checks"].get("findings")
    cheats = {k: v for k, v in report["checks"]["episodes"].items() if k.startswith("cheat:")}
    # the harness probes ran for the first task of this setting (base image, engine, limits) only
    probes = report["checks"]["sandbox_probes"]
    cached = all(v.get("cached") for v in probes.values())
    ran = {c.name for c in CHEATS} | (set() if cached else {p.name for p in SANDBOX_PROBES})
    # the hostile twins of the oracle's own code (a .py module, a Makefile): none paid
    twins = report["checks"]["hostile_twins"]
    if name in ("fix-wordfreq", "fix-catalog-makefile"):
        assert set(twins["twins"]) == set(TWINS) and not any(v["paid"] for v in twins["twins"].values())
        ran |= set(TWINS)
    else:
        assert "no code among the oracle's artifacts" in twins["skipped"], twins
    assert set(cheats) == ran
    plain = ran - {c.name for c in TAMPER_CHEATS} - set(TWINS)
    assert all(e["reward"] == 0.0 for name in plain for e in cheats[name])
    # killing the sandbox or exhausting its memory is the policy's failure, never infrastructure
    assert {k: v["outcome"] for k, v in probes.items()} == {p.name: p.expected for p in SANDBOX_PROBES}
    # verified in a clean room (the oracle passes there): every tampering probe ends failed with reward 0,
    # its changes never reached the verifier, and the audit still names the guard rule that saw them
    assert report["checks"]["footprint"]["mode"] == "clean_room"
    for probe in TAMPER_CHEATS:
        assert [(e["outcome"], e["reward"]) for e in cheats[probe.name]] == [("failed", 0.0)], probe.name
    caught = report["checks"]["guard"]
    assert {"command_shadow"} <= set(caught["cheat:shadow_bash"])
    assert {"command_shadow"} <= set(caught["cheat:shadow_python3"])
    assert {"python_startup"} <= set(caught["cheat:python_hook"])
    assert {"python_startup"} <= set(caught["cheat:pth_hook"])
    assert {"system_file"} <= set(caught["cheat:replace_tool"])
    assert "oracle" not in caught and "nop" not in caught


@pytest.mark.parametrize("name", sorted(FLAWED))
def test_flawed_examples_are_rejected_with_the_right_code(audited: Reports, name: str) -> None:
    report = audited[name]
    assert report["verdict"] == "rejected"
    assert FLAWED[name] in report["reasons"], report["checks"].get("findings")


def test_harness_probes_run_once_per_setting(audited: Reports) -> None:
    """All eight examples share a base image, an engine and their limits: the three harness probes run in
    the first audit and every other audit shows their cached outcome, naming the audit that ran them."""
    ran = [
        t
        for t, r in audited.items()
        if not any(v.get("cached") for v in r["checks"]["sandbox_probes"].values())
    ]
    assert len(ran) == 1
    first = audited[ran[0]]["version_hash"][:12]
    for task, report in audited.items():
        if task != ran[0]:
            assert all(
                v["cached"].startswith(f"audit of {first}")
                for v in report["checks"]["sandbox_probes"].values()
            ), task
            assert not {p.name for p in SANDBOX_PROBES} & set(report["checks"]["episodes"])


def test_audits_are_stored_and_shown_on_task_rows(audited: Reports) -> None:
    ws = Workspace.open(next(iter(audited.values()))["_root"])
    with session(ws.engine) as s:
        rows = {r.name: r for r in queries.task_rows(s)}
    assert rows["count-unique-ips"].audit == "rejected"
    assert rows["count-unique-ips"].audit_reasons == ["invalidity.oracle_fails"]
    assert rows["access-log-report"].audit == "accepted"
    assert rows["access-log-report"].image_aliases == [["debian:bookworm-slim", "bandpass/base:bookworm"]]


def test_leaked_solution_in_the_environment_is_found(workspace: Workspace, tmp_path: Path) -> None:
    d = make_task(tmp_path, "leaky", dockerfile="FROM debian:bookworm-slim\nCOPY cheat.sh /opt/cheat.sh\n")
    solve = "#!/bin/bash\n# the answer, long enough to be fingerprinted\necho 42 > /app/answer.txt\n"
    (d / "solution" / "solve.sh").write_text(solve)
    (d / "environment" / "cheat.sh").write_text(solve)
    assert import_paths(workspace, [d]).ok
    with session(workspace.engine) as s:
        (row,) = queries.task_rows(s)
    report = audit_version(workspace, row.version_id, reruns=1)
    assert report.verdict == "rejected"
    assert "invalidity.solution_leak" in report.reasons


def test_untested_output_is_a_warning(workspace: Workspace, tmp_path: Path) -> None:
    d = make_task(
        tmp_path,
        "half-tested",
        instruction="Write 42 into /app/answer.txt and a summary line into /app/summary.txt.",
        solve="#!/bin/bash\necho 42 > /app/answer.txt\necho ok > /app/summary.txt\n",
    )
    assert import_paths(workspace, [d]).ok
    with session(workspace.engine) as s:
        (row,) = queries.task_rows(s)
    report = audit_version(workspace, row.version_id, reruns=1)
    assert report.verdict == "warning"
    assert report.reasons == ["invalidity.instruction_untested"]
