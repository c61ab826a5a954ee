"""A scripted policy that types shell commands into its terminal, and tasks verified in place for it.

Shared by the guard's, the clean room's, regrade's and the Changes view's tests: each needs an agent that
does what a policy would (keystrokes into the episode's real terminal) with a known script.
"""

from __future__ import annotations

from pathlib import Path

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.base import AgentContext, AgentResult
from bandpass.engine.run.agents.builtin import _type
from bandpass.engine.tasks.importer import import_paths
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.taskfactory import IN_PLACE as TASK_IN_PLACE
from tests.support.taskfactory import make_task


class Keys:
    """A scripted policy: types each command into its terminal, one step per command."""

    def __init__(self, *commands: str, name: str = "scripted") -> None:
        self.commands = commands
        self.name = name

    def run(self, ctx: AgentContext) -> AgentResult:
        for i, cmd in enumerate(self.commands):
            stop = _type(ctx, i, cmd if cmd.endswith("\n") else cmd + "\n", self.name)
            if stop is not None:
                return stop
        return AgentResult()


#: What a task verified in the agent's own container (the tamper guard the gate) writes: Bandpass's opt-in.
IN_PLACE = TASK_IN_PLACE


def in_place_task(ws: Workspace, root: Path, name: str, *, extra_toml: str = "", **kw: object) -> int:
    """Writes a small task (verified in place unless ``verifier`` says otherwise), imports it, and returns
    its version id."""
    kw.setdefault("verifier", IN_PLACE)
    d = make_task(root, name, **kw)  # type: ignore[arg-type]
    if extra_toml:
        with (d / "task.toml").open("a") as fh:
            fh.write(extra_toml)
    report = import_paths(ws, [d])
    assert report.ok, [i.problems for i in report.items]
    with session(ws.engine) as s:
        return next(r.version_id for r in queries.task_rows(s) if r.name == name)
