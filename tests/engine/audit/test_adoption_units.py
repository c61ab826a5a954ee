"""Adopting what the oracle needs outside the declared artifacts, without Docker: the verdict it leaves,
the findings, the spec an episode verifies with, the exported task.toml, and a task without a solution."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

from typer.testing import CliRunner

import bandpass.tui.commands.tasks  # noqa: F401 - registers import and tasks on tui.cli.app
from bandpass.engine.app import reads
from bandpass.engine.audit import adoption, footprint
from bandpass.engine.audit import verdict as verdicts
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.episode import with_adopted
from bandpass.engine.tasks import artifacts
from bandpass.engine.tasks.importer import import_paths
from bandpass.engine.tasks.taskdir import load_task
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.queries import endstate as endstate_store
from bandpass.tui.cli import app
from bandpass.tui.screens.tasks import load_detail
from tests.support.taskfactory import make_task


def _import(ws: Workspace, d: Path) -> int:
    report = import_paths(ws, [d])
    assert report.ok, [i.problems for i in report.items]
    with session(ws.engine) as s:
        return next(r.version_id for r in queries.task_rows(s) if r.name == d.name)


def test_an_adopted_artifact_is_a_note_and_what_no_file_gives_still_rejects() -> None:
    assert verdicts.decide([footprint.UNDECLARED]) == verdicts.ACCEPTED
    assert verdicts.decide([footprint.UNDECLARED, "invalidity.instruction_untested"]) == verdicts.WARNING
    assert verdicts.decide([footprint.NEEDS_AGENT]) == verdicts.REJECTED
    assert verdicts.decide([footprint.UNDECLARED, "invalidity.oracle_fails"]) == verdicts.REJECTED


def test_the_finding_names_what_was_adopted_or_why_nothing_could_be() -> None:
    clean, place = {"episode": 1, "outcome": "failed"}, {"episode": 2, "outcome": "passed"}
    fp = footprint.Footprint("clean_room", "", clean_room=clean, in_place=place)
    fp.needed = fp.adopted = ["/usr/local/bin/sumcol"]
    code, detail = footprint.report_finding(fp)  # type: ignore[misc]
    assert code == footprint.UNDECLARED
    assert "adopted for this version" in detail
    assert 'Declare it in task.toml: artifacts = ["/usr/local/bin/sumcol"]' in detail
    fp.needed = fp.adopted = []  # carrying every changed file did not help
    code, detail = footprint.report_finding(fp)  # type: ignore[misc]
    assert code == footprint.NEEDS_AGENT and "running process" in detail
    # a service whose verifier passes once the oracle's other changes are carried
    svc = footprint.Footprint("service", "", clean_room=clean, in_place=place)
    svc.service, svc.service_adopted = (
        {"episode": 3, "outcome": "failed"},
        {"episode": 4, "outcome": "passed"},
    )
    svc.needed = svc.adopted = ["/etc/app.conf"]
    assert footprint.report_finding(svc)[0] == footprint.UNDECLARED  # type: ignore[index]
    svc.adopted = []
    assert footprint.report_finding(svc)[0] == footprint.NEEDS_AGENT  # type: ignore[index]


def test_an_episode_verifies_with_the_versions_adopted_artifacts(
    workspace: Workspace, tmp_path: Path
) -> None:
    vid = _import(workspace, make_task(tmp_path, "install", top='artifacts = ["/srv/www"]'))
    with session(workspace.engine) as s:
        endstate_store.set_version_footprint(s, vid, {"mode": "clean_room"}, ["/usr/local/bin/sumcol"])
    with session(workspace.engine) as s:
        version = queries.get_version(s, vid)
    assert version is not None
    spec = with_adopted(version, load_task(workspace.abs(version.path)))
    assert spec.artifacts == ["/srv/www", "/usr/local/bin/sumcol"]
    assert spec.artifact_roots == ["/app", "/logs/artifacts", "/srv/www", "/usr/local/bin/sumcol"]
    assert adoption.to_learn(workspace, [vid]) == []  # learnt once: cached on the version
    (row,) = reads.task_rows(workspace)
    assert reads.verified_label(row) == "clean room +1 adopted"
    assert "adopted artifacts" in load_detail(workspace, vid) and "/usr/local/bin/sumcol" in load_detail(
        workspace, vid
    )


def test_the_exported_task_toml_declares_the_adopted_artifacts() -> None:
    text = 'version = "1.0"\n# the author\'s comment\n[metadata]\ndifficulty = "easy"\n'
    out = artifacts.declare(text, ["/usr/local/bin/sumcol"])
    assert out.endswith(text)  # the author's file kept byte for byte below the added line
    assert tomllib.loads(out)["artifacts"] == ["/usr/local/bin/sumcol"]
    assert artifacts.declare(out, ["/usr/local/bin/sumcol"]) == out  # nothing new: unchanged
    declared = 'artifacts = ["/srv/www", { source = "/etc/nginx/site.conf" }]\n[metadata]\n'
    merged = tomllib.loads(artifacts.declare(declared, ["/etc/nginx/site.conf", "/usr/local/bin/x"]))
    assert merged["artifacts"] == ["/srv/www", {"source": "/etc/nginx/site.conf"}, "/usr/local/bin/x"]
    assert merged["metadata"] == {}


def test_a_task_without_a_solution_says_its_verification_is_unproven(
    workspace: Workspace, tmp_path: Path
) -> None:
    d = make_task(tmp_path, "no-oracle")
    (d / "solution" / "solve.sh").unlink()
    vid = _import(workspace, d)
    (row,) = reads.task_rows(workspace)
    assert reads.verified_label(row) == "unproven"  # before any rollout
    (learnt,) = adoption.learn_before_rollout(workspace, [vid], client=object())  # nothing runs
    assert (learnt.status, learnt.mode) == (adoption.UNPROVEN, adoption.UNPROVEN)
    assert adoption.to_learn(workspace, [vid]) == []
    res = CliRunner().invoke(app, ["-w", str(workspace.root), "tasks", "-v"])
    assert res.exit_code == 0, res.output
    assert "unproven" in res.output and "no solution/solve.sh" in res.output
    listed = json.loads(CliRunner().invoke(app, ["-w", str(workspace.root), "tasks", "--json"]).output)
    assert listed[0]["footprint"]["mode"] == "unproven"
    assert "unproven" in load_detail(workspace, vid)
