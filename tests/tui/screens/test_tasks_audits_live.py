"""The Tasks screen's live audit line: an audit that another process claims, moves through its phases and
finishes shows up (which task, which phase, where) and goes away with its verdict in the table — read from
the store after its commits, with no Docker (the other process is played through the audit queue's own
queries, the ones engine/audit/corpus.py's runner calls)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from rich.console import Console
from textual.widgets import Static

from bandpass.engine.audit.phases import PHASES
from bandpass.engine.core.events import EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import pk
from bandpass.store.queries import audit_queue as aq
from bandpass.tui.app import BandpassApp
from bandpass.tui.screens.tasks import TasksScreen
from bandpass.tui.widgets.virtual_table import VirtualTable
from tests.support.taskfactory import make_task
from tests.support.waiting import wait_for

SIZE = (160, 45)
RUN = "run-elsewhere"
NODE = "worker-7"


def _plain(widget: Static) -> str:
    console = Console(record=True, width=200, color_system=None)
    console.print(widget.content)
    return console.export_text().strip()


def _says(line: Static, text: str) -> Callable[[], bool]:
    return lambda: _plain(line) == text


def _audit_column(table: VirtualTable) -> dict[str, str]:
    keys = [c.key for c in table.columns]
    return {r[keys.index("task")]: r[keys.index("audit")] for r in table.shown_rows()}


async def test_an_audit_run_by_another_process_is_shown_live_and_its_verdict_lands(
    ws: Workspace, tmp_path: Path
) -> None:
    names = ["alpha", "bravo", "charlie"]
    dirs = [  # distinct instructions: identical tasks would be one version
        make_task(tmp_path / "src", n, instruction=f"Write 42 into /app/answer.txt ({n}).") for n in names
    ]
    assert import_paths(ws, dirs).ok
    with session(ws.engine) as s:
        vids = {r.name: r.version_id for r in queries.task_rows(s)}
    other = Workspace.open(ws.root)  # its own engine and connections, as a `bandpass audit` elsewhere
    app = BandpassApp(ws, bus=EventBus())
    async with app.run_test(size=SIZE) as pilot:
        screen = app.screen
        assert isinstance(screen, TasksScreen)
        await wait_for(pilot, lambda: screen.last_load_s is not None, what="tasks loaded")
        table = screen.query_one(VirtualTable)
        line = screen.query_one("#task-audits", Static)
        assert _audit_column(table) == dict.fromkeys(names, "—") and not line.display

        # another process plans a run over one task and claims its job: in flight, not yet in a phase
        with session(other.engine) as s:
            aq.create_run(s, RUN, params={"reruns": 0})
            aq.add_jobs(s, RUN, [vids["bravo"]])
        with session(other.engine) as s:
            job = aq.claim_next(s, RUN, node=NODE, batch_prefix=f"audit-{RUN}")
            assert job is not None
            job_id = pk(job)
        await wait_for(pilot, lambda: line.display, what="the audit line shown")
        await wait_for(
            pilot, lambda: _plain(line) == f"auditing 1: bravo starting ({NODE})", what="bravo starting"
        )

        # each phase it records is what the line says next
        for phase in PHASES[:3]:
            with session(other.engine) as s:
                aq.set_phase(s, job_id, phase, NODE)
            await wait_for(pilot, _says(line, f"auditing 1: bravo {phase} ({NODE})"), what=phase)
        assert _audit_column(table)["bravo"] == "—"  # no verdict while it runs

        # it finishes with a verdict: the line goes, the table shows the verdict, the others untouched
        with session(other.engine) as s:
            audit = queries.record_audit(
                s, vids["bravo"], verdict="rejected", reasons=["nop_passes"], details={"batch": job.batch_id}
            )
            aq.finish_job(s, job_id, pk(audit))
        await wait_for(pilot, lambda: not line.display, what="the audit line gone")
        await wait_for(
            pilot, lambda: _audit_column(table).get("bravo") == "rejected", what="bravo's verdict shown"
        )
        assert _audit_column(table) == {"alpha": "—", "bravo": "rejected", "charlie": "—"}
    other.engine.dispose()
