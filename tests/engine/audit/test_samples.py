"""The committed sample episodes load into any workspace, replay, and need no Docker (the demo)."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bandpass.engine.audit.samples import BATCH_PREFIX, export_sample, load_samples, read_sample, sample_dirs
from bandpass.engine.core import outcomes
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.generator.generation_samples import GenerationSampleError, load_generation_samples
from bandpass.engine.generator.transcript import read_transcript
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.paths import EXAMPLES, REPO

SAMPLES = REPO / "recordings" / "samples"


def _slug(ep: object) -> str:
    """The sample an episode was loaded from (its cast is copied to recordings/samples/<slug>/)."""
    return Path(ep.agent_cast).parent.name  # type: ignore[attr-defined]


def test_samples_are_small_and_well_formed() -> None:
    dirs = sample_dirs(SAMPLES)
    assert len(dirs) >= 9
    # 96 episodes take about 1.9 MiB: enough per task for the band to decide, still small in a clone
    assert sum(p.stat().st_size for p in SAMPLES.rglob("*") if p.is_file()) < 3 * 1024 * 1024
    for d in dirs:
        doc = read_sample(d)
        assert doc["task"] and len(doc["task_version"]) == 64 and doc["outcome"], d
        assert (d / doc["agent_cast"]).is_file(), d


def test_load_samples_is_idempotent_and_casts_replay(workspace: Workspace) -> None:
    ws = workspace
    assert import_paths(ws, [EXAMPLES]).ok
    n = len(sample_dirs(SAMPLES))
    assert load_samples(ws, SAMPLES) == n
    assert load_samples(ws, SAMPLES) == 0
    with session(ws.engine) as s:
        eps = [e for e in queries.episodes(s) if e.batch_id.startswith(BATCH_PREFIX)]
        steps = {e.id: queries.steps(s, e.id) for e in eps}  # type: ignore[arg-type]
    assert len(eps) == n and all(e.status == "done" for e in eps)

    got = {e.outcome for e in eps}
    assert {"passed", "failed", "agent_error:parse_error", "agent_error:turn_limit"} <= got
    assert any(outcomes.is_infra(o) for o in got)
    for e in eps:
        assert ws.abs(e.agent_cast).is_relative_to(ws.root)  # copies inside the workspace
        cast = read_cast(ws.abs(e.agent_cast))
        # Steps point into the cast: each step's marker, at the time the step recorded. (A cast may hold
        # one marker more: the step during which the container died, killed from outside or by the
        # policy itself, never got recorded.)
        markers = {(label, round(t, 6)) for t, label in cast.markers}
        assert {(f"step {st.index}", round(st.marker_time, 6)) for st in steps[e.id]} <= markers
        died = outcomes.is_infra(e.outcome) or e.outcome in ("agent_error:sandbox_killed", "agent_error:oom")
        assert len(cast.markers) - len(steps[e.id]) in ((0, 1) if died else (0,))
        if e.verifier_cast:
            read_cast(ws.abs(e.verifier_cast))
    truncated = next(e for e in eps if _slug(e) == "policy-context-truncated")
    # A checkpoint's samples come back as their rollout batch, with its Batch row (Runs lists it).
    with session(ws.engine) as s:
        batch = queries.get_batch(s, f"{BATCH_PREFIX}demo-step10")
        assert batch is not None and (batch.agent, batch.k) == ("demo-step10", 4)
    assert truncated.batch_id == f"{BATCH_PREFIX}demo-step10"
    # the six policy-* samples and step 10's PLAN (9 + 4 + 4 + 14 episodes)
    assert sum(e.batch_id == batch.id for e in eps) == 37
    kinds = {c["kind"] for st in steps[truncated.id] for c in json.loads(st.cuts_json)}
    assert "history" in kinds  # each cut the harness made to fit the window is on its step


def test_sample_round_trip_and_version_mismatch_warns(workspace: Workspace, tmp_path: Path) -> None:
    ws = workspace
    assert import_paths(ws, [EXAMPLES]).ok
    src = SAMPLES / "policy-parse-error"
    shutil.copytree(src, tmp_path / "one" / src.name)
    assert load_samples(ws, tmp_path / "one") == 1
    with session(ws.engine) as s:
        (ep,) = [e for e in queries.episodes(s) if _slug(e) == "policy-parse-error"]
    out = export_sample(ws, ep.id, tmp_path / "again" / "policy-parse-error")  # type: ignore[arg-type]
    a, b = read_sample(src), read_sample(out)
    for key in ("task", "task_version", "agent", "outcome", "reward", "error", "steps", "started_at"):
        assert a[key] == b[key], key

    # A sample recorded on another version of the task still loads, against the latest one, with a warning.
    doc = json.loads((out / "episode.json").read_text())
    doc["task_version"] = "0" * 64
    moved = tmp_path / "moved" / "old-version"
    shutil.copytree(out, moved)
    (moved / "episode.json").write_text(json.dumps(doc))
    warnings: list[str] = []
    assert load_samples(ws, moved.parent, on_warning=warnings.append) == 1
    assert len(warnings) == 1 and "loaded against" in warnings[0]


@pytest.mark.slow
def test_demo_needs_no_docker(tmp_path: Path) -> None:
    env = {**os.environ, "DOCKER_HOST": "unix:///nonexistent", "BANDPASS_HOME": str(tmp_path / "home")}
    cmd = [
        sys.executable,
        "-m",
        "bandpass.tui.cli",
        "demo",
        "--no-tui",
        "--json",
        "--workspace",
        str(tmp_path / "demo"),
    ]
    first = subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True, timeout=120)
    assert first.returncode == 0, first.stderr
    summary = json.loads(first.stdout)
    n = len(sample_dirs(SAMPLES))
    # 8 example tasks and the one the sample generation wrote and the audit accepted
    assert (summary["tasks"], summary["samples_loaded"], summary["episodes"]) == (9, n, n)
    assert summary["warnings"] == []
    again = json.loads(subprocess.run(cmd, cwd=REPO, env=env, capture_output=True, text=True).stdout)
    assert (again["samples_loaded"], again["episodes"]) == (0, n)
    reset = subprocess.run([*cmd, "--reset"], cwd=REPO, env=env, capture_output=True, text=True)
    assert json.loads(reset.stdout)["samples_loaded"] == n
    assert not (tmp_path / "home").exists()  # the demo never touches $BANDPASS_HOME


@pytest.mark.slow
def test_demo_reset_refuses_a_folder_that_is_not_a_workspace(tmp_path: Path) -> None:
    precious = tmp_path / "precious"
    precious.mkdir()
    (precious / "notes.txt").write_text("keep me")
    cmd = [
        sys.executable,
        "-m",
        "bandpass.tui.cli",
        "demo",
        "--no-tui",
        "--reset",
        "--workspace",
        str(precious),
    ]
    res = subprocess.run(cmd, cwd=REPO, capture_output=True, text=True, timeout=60)
    assert res.returncode == 1 and "not a Bandpass workspace" in res.stderr
    assert (precious / "notes.txt").read_text() == "keep me"


@pytest.mark.parametrize("slug", ["infra-container-died", "nop-fail"])
def test_samples_without_a_verifier_or_steps_still_load(
    workspace: Workspace, tmp_path: Path, slug: str
) -> None:
    ws = workspace
    assert import_paths(ws, [EXAMPLES]).ok
    shutil.copytree(SAMPLES / slug, tmp_path / "one" / slug)
    assert load_samples(ws, tmp_path / "one") == 1
    with session(ws.engine) as s:
        (ep,) = [e for e in queries.episodes(s) if _slug(e) == slug]
    assert ep.outcome == read_sample(SAMPLES / slug)["outcome"]


def test_generation_samples_load_once_with_their_task_and_audit(workspace: Workspace) -> None:
    ws = workspace
    assert load_generation_samples(ws, SAMPLES) == 2
    assert load_generation_samples(ws, SAMPLES) == 0
    with session(ws.engine) as s:
        gens = {g.outcome: g for g in queries.recent_generations(s)}
        assert set(gens) == {"accepted", "rejected"}
        accepted = gens["accepted"]
        version = queries.get_version(s, accepted.task_version_id)  # type: ignore[arg-type]
        assert version is not None and version.origin == "generated"
        audit = queries.latest_audit(s, version.id)  # type: ignore[arg-type]
        assert audit is not None and audit.verdict == "accepted"
        rejected = gens["rejected"]
    assert "invalidity.trivially_solved" in rejected.reason and rejected.task_version_id is None
    view = read_transcript(accepted)
    audits = [e for e in json.loads(accepted.transcript_json) if e.get("type") == "audit"]
    assert [a["verdict"] for a in audits] == ["rejected", "accepted"]  # repaired after reading the audit
    assert view is not None


def test_a_broken_generation_sample_names_its_file(tmp_path: Path, workspace: Workspace) -> None:
    bad = tmp_path / "generations" / "broken"
    bad.mkdir(parents=True)
    (bad / "generation.json").write_text('{"format": "bandpass-generation-sample/1", "generation": []}')
    with pytest.raises(GenerationSampleError, match=r"broken/generation.json: field 'generation'"):
        load_generation_samples(workspace, tmp_path)


def test_shipped_samples_hold_no_key() -> None:
    """The samples were recorded against servers that demanded API keys; none reached the files (the
    transcripts and reviews keep what the model sent, redacted)."""
    key_shaped = re.compile(rb"sk-ant-[A-Za-z0-9_-]{8,}|sk-[A-Za-z0-9]{20,}")
    files = [p for p in SAMPLES.rglob("*") if p.is_file()]
    assert len(files) > 100
    leaks = [str(p) for p in files if key_shaped.search(p.read_bytes())]
    assert leaks == []


@pytest.mark.slow
def test_demo_names_a_broken_sample_file_instead_of_a_traceback(tmp_path: Path) -> None:
    """A damaged sample (a bad checkout, a hand edit) is one line naming the file, exit 1."""
    import bandpass.tui.commands.demo as demo

    broken = tmp_path / "samples"
    shutil.copytree(SAMPLES / "policy-pass", broken / "policy-pass")
    (broken / "policy-pass" / "episode.json").write_text('{"format": "bandpass-sample/9"}')
    code = (
        "import sys, pathlib, bandpass.tui.commands.demo as d; from bandpass.tui.cli import app\n"
        f"d.SAMPLES_DIR = pathlib.Path({str(broken)!r})\n"
        "sys.argv = ['bandpass', 'demo', '--no-tui', '--workspace', sys.argv[1]]\n"
        "app()\n"
    )
    res = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "ws")],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert res.returncode == 1, res.stderr
    assert "policy-pass/episode.json: format 'bandpass-sample/9'" in res.stderr
    assert "Traceback" not in res.stderr
    assert demo.SAMPLES_DIR.name == "samples"  # the real module was not touched
