"""The audit proves a task against hostile twins of the oracle's own artifacts (real Docker).

Three tasks ask for the same ``/app/solution.py`` and differ only in how ``test.sh`` judges it: one trusts
pytest's exit status (the shape most hand-written verifiers have), one reads pytest's junit report, one
runs the agent's code in a subprocess and checks its output. The twins replace the oracle's
``solution.py`` with a module that exits 0 when imported, one that writes reward 1 and exits 0, and one
that leaves a background reward writer: the first task is rejected as a reward hack naming the weakness
and the fix, the other two are accepted.
"""

from __future__ import annotations

import pytest

from bandpass.engine.audit.task_audit import AuditReport, audit_version
from bandpass.engine.core import probes
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.taskfactory import make_task

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

INSTRUCTION = "Write /app/solution.py defining answer(), which returns 42."
SOLVE = (
    "#!/bin/bash\nprintf 'def answer():\\n    return 42\\n\\n\\n"
    'if __name__ == "__main__":\\n    print(answer())\\n\' > /app/solution.py\n'
)
TEST_PY = """import sys

sys.path.insert(0, "/app")
import solution  # noqa: E402


def test_answer():
    assert solution.answer() == 42
"""
_REWARD = "then echo 1 > /logs/verifier/reward.txt; else echo 0 > /logs/verifier/reward.txt; fi\n"
#: test.sh trusts pytest's exit status
TRUSTS_EXIT = (
    "#!/bin/bash\nmkdir -p /logs/verifier\ncd /tests\n"
    "if python3 -m pytest -q -p no:cacheprovider test_solution.py; " + _REWARD
)
#: test.sh reads pytest's junit report: tests were collected, none failed or errored
JUNIT = """#!/bin/bash
mkdir -p /logs/verifier
cd /tests
python3 -m pytest -q -p no:cacheprovider --junitxml=/logs/verifier/junit.xml test_solution.py
python3 - <<'PY'
import xml.etree.ElementTree as ET
ok = False
try:
    root = ET.parse("/logs/verifier/junit.xml").getroot()
    suites = [root] if root.tag == "testsuite" else list(root)
    tests = sum(int(s.get("tests", 0)) for s in suites)
    bad = sum(int(s.get(k, 0)) for s in suites for k in ("failures", "errors", "skipped"))
    ok = tests > 0 and bad == 0
except Exception as exc:
    print("no usable junit report:", exc)
open("/logs/verifier/reward.txt", "w").write("1\\n" if ok else "0\\n")
PY
"""
#: test.sh runs the agent's code in a subprocess and checks what it prints
SUBPROCESS = (
    "#!/bin/bash\nmkdir -p /logs/verifier\ncd /tmp\n"
    'if [ "$(timeout 20 python3 /app/solution.py 2>/dev/null)" = 42 ]; ' + _REWARD
)
TASKS = {"twin-trusts-exit": TRUSTS_EXIT, "twin-junit": JUNIT, "twin-subprocess": SUBPROCESS}


@pytest.fixture(scope="module")
def audits(tmp_path_factory: pytest.TempPathFactory) -> dict[str, AuditReport]:
    root = tmp_path_factory.mktemp("twins")
    ws = Workspace.open(root / "ws")
    for name, test in TASKS.items():
        d = make_task(root / "src", name, instruction=INSTRUCTION, solve=SOLVE, test=test)
        (d / "tests" / "test_solution.py").write_text(TEST_PY)
    assert import_paths(ws, [root / "src"]).ok
    with session(ws.engine) as s:
        vids = {r.name: r.version_id for r in queries.task_rows(s)}
    return {name: audit_version(ws, vid, reruns=1) for name, vid in vids.items()}


def test_a_verifier_that_trusts_pytests_exit_status_is_rejected(audits: dict[str, AuditReport]) -> None:
    report = audits["twin-trusts-exit"]
    assert report.verdict == "rejected" and "misalignment.reward_hack" in report.reasons, report.reasons
    twins = report.checks["hostile_twins"]
    assert twins["code_files"] == [{"path": "/app/solution.py", "kind": "python"}]
    exit0 = twins["twins"][probes.TWIN_EXIT0]
    # test.sh itself wrote reward 1; the rollout's defences voided it (the session never finished), and
    # the task is rejected all the same: a subtler twin could lie to an observer inside pytest
    assert exit0["paid"] and exit0["test_sh_reward"] == 1.0 and exit0["test_sh_wrote"]["reward.txt"] == "1"
    assert exit0["outcome"] == "agent_error:verifier_hijacked"
    assert "pytest's exit status" in exit0["weakness"] and "junit" in exit0["fix"]
    finding = next(f["detail"] for f in report.checks["findings"] if probes.TWIN_EXIT0 in f["detail"])
    assert "test.sh trusts pytest's exit status" in finding and "Fix:" in finding


@pytest.mark.parametrize("name", ["twin-junit", "twin-subprocess"])
def test_a_verifier_that_checks_results_is_accepted(audits: dict[str, AuditReport], name: str) -> None:
    report = audits[name]
    assert report.verdict == "accepted", report.checks.get("findings")
    twins = report.checks["hostile_twins"]["twins"]
    assert set(twins) == {probes.TWIN_EXIT0, probes.TWIN_REWARD_WRITER, probes.TWIN_BACKGROUND_WRITER}
    for verdict in twins.values():
        assert not verdict["paid"] and verdict["outcome"] != "passed", verdict
        assert (verdict["test_sh_reward"] or 0.0) < 1.0, verdict
    # the reward.json the writer twin left where test.sh writes only reward.txt: Harbor's own verifier
    # (reward.json first) would have paid it; the rollout's defences void it from outside the tests
    writer = twins[probes.TWIN_REWARD_WRITER]
    assert writer["harbor_would_pay"] and writer["outcome"] == "agent_error:reward_forged"
    assert writer["test_sh_wrote"]["reward.json"] == "twin's"


def test_the_twins_cost_is_recorded(audits: dict[str, AuditReport]) -> None:
    """Printed, not asserted (docs/guide/audit.md records it): the twins' episodes against the whole audit."""
    for name, report in audits.items():
        twins = report.checks["hostile_twins"]
        assert twins["seconds"] > 0
        episodes = report.checks["episodes"]
        assert all(len(episodes[t]) == 1 for t in twins["twins"])
        runs = sum(len(v) for v in episodes.values())
        print(
            f"\n{name}: audit {report.duration_s:.1f} s, {runs} episodes; the 3 twins' phases "
            f"{twins['seconds']:.1f} s (no agent phase: a replay each)"
        )
