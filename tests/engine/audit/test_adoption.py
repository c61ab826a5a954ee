"""An unaudited install task whose oracle passes in a rollout (real Docker, the real Harbor 0.25 loader).

The task asks for a command installed into /usr/local/bin: outside its workdir, undeclared. Verified in
a clean room that carries only the workdir, even its oracle scored 0. Now the batch first learns the
version's footprint from the oracle, adopts /usr/local/bin/sumcol, and every rollout passes; the audit
keeps the finding as a note (accepted), the export declares the path, and Harbor's own loader reads it.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
from typer.testing import CliRunner

import bandpass.tui.commands.tasks  # noqa: F401 - registers import and tasks on tui.cli.app
from bandpass.engine.app import batches, reads
from bandpass.engine.audit import adoption, footprint
from bandpass.engine.audit.task_audit import audit_version
from bandpass.engine.calibration.export import ExportParams, export
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.tui.cli import app
from tests.support.paths import REPO
from tests.support.taskfactory import make_task

HARBOR_PY = REPO / ".venv-harbor" / "bin" / "python"
SUMCOL = "/usr/local/bin/sumcol"
INSTALL_SOLVE = f"""#!/bin/bash
cat > {SUMCOL} <<'EOF'
#!/bin/bash
awk -v c="$1" '{{ s += $c }} END {{ print s }}'
EOF
chmod +x {SUMCOL}
"""
INSTALL_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(printf '1 2\\n3 4\\n' | sumcol 2)" = 6 ]
then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi
"""


def _rows(ws: Workspace, batch_id: str) -> list[tuple[str, str]]:
    with session(ws.engine) as s:
        return [(e.agent, e.outcome) for e in queries.episodes(s, batch_id=batch_id)]


@pytest.mark.docker
def test_an_unaudited_install_tasks_oracle_passes_in_a_rollout(workspace: Workspace, tmp_path: Path) -> None:
    src = make_task(
        tmp_path / "src",
        "install-sumcol",
        instruction=f"Install a command `sumcol N` at {SUMCOL} that prints the sum of column N of stdin.",
        solve=INSTALL_SOLVE,
        test=INSTALL_TEST,
    )
    assert import_paths(workspace, [src]).ok
    ws = workspace
    with session(ws.engine) as s:
        (row,) = queries.task_rows(s)
    vid = row.version_id

    notes: list[str] = []
    planned = batches.start_batch(
        ws, batches.StartBatch(name="oracle", kind="builtin", version_ids=[vid], k=2)
    )
    summary = batches.run_batch(ws, planned.batch_id, batches.RunOptions(concurrency=2), on_note=notes.append)
    assert (summary.passed, summary.total) == (2, 2), _rows(ws, planned.batch_id)
    assert any(f"adopted {SUMCOL}" in n for n in notes), notes

    # what was learnt, once, and from what: the clean room without it is the loss it prevented
    (row,) = [r for r in reads.task_rows(ws) if r.version_id == vid]
    assert row.adopted_artifacts == [SUMCOL]
    fp = row.footprint
    assert (fp["source"], fp["mode"], fp["clean_room"]["outcome"], fp["in_place"]["outcome"]) == (
        "rollout",
        "clean_room",
        "failed",
        "passed",
    )
    with session(ws.engine) as s:
        learning = [
            e for e in queries.episodes(s, version_id=vid) if e.batch_id.startswith(adoption.BATCH_PREFIX)
        ]
    assert {e.id for e in learning} == {fp["clean_room"]["episode"], fp["in_place"]["episode"]}
    assert adoption.to_learn(ws, [vid]) == []  # a second batch learns nothing again
    again = batches.start_batch(ws, batches.StartBatch(name="oracle", kind="builtin", version_ids=[vid], k=1))
    more: list[str] = []
    assert batches.run_batch(ws, again.batch_id, on_note=more.append).passed == 1 and more == []

    shown = CliRunner().invoke(app, ["-w", str(ws.root), "tasks", "-v"]).output
    assert "clean room +1 adopted" in shown and f"install-sumcol: adopted artifacts: {SUMCOL}" in shown

    # the audit learns the same, and the finding is a note: accepted, not rejected
    report = audit_version(ws, vid, reruns=1)
    assert report.verdict == "accepted", report.checks.get("findings")
    assert footprint.UNDECLARED in report.reasons
    assert report.checks["footprint"]["adopted"] == [SUMCOL]

    # the export declares it in the task.toml it writes, and Harbor 0.25's loader accepts that file
    out = tmp_path / "out"
    res = export(ws, ExportParams(model="oracle", lo=0.0, hi=1.0, min_samples=1, k=1), out)
    (task,) = res.tasks
    assert task.adopted_artifacts == [SUMCOL]
    manifest = json.loads((out / "manifest.json").read_text())
    assert manifest["tasks"][0]["adopted_artifacts"] == [SUMCOL]
    exported = out / "harbor" / task.dirname
    assert f'artifacts = ["{SUMCOL}"]' in (exported / "task.toml").read_text()
    harbor = subprocess.run(
        [
            str(HARBOR_PY),
            "-c",
            "import sys, json; from harbor.models.task.task import Task; "
            "arts = Task(sys.argv[1]).config.artifacts; "
            "print(json.dumps([a if isinstance(a, str) else a.source for a in arts]))",
            str(exported),
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert harbor.returncode == 0, harbor.stderr[-2000:]
    assert json.loads(harbor.stdout.strip().splitlines()[-1]) == [SUMCOL]
