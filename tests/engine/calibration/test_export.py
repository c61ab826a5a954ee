"""Export: gated set, trainer schemas, byte-identical re-export, datasets loading, Harbor round trip."""

from __future__ import annotations

import csv
import hashlib
import json
import os
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from typer.testing import CliRunner

import bandpass.tui.commands.export  # noqa: F401 - registers `report` and `export` on tui.cli.app
from bandpass.engine.calibration.export import ExportError, ExportParams, export, stratified_split
from bandpass.engine.core.workspace import Workspace
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk
from bandpass.tui.cli import app
from tests.support.calib_data import add_episodes, add_task, instruction_for, outcomes

M = "qwen-9b"
IN_BAND = {  # name -> (category, outcomes): all decided inside [0.1, 0.9] at k=2 and 90% confidence
    "alpha": ("cli", outcomes(30, 60)),
    "bravo": ("cli", outcomes(20, 80)),
    "charlie": ("cli", outcomes(35, 45)),
    "delta": ("git", outcomes(20, 60)),
    "echo": ("git", outcomes(20, 40, agent_error__turn_limit=20)),
    "foxtrot": ("net", outcomes(15, 85)),
    "golf": ("net", outcomes(30, 50)),
    "hotel": ("build", outcomes(25, 75)),
}
IN = outcomes(30, 60)  # decided in: the excluded tasks below fail one other gate each


@pytest.fixture
def ws(workspace: Workspace) -> Workspace:
    for name, (cat, outs) in IN_BAND.items():
        vid, _ = add_task(workspace, name, category=cat)
        add_episodes(workspace, vid, M, outs)
    # excluded, one reason each
    excluded: list[tuple[str, dict[str, Any], list[str]]] = [
        ("too-easy", {}, outcomes(30, 0)),
        ("too-hard", {}, outcomes(0, 150)),
        ("unaudited", {"audit": None}, IN),
        ("rejected", {"audit": "rejected"}, IN),
        ("thin", {}, outcomes(2, 4)),  # pass@2 = 0.6 by the point estimate: undecided
        ("dupe", {"instruction": instruction_for("alpha")}, IN),
        ("infra-heavy", {}, IN + outcomes(infra_error__container_died=410)),
        ("tagged", {}, IN),
    ]
    for name, kw, outs in excluded:
        vid, _ = add_task(workspace, name, **kw)
        ids = add_episodes(workspace, vid, M, outs)
        if name == "tagged":
            with session(workspace.engine) as s:
                q.add_tag(s, ids[0], "misalignment", "reward_hack", blocking=True)
    return workspace


