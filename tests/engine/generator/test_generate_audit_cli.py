"""``bandpass generate --audit`` through the real CLI: generation and the full audit as one pipeline.

The scripted Messages server (tests/support/servers/anthropic_server.py, real HTTP, the real ``anthropic``
SDK) plays a generator that writes two sound tasks, one attempt after the other; the CLI must audit each
accepted task in full (the corpus audit, not only the generator's own staging audit) while the batch goes
on, say so in what it prints, leave the verdicts where ``bandpass tasks --json`` reads them, and leave no
container behind. Real Docker: marked ``docker``.
"""

from __future__ import annotations

import itertools
import json
import os
import subprocess
import sys
from typing import Any

import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.sandbox.labels import LABEL, WORKSPACE
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.queries import audit_queue as aq
from tests.support.generated_task import TASK_TOML
from tests.support.paths import REPO
from tests.support.servers.anthropic_server import AnthropicServer, Reply, text, tool

pytestmark = [pytest.mark.docker, pytest.mark.timeout(900)]

MODEL = "claude-haiku-4-5-pipeline"  # priced in the workspace's generator-prices.toml below


def _task(
    name: str, instruction: str, data: tuple[str, str], solve: str, expected: str, out: str
) -> dict[str, str]:
    """A tiny sound task: ``data`` (file name, content) copied into /app, the oracle writes ``expected``
    to ``out``, the verifier rewards exactly that."""
    data_name, data_content = data
    return {
        "instruction.md": instruction + "\n",
        "task.toml": TASK_TOML.replace("bandpass/sum-numbers-gen", name),
        "environment/Dockerfile": (
            f"FROM debian:bookworm-slim\nWORKDIR /app\nCOPY {data_name} /app/{data_name}\n"
        ),
        f"environment/{data_name}": data_content,
        "solution/solve.sh": f"#!/bin/bash\n{solve}\n",
        "tests/test.sh": (
            "#!/bin/bash\nmkdir -p /logs/verifier\n"
            f'if [ "$(cat {out} 2>/dev/null)" = "{expected}" ]; then echo 1 > /logs/verifier/reward.txt\n'
            "else echo 0 > /logs/verifier/reward.txt; fi\n"
        ),
    }


#: Two tasks unlike each other (the generator refuses a near-duplicate instruction), in the order written.
TASKS = {
    "bandpass/sum-numbers-pipe": _task(
        "bandpass/sum-numbers-pipe",
        "The file /app/numbers.txt holds one integer per line. Write their sum, as a single line with just "
        "the number, to /app/total.txt.",
        ("numbers.txt", "3\n5\n11\n-2\n"),
        "awk '{ s += $1 } END { print s }' /app/numbers.txt > /app/total.txt",
        "17",
        "/app/total.txt",
    ),
    "bandpass/q-words-pipe": _task(
        "bandpass/q-words-pipe",
        "Count how many words listed in /app/words.txt contain the letter q; save that count to "
        "/app/q_count.txt.",
        ("words.txt", "queen\napple\nquiet\nbanana\nsquid\n"),
        "grep -c q /app/words.txt > /app/q_count.txt",
        "3",
        "/app/q_count.txt",
    ),
}


def _script(server: AnthropicServer) -> None:
    """Each attempt: write its task's files, audit them, submit. The server plays every conversation of
    the model from its first turn, so the first turn hands out the tasks in order (attempts run one at a
    time: ``--concurrency 1``)."""
    order = itertools.count()
    names = list(TASKS)

    def write_next(_body: dict[str, Any]) -> Reply:
        files = TASKS[names[next(order)]]
        return Reply(
            [text("Writing the task."), *[tool("write_file", path=p, content=c) for p, c in files.items()]]
        )

    server.script(
        MODEL,
        [write_next, Reply([tool("audit")]), Reply([text("Accepted."), tool("submit", summary="A task.")])],
    )


def _containers(ws: Workspace) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = get_client().api.containers(
        all=True, filters={"label": [f"{LABEL}=1", f"{WORKSPACE}={ws.root}"]}
    )
    return found


def test_generate_with_audit_audits_each_accepted_task_while_the_batch_goes_on(
    workspace: Workspace, server: AnthropicServer
) -> None:
    (workspace.root / "generator-prices.toml").write_text(f'[models."{MODEL}"]\ninput = 1.0\noutput = 5.0\n')
    _script(server)
    env = {
        **os.environ,
        "ANTHROPIC_API_KEY": server.api_key,
        "ANTHROPIC_BASE_URL": server.base_url,
        "PYTHONPATH": str(REPO),
    }
    cmd = [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(workspace.root)]
    proc = subprocess.run(
        [*cmd, "generate", "--n", "2", "--model", MODEL, "--prompt", "v1-plain", "--concurrency", "1",
         "--reruns", "1", "--seed", "3", "--audit"],
        capture_output=True, text=True, env=env, timeout=840,
    )  # fmt: skip
    said = proc.stdout + proc.stderr
    assert proc.returncode == 0, said
    assert "2/2 accepted" in proc.stdout, said
    for name in TASKS:
        assert f"    {name}  (generation " in proc.stdout, said
    # The curator is told the audits ran and what they found, with the run to --resume ...
    (summary,) = [line for line in proc.stdout.splitlines() if line.startswith("audited as they came:")]
    assert summary.startswith("audited as they came: 2/2 (2 accepted); run "), said
    run_id = summary.rsplit(" ", 1)[1]
    # ... and sees them live: a progress line per phase change, ending with both done.
    progress = [line for line in proc.stderr.splitlines() if line.startswith("  audit [")]
    assert progress and progress[-1].startswith("  audit [2/2 done, 0 running]"), said
    assert server.api_key not in said

    with session(workspace.engine) as s:
        run = aq.get_run(s, run_id)
        reruns = json.loads(run.params_json)["reruns"] if run is not None else None
        names = {r.version_id: r.name for r in queries.task_rows(s)}
        jobs = {names[j.task_version_id]: (j.status, j.tries, j.audit_id, j.started_at, j.created_at)
                for j in aq.jobs(s, run_id)}  # fmt: skip
        audits = {
            names[vid]: [(a.id, a.verdict, a.reasons_json) for a in queries.audits_for_version(s, vid)]
            for vid in names
        }
    assert reruns == 3  # the full audit's reruns, not the generator's staging audit's (--reruns 1)
    assert sorted(jobs) == sorted(TASKS)
    for name, (status, tries, audit_id, _, _) in jobs.items():
        assert (status, tries) == ("done", 1), (name, jobs[name])
        # The run's audit is the version's latest, accepted; the generator's own staging audit came before.
        (newest_id, verdict, reasons), *earlier = audits[name]
        assert newest_id == audit_id and verdict == "accepted", (name, reasons)
        assert [a[1] for a in earlier] == ["accepted"], name
    # A pipeline, not generation then audit: the first task's audit began before the second was accepted.
    first, second = (jobs[name] for name in TASKS)
    assert first[3] is not None and first[3] < second[4], (first, second)

    proc = subprocess.run([*cmd, "tasks", "--json"], capture_output=True, text=True, env=env, timeout=60)
    assert proc.returncode == 0, proc.stderr
    rows = {r["name"]: r for r in json.loads(proc.stdout)}
    for name in TASKS:
        assert rows[name]["origin"] == "generated" and rows[name]["audit"] == "accepted", rows[name]
        assert "probes" in rows[name]["audit_phases"] and rows[name]["audit_cost"], rows[name]
    assert not _containers(workspace)
