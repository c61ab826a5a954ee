"""BatchConfirm: what a rollout batch will run, said before anything starts.

Why: ``n`` on Runs used to start at once — every task, the audit-rejected ones included — and a batch
costs containers and minutes. The dialog names the model (and its endpoint) or built-in agent, the
tasks (audit-rejected ones left out and named; ``r`` puts them back), k and the episode count, and where
episodes run; ``y`` / Enter starts it, ``n`` / Escape starts nothing.
"""

from __future__ import annotations

from dataclasses import dataclass

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.screen import ModalScreen
from textual.widgets import Static

from ...engine.app.batches import BatchScope
from ..errors import Guarded

#: Task names listed before "… and N more".
LISTED = 8


@dataclass(frozen=True)
class BatchRequest:
    """What the curator confirmed: the agent as the bar names it, the scope and the numbers."""

    kind: str  # "builtin" | "model"
    name: str
    scope: BatchScope
    k: int
    jobs: int
    executor: str  # "local" | "ray"
    include_rejected: bool = False


def _names(items: list[tuple[int, str]] | list[str]) -> str:
    names = [i[1] if isinstance(i, tuple) else i for i in items]
    more = f" … and {len(names) - LISTED} more" if len(names) > LISTED else ""
    return ", ".join(names[:LISTED]) + more


class BatchConfirm(Guarded, ModalScreen[BatchRequest | None]):
    CSS_PATH = "batch_confirm.tcss"
    BINDINGS = [
        Binding("y,enter", "start", "Start", priority=True),
        Binding("r", "toggle_rejected", "Audit-rejected tasks"),
        Binding("n,escape", "cancel", "Cancel", priority=True),
    ]

    def __init__(
        self,
        request: BatchRequest,
        with_rejected: BatchScope,
        *,
        agent_line: str,
        executor_line: str,
    ) -> None:
        super().__init__()
        self.base = request
        self.with_rejected = with_rejected
        self.include_rejected = False
        self.agent_line = agent_line
        self.executor_line = executor_line

    @property
    def request(self) -> BatchRequest:
        if not self.include_rejected:
            return self.base
        return BatchRequest(
            self.base.kind,
            self.base.name,
            self.with_rejected,
            self.base.k,
            self.base.jobs,
            self.base.executor,
            include_rejected=True,
        )

    def compose(self) -> ComposeResult:
        with Vertical(id="batch-confirm-box"):
            yield Static("Start a rollout batch?", id="batch-confirm-title")
            yield Static("", id="batch-confirm-body")
            yield Static("", id="batch-confirm-help")

    def on_mount(self) -> None:
        self._show()

    def summary(self) -> Text:
        req = self.request
        scope = req.scope
        n = len(scope.run)
        out = Text()

        def row(label: str, value: str | Text, style: str = "") -> None:
            out.append(f"{label:<10}", "bold")
            out.append(value if isinstance(value, Text) else Text(value, style))
            out.append("\n")

        row("agent", self.agent_line)
        row("tasks", f"{n}: {_names(scope.run)}" if n else "none", "" if n else "bold red")
        left_out = self.base.scope.rejected
        if left_out and not self.include_rejected:
            row("", f"{len(left_out)} audit-rejected left out: {_names(left_out)} (r: include)", "yellow")
        elif left_out:
            row("", f"{len(left_out)} audit-rejected included (r: leave them out)", "bold yellow")
        if scope.unaudited:
            row("", f"{len(scope.unaudited)} never audited: {_names(scope.unaudited)}", "dim")
        row(
            "k", f"{req.k} attempt{'s' * (req.k != 1)} per task → {n * req.k} episode{'s' * (n * req.k != 1)}"
        )
        row("where", f"{self.executor_line}, {req.jobs} at once")
        return out

    def _show(self) -> None:
        self.query_one("#batch-confirm-body", Static).update(self.summary())
        start = "y / Enter: start" if self.request.scope.run else "nothing to run"
        rejected = " · r: audit-rejected tasks" if self.base.scope.rejected else ""
        self.query_one("#batch-confirm-help", Static).update(f"{start}{rejected} · n / Esc: cancel")

    def action_toggle_rejected(self) -> None:
        if self.base.scope.rejected:
            self.include_rejected = not self.include_rejected
            self._show()

    def action_start(self) -> None:
        if not self.request.scope.run:
            self.notify("No task to run: widen the Tasks filter, or include the rejected ones (r).")
            return
        self.dismiss(self.request)

    def action_cancel(self) -> None:
        self.dismiss(None)