def _files(root: Path) -> dict[str, bytes]:
    return {p.relative_to(root).as_posix(): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


def test_export_gates_and_layout(ws: Workspace, tmp_path: Path) -> None:
    res = export(ws, ExportParams(model=M), tmp_path / "out")
    assert sorted(t.name for t in res.tasks) == sorted(IN_BAND)
    assert res.excluded == {
        "dupe": ["duplicate:alpha"],
        "infra-heavy": ["infra_rate:0.82"],
        "rejected": ["audit:rejected"],
        "tagged": ["blocking_tag:1"],
        "thin": ["band:undecided"],
        "too-easy": ["band:above"],
        "too-hard": ["band:below"],
        "unaudited": ["audit:none"],
    }
    out = tmp_path / "out"
    files = _files(out)
    assert "manifest.json" in files
    for rel in (
        "verl/train.parquet",
        "verl/validation.parquet",
        "skyrl/train.parquet",
        "skyrl/validation.parquet",
        "jsonl/verl_train.jsonl",
        "jsonl/skyrl_validation.jsonl",
        "pass_counts.parquet",
        "pass_counts.csv",
        "harbor/alpha/instruction.md",
        "harbor/alpha/tests/test.sh",
    ):
        assert rel in files, rel
    assert not any(rel.startswith("harbor/too-easy") for rel in files)
    assert os.access(out / "harbor/alpha/tests/test.sh", os.X_OK)
    manifest = json.loads(files["manifest.json"])
    assert manifest["files"] == {
        rel: hashlib.sha256(data).hexdigest() for rel, data in files.items() if rel != "manifest.json"
    }
    assert manifest["params"]["model"] == M and manifest["params"]["lo"] == 0.1
    assert hashlib.sha256(files["manifest.json"]).hexdigest() == res.manifest_sha256
    # recorded in the database with its parameters
    with session(ws.engine) as s:
        (rec,) = q.list_exports(s, M)
    assert rec.id == res.export_id and rec.task_count == 8 and rec.manifest_sha256 == res.manifest_sha256
    assert json.loads(rec.params_json) == ExportParams(model=M).as_dict()
    assert rec.out_dir == str(out.resolve())


def test_rows_follow_trainer_schemas(ws: Workspace, tmp_path: Path) -> None:
    export(ws, ExportParams(model=M, val_fraction=0.25, seed=3), tmp_path / "out")
    out = tmp_path / "out"
    verl = pq.read_table(out / "verl/train.parquet").to_pylist()
    assert pq.read_table(out / "verl/train.parquet").column_names == [
        "data_source",
        "prompt",
        "ability",
        "reward_model",
        "extra_info",
    ]
    val = pq.read_table(out / "verl/validation.parquet").to_pylist()
    assert sorted(r["extra_info"]["task"] for r in verl + val) == sorted(IN_BAND)
    row = next(r for r in verl + val if r["extra_info"]["task"] == "delta")
    task = row["extra_info"]["task"]
    assert row["data_source"] == "bandpass" and row["ability"] == "terminal"
    assert row["prompt"] == [{"role": "user", "content": instruction_for("delta", "git")}]
    assert (row["extra_info"]["category"], row["extra_info"]["n"], row["extra_info"]["c"]) == ("git", 80, 20)
    assert row["reward_model"] == {"style": "rule", "ground_truth": f"harbor/{task}/tests"}
    assert row["extra_info"]["task_path"] == f"harbor/{task}"
    assert (out / row["extra_info"]["task_path"] / "task.toml").is_file()
    assert len(row["extra_info"]["version_hash"]) == 64
    assert 0.1 <= row["extra_info"]["pass_at_k"] <= 0.9
    skyrl_tbl = pq.read_table(out / "skyrl/train.parquet")
    assert skyrl_tbl.column_names == ["data_source", "prompt", "env_class", "reward_spec", "extra_info"]
    sk = skyrl_tbl.to_pylist()[0]
    assert sk["env_class"] == "harbor" and sk["reward_spec"]["method"] == "rule"
    assert sk["extra_info"]["task_dir"] == f"harbor/{sk['extra_info']['task']}"
    # jsonl holds the same rows
    jl = [json.loads(line) for line in (out / "jsonl/verl_train.jsonl").read_text().splitlines()]
    assert jl == verl
    # indices are per split, in order
    assert [r["extra_info"]["index"] for r in verl] == list(range(len(verl)))
    assert {r["extra_info"]["split"] for r in verl} == {"train"}
    # pass counts
    with (out / "pass_counts.csv").open() as f:
        counts = list(csv.DictReader(f))
    assert [c["task"] for c in counts] == sorted(IN_BAND)
    echo = next(c for c in counts if c["task"] == "echo")
    assert (echo["model"], echo["attempts"], echo["solved"], echo["infra_errors"]) == (M, "80", "20", "0")
    assert pq.read_table(out / "pass_counts.parquet").to_pylist() == [
        {**c, "attempts": int(c["attempts"]), "solved": int(c["solved"]), "infra_errors": 0} for c in counts
    ]


def test_rows_carry_the_decision_and_the_band_history(ws: Workspace, tmp_path: Path) -> None:
    """Gates use the decision; each row says so, with the task's band ledger across checkpoints."""
    (ws.root / "bandpass.toml").write_text(
        f'[models.{M}]\nseries = "run"\ncheckpoint_step = 40\n\n'
        '[models.early]\nseries = "run"\ncheckpoint_step = 10\n'
    )
    ws = Workspace.open(ws.root)
    with session(ws.engine) as s:
        alpha = q.resolve_version(s, "alpha")
    assert alpha is not None
    add_episodes(ws, pk(alpha), "early", outcomes(0, 150))
    res = export(ws, ExportParams(model=M, val_fraction=0.0), tmp_path / "out")
    manifest = json.loads((tmp_path / "out/manifest.json").read_text())
    t = next(t for t in manifest["tasks"] if t["name"] == "alpha")
    assert t["band"] == "in" and t["confidence"] == 0.9
    assert 0.1 <= t["pass_at_k_interval"][0] < t["pass_at_k"] < t["pass_at_k_interval"][1] <= 0.9
    assert manifest["params"]["confidence"] == 0.9
    rows = {
        r["extra_info"]["task"]: r["extra_info"]
        for r in pq.read_table(tmp_path / "out/verl/train.parquet").to_pylist()
    }
    extra = rows["alpha"]
    assert extra["band"] == "in" and extra["pass_at_k_lo"] == t["pass_at_k_interval"][0]
    history = [
        (h["model"], h["checkpoint_step"], h["decision"], h["n"], h["c"]) for h in extra["band_history"]
    ]
    assert history == [("early", 10, "below", 150, 0), (M, 40, "in", 90, 30)]  # checkpoint order
    assert [(h["model"], h["decision"]) for h in rows["bravo"]["band_history"]] == [(M, "in")]
    again = export(ws, ExportParams(model=M, val_fraction=0.0), tmp_path / "again")
    assert again.manifest_sha256 == res.manifest_sha256  # recording the history again changed nothing
    with pytest.raises(ExportError, match="--confidence"):
        ExportParams(model=M, confidence=1.0)


@pytest.mark.slow
def test_reexport_is_byte_identical(ws: Workspace, tmp_path: Path) -> None:
    params = ExportParams(model=M, curriculum=True, val_fraction=0.25, seed=7)
    a = export(ws, params, tmp_path / "a")
    b = export(ws, params, tmp_path / "b")
    fa, fb = _files(tmp_path / "a"), _files(tmp_path / "b")
    assert sorted(fa) == sorted(fb)
    for rel in fa:
        assert fa[rel] == fb[rel], f"{rel} differs between two exports of the same database"
    assert a.manifest_sha256 == b.manifest_sha256
    assert a.export_id != b.export_id  # both recorded
    c = export(ws, ExportParams(model=M, curriculum=True, val_fraction=0.25, seed=8), tmp_path / "c")
    assert c.manifest_sha256 != a.manifest_sha256  # the seed is part of the identity


@pytest.mark.slow
def test_split_is_stratified_and_seeded(ws: Workspace, tmp_path: Path) -> None:
    res = export(ws, ExportParams(model=M, val_fraction=0.25, seed=0), tmp_path / "out")
    val = [t for t in res.tasks if t.split == "validation"]
    assert len(val) == 2  # round(8 * 0.25)
    assert len({t.category for t in val}) == 2  # from two categories, not both from one
    again = export(ws, ExportParams(model=M, val_fraction=0.25, seed=0), tmp_path / "again")
    assert [(t.name, t.split) for t in again.tasks] == [(t.name, t.split) for t in res.tasks]
    splits = set()
    for seed in range(12):
        r = export(ws, ExportParams(model=M, val_fraction=0.25, seed=seed), tmp_path / f"s{seed}")
        splits.add(tuple(sorted(t.name for t in r.tasks if t.split == "validation")))
    assert len(splits) > 1  # the seed matters
    none = export(ws, ExportParams(model=M, val_fraction=0.0), tmp_path / "noval")
    assert {t.split for t in none.tasks} == {"train"}
    assert not (tmp_path / "noval/verl/validation.parquet").exists()


def test_stratified_split_edge_cases() -> None:
    from bandpass.engine.calibration.calibrate import TaskEstimate

    def est(name: str, cat: str) -> TaskEstimate:
        return TaskEstimate(name, 0, 0, "h", "p", "i", cat, "", M)

    singles = [est(f"t{i}", f"cat{i}") for i in range(10)]  # ten one-task categories
    split = stratified_split(singles, 0.2, 0)
    assert sum(v == "validation" for v in split.values()) == 2
    assert stratified_split([est("only", "x")], 0.5, 0) == {"only": "train"}
    two = stratified_split([est("a", "x"), est("b", "x")], 0.01, 0)
    assert sorted(two.values()) == ["train", "validation"]  # at least one validation, never all


def test_curriculum_orders_easy_to_hard(ws: Workspace, tmp_path: Path) -> None:
    res = export(ws, ExportParams(model=M, curriculum=True, val_fraction=0.0), tmp_path / "out")
    rates = [t.c / t.n for t in res.tasks]
    assert rates == sorted(rates, reverse=True)
    rows = pq.read_table(tmp_path / "out/verl/train.parquet").to_pylist()
    assert [r["extra_info"]["task"] for r in rows] == [t.name for t in res.tasks]
    plain = export(ws, ExportParams(model=M, val_fraction=0.0), tmp_path / "plain")
    assert [t.name for t in plain.tasks] == sorted(IN_BAND)


def test_parquet_loads_with_datasets(ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HF_DATASETS_OFFLINE", "1")
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    monkeypatch.setenv("HF_HOME", str(tmp_path / "hf"))
    import datasets  # the dev extra installs it

    export(ws, ExportParams(model=M, val_fraction=0.25), tmp_path / "out")
    out = tmp_path / "out"
    cache = str(tmp_path / "hf-cache")
    verl = datasets.load_dataset(
        "parquet",
        data_files={
            "train": str(out / "verl/train.parquet"),
            "validation": str(out / "verl/validation.parquet"),
        },
        cache_dir=cache,
    )
    assert verl["train"].column_names == ["data_source", "prompt", "ability", "reward_model", "extra_info"]
    assert verl["train"].num_rows + verl["validation"].num_rows == len(IN_BAND)
    first = verl["train"][0]
    assert first["prompt"][0]["role"] == "user" and first["reward_model"]["style"] == "rule"
    skyrl = datasets.load_dataset("parquet", data_files=str(out / "skyrl/train.parquet"), cache_dir=cache)
    assert skyrl["train"].column_names == ["data_source", "prompt", "env_class", "reward_spec", "extra_info"]
    assert skyrl["train"][0]["extra_info"]["task_dir"].startswith("harbor/")
    counts = datasets.load_dataset("parquet", data_files=str(out / "pass_counts.parquet"), cache_dir=cache)
    assert counts["train"].column_names[:5] == ["task", "version_hash", "model", "attempts", "solved"]


def test_harbor_round_trip_keeps_version_hashes(ws: Workspace, tmp_path: Path) -> None:
    from bandpass.engine.tasks.importer import import_paths

    res = export(ws, ExportParams(model=M, formats=("harbor",)), tmp_path / "out")
    fresh = Workspace.open(tmp_path / "fresh")
    report = import_paths(fresh, [tmp_path / "out" / "harbor"])
    assert report.ok, [i.problems for i in report.items]
    assert sorted((i.name, i.version_hash) for i in report.items) == sorted(
        (t.name, t.version_hash) for t in res.tasks
    )


def test_formats_subset_and_paths_without_harbor(ws: Workspace, tmp_path: Path) -> None:
    export(ws, ExportParams(model=M, formats=("verl",), val_fraction=0.0), tmp_path / "out")
    files = _files(tmp_path / "out")
    assert sorted(files) == ["manifest.json", "pass_counts.csv", "pass_counts.parquet", "verl/train.parquet"]
    row = pq.read_table(tmp_path / "out/verl/train.parquet").to_pylist()[0]
    # without Harbor directories in the export, rows point at the workspace's stored copy
    assert Path(row["extra_info"]["task_path"]).is_absolute()
    assert (Path(row["extra_info"]["task_path"]) / "tests/test.sh").is_file()


def test_secret_in_task_refuses_export(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    secret = "sk-ant-api03-do-not-ship-this-0123456789"
    monkeypatch.setenv("ANTHROPIC_API_KEY", secret)
    vid, _ = add_task(ws, "leaky", instruction=f"Use the key {secret} to call the API and save the reply.\n")
    add_episodes(ws, vid, M, IN)
    with pytest.raises(ExportError, match=r"contains the value of \$ANTHROPIC_API_KEY") as exc:
        export(ws, ExportParams(model=M), tmp_path / "out")
    assert secret not in str(exc.value)
    assert not (tmp_path / "out").exists()
    assert not list(tmp_path.glob(".out.partial-*"))
    monkeypatch.delenv("ANTHROPIC_API_KEY")
    export(ws, ExportParams(model=M), tmp_path / "out")  # nothing secret in the environment: fine


def test_out_dir_safety(ws: Workspace, tmp_path: Path) -> None:
    other = tmp_path / "photos"
    other.mkdir()
    (other / "cat.jpg").write_bytes(b"meow")
    with pytest.raises(ExportError, match="is not empty"):
        export(ws, ExportParams(model=M), other)
    with pytest.raises(ExportError, match="holds no Bandpass export"):
        export(ws, ExportParams(model=M), other, overwrite=True)
    assert (other / "cat.jpg").read_bytes() == b"meow"
    first = export(ws, ExportParams(model=M), tmp_path / "out")
    second = export(ws, ExportParams(model=M), tmp_path / "out", overwrite=True)
    assert first.manifest_sha256 == second.manifest_sha256


def test_tampered_stored_version_is_refused(ws: Workspace, tmp_path: Path) -> None:
    with session(ws.engine) as s:
        tv = q.resolve_version(s, "alpha")
    assert tv is not None
    (ws.abs(tv.path) / "instruction.md").write_text("edited behind the store's back\n")
    with pytest.raises(ExportError, match="alpha: files under .* no longer match version"):
        export(ws, ExportParams(model=M), tmp_path / "out")


def test_export_params_validation() -> None:
    with pytest.raises(ExportError, match="--format: expected a comma list"):
        ExportParams(model=M, formats=("verl", "csv"))
    with pytest.raises(ExportError, match="--val-fraction"):
        ExportParams(model=M, val_fraction=1.0)
    assert ExportParams(model=M, formats=("jsonl", "harbor", "jsonl")).formats == ("harbor", "jsonl")


def test_cli_export(ws: Workspace, tmp_path: Path) -> None:
    runner = CliRunner()
    base = ["--workspace", str(ws.root), "export", "--model", M]
    r = runner.invoke(app, [*base, "--band", "0.9:0.1", "--out", str(tmp_path / "x")])
    assert r.exit_code == 1
    assert "--band: expected LO:HI with 0 <= LO <= HI <= 1, got 0.9:0.1" in r.stderr
    r = runner.invoke(app, [*base, "--format", "verl,nope", "--out", str(tmp_path / "x")])
    assert r.exit_code == 1 and "--format" in r.stderr
    r = runner.invoke(
        app,
        [
            *base,
            "--band",
            "0.1:0.9",
            "--k",
            "2",
            "--format",
            "harbor,verl,skyrl,jsonl",
            "--out",
            str(tmp_path / "o"),
        ]
        + ["--curriculum", "--val-fraction", "0.25", "--seed", "1"],
    )
    assert r.exit_code == 0, r.output
    assert "exported 8 tasks" in r.stdout and "too-easy" in r.stdout and "band:above" in r.stdout
    r = runner.invoke(app, [*base, "--out", str(tmp_path / "o"), "--json"])
    assert r.exit_code == 1 and "is not empty" in r.stderr
    r = runner.invoke(app, [*base, "--json"])  # default folder under the workspace's exports/
    assert r.exit_code == 0, r.output
    assert Path(json.loads(r.stdout)["out_dir"]).parent == ws.exports_dir.resolve()
