"""Generate screen: start a generation batch and watch the meta-agent work.

Left, the live transcript: every ``GenerationEvent`` the generator publishes (the model's text, its tool
calls and their results, turn boundaries, the verdict) streams in as it happens. Right, the history from
the store (outcome, reason, tokens, cost per attempt) and the accepted-yield per prompt version, the
number a prompt change is judged by. Accepted tasks appear in Tasks: the app's ``tasks_changed`` counter
makes the Tasks screen reload when it is shown next.

Enter (or ``o``) on a history row opens the attempt turn by turn (the Generation screen, the same reading
as ``bandpass generations show``); ``k`` checks the generator's endpoint, key, model and tool use with a
one-token request (``bandpass generate --check``) and explains a refusal.

The generator lives in ``engine.generator``; this screen calls ``engine.app.generate`` in a worker thread with
n, difficulty, prompt version, the app's bus and a ``stop`` event it sets to cancel. The generator's
errors (no API key, unknown price, bad prompt version) arrive as notifications.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, RichLog, Select, Static

from ...engine.app import generate as generation
from ...engine.app.generate import DEFAULT_PROMPT, BatchResult, available_versions
from ...engine.core.config import ConfigError
from ...engine.core.errors import BandpassError
from ...engine.core.events import GenerationEvent
from ...engine.core.plural import counted
from ...engine.core.workspace import Workspace
from ..errors import Guarded, show_refusal
from ..typed_app import bandpass_app
from ..widgets.threadsafe import UiCaller
from ..worker_answer import dropped_once_gone
from .confirm import ConfirmDialog
from .generation import GenerationScreen

_KIND_STYLE = {
    "text": "",
    "tool_use": "bold cyan",
    "tool_result": "dim",
    "turn": "bold magenta",
    "api_retry": "yellow",
    "finished": "bold green",
    "error": "bold red",
}


def describe_result(result: BatchResult) -> str:
    """One line for the finish notification."""
    accepted, spent = len(result.accepted), result.spent_usd or 0.0
    line = f"{accepted} of {len(result.results)} accepted · ${spent:.2f} spent"
    line += f" · {result.skipped} not started" if result.skipped else ""
    return line + (f" · halted: {result.halted}" if result.halted else "")


def format_event(ev: GenerationEvent) -> str:
    style = _KIND_STYLE.get(ev.kind, "")
    data = ev.data if len(ev.data) <= 2000 else ev.data[:2000] + f"… ({len(ev.data)} chars)"
    head = f"[{style}]{escape(ev.kind)}[/{style}]" if style else escape(ev.kind)
    gen = f"g{ev.generation_id} " if ev.generation_id is not None else ""
    return f"[dim]{gen}[/dim]{head} {escape(data)}"


class GenerateScreen(Guarded, Screen[None]):
    CSS_PATH = "generate.tcss"
    #: The history, so Enter opens the highlighted attempt as the footer says (the form is a tab away).
    AUTO_FOCUS = "#gen-history"
    BINDINGS = [
        Binding("n", "start", "Start generation"),
        Binding("x", "stop", "Stop"),
        Binding("r", "refresh", "Refresh history", show=False),
        Binding("o", "open_attempt", "Open attempt"),
        Binding("k", "check", "Check generator"),
    ]

    class Got(Message):
        def __init__(self, event: GenerationEvent) -> None:
            super().__init__()
            self.event = event

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace
        self._unsubscribe: Callable[[], None] | None = None
        self._stop: threading.Event | None = None

    def _prompt_versions(self) -> list[str]:
        return available_versions()

    def compose(self) -> ComposeResult:
        versions = self._prompt_versions()
        initial = DEFAULT_PROMPT if DEFAULT_PROMPT in versions else (versions[-1] if versions else None)
        yield Header()
        with Horizontal(id="gen-bar"):
            yield Static("tasks", id="gen-n-label")
            yield Input("5", type="integer", placeholder="tasks", id="gen-n", tooltip="tasks to generate")
            yield Select(
                [("any difficulty", "any"), ("easy", "easy"), ("medium", "medium"), ("hard", "hard")],
                value="any",
                allow_blank=False,
                id="gen-difficulty",
            )
            yield Select(
                [(v, v) for v in versions],
                prompt="prompt version",
                value=initial if initial is not None else Select.NULL,
                id="gen-prompt",
            )
            yield Button("Start", id="gen-start", variant="primary")
            yield Button("Stop", id="gen-stop", variant="error", disabled=True)
            yield Button("Check", id="gen-check")
        yield Static("idle", id="gen-status")
        with Horizontal(id="gen-main"):
            with Vertical(id="gen-live"):
                yield Static("Meta-agent transcript", classes="gen-h")
                yield RichLog(id="gen-log", wrap=True, markup=True, max_lines=5000)
            with Vertical(id="gen-history-box"):
                yield Static("History", classes="gen-h")
                yield DataTable(id="gen-history", cursor_type="row", zebra_stripes=True)
                yield Static("", id="gen-yield")
        yield Footer(compact=True)

    def on_mount(self) -> None:
        # what an attempt cost comes right after how it ended: last, the pane (about 64 cells at 160
        # columns) cut it off
        self.query_one("#gen-history", DataTable).add_columns(
            "id", "outcome", "cost $", "tokens in/out", "turns", "prompt", "difficulty", "reason"
        )
        bus = bandpass_app(self).bus
        ui = UiCaller()
        self._unsubscribe = bus.subscribe(
            GenerationEvent, lambda ev: ui.call(self.post_message, self.Got(ev))
        )
        self.action_refresh()

    def on_unmount(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()

    @on(Got)
    def _got(self, msg: Got) -> None:
        self.query_one("#gen-log", RichLog).write(format_event(msg.event))
        if msg.event.kind == "finished":
            bandpass_app(self).tasks_changed += 1
            self.action_refresh()

    # --- history --- #

    def action_refresh(self) -> None:
        self._load_history()

    @work(thread=True, exclusive=True, group="gen-history")
    def _load_history(self) -> None:
        try:
            found = generation.history(self.workspace)
        except BandpassError as exc:  # e.g. a broken generator-prices.toml: named, the screen goes on
            show_refusal(self, exc, title="History")
            return
        gens = [
            (
                g.id,
                g.outcome,
                f"{g.cost_usd:.3f}" if found.prices.known(g.model) else "unknown",
                f"{g.tokens_in}/{g.tokens_out}",
                g.turns,
                g.prompt_version,
                g.difficulty,
                g.reason,
            )
            for g in found.generations
        ]
        self.app.call_from_thread(self._show_history, gens, found.yields)

    @dropped_once_gone
    def _show_history(self, gens: list[tuple[Any, ...]], yields: list[tuple[str, int, int]]) -> None:
        table = self.query_one("#gen-history", DataTable)
        table.clear()
        for row in gens:
            table.add_row(*(str(c) for c in row), key=str(row[0]))
        text = " · ".join(f"{pv}: {acc}/{n} accepted ({(acc / n if n else 0):.0%})" for pv, n, acc in yields)
        self.query_one("#gen-yield", Static).update(f"yield per prompt version: {text or 'no attempts yet'}")

    @on(DataTable.RowSelected, "#gen-history")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key.value is not None:
            self.app.push_screen(GenerationScreen(self.workspace, int(event.row_key.value)))

    def action_open_attempt(self) -> None:
        table = self.query_one("#gen-history", DataTable)
        if not table.row_count:
            self.notify("No generation attempts yet.", severity="warning")
            return
        key = table.coordinate_to_cell_key(table.cursor_coordinate).row_key.value
        if key is not None:
            self.app.push_screen(GenerationScreen(self.workspace, int(key)))

    # --- check --- #

    @on(Button.Pressed, "#gen-check")
    def action_check(self) -> None:
        self.query_one("#gen-status", Static).update("checking the generator…")
        self._check()

    @work(thread=True, exclusive=True, group="gen-check")
    def _check(self) -> None:
        ws = self.workspace
        try:
            model = generation.generator_model(ws)
            report = generation.check(ws, model)
        except BandpassError as exc:  # no API key, a broken bandpass.toml: one line
            self.app.call_from_thread(
                self._show_check, [f"[bold red]check[/] {escape(str(exc))}"], False, str(exc)
            )
            return
        lines = [f"[bold]check[/] generator {escape(model)} at {escape(report.url)}"]
        for step in report.steps:
            mark = {True: "[green]ok[/]  ", False: "[red]FAIL[/]", None: "[dim]-[/]   "}[step.ok]
            lines.append(f"  {mark} {escape(step.name):<9} {escape(step.detail)}")
        if report.hint:
            lines.append(f"  [yellow]hint:[/] {escape(report.hint)}")
        summary = "generator ready" if report.ok else (report.error or "check failed")
        self.app.call_from_thread(self._show_check, lines, report.ok, summary)

    def _show_check(self, lines: list[str], ok: bool, summary: str) -> None:
        log = self.query_one("#gen-log", RichLog)
        for line in lines:
            log.write(line)
        self.query_one("#gen-status", Static).update("idle")
        self.notify(summary, title="Generator check", severity="information" if ok else "error", timeout=15)

    # --- running --- #

    @on(Button.Pressed, "#gen-start")
    def action_start(self) -> None:
        """Asks first: generation spends the generator's tokens (money) and audits each submission in
        Docker containers (minutes), so the question says how many attempts, with which model and
        limits, before anything starts; ``y``/Enter starts, ``n``/Escape starts nothing."""
        if self._stop is not None:
            self.notify("A generation batch is already running.", severity="warning")
            return
        try:
            n = int(self.query_one("#gen-n", Input).value)
        except ValueError:
            n = 0
        if n < 1:
            self.notify("Say how many tasks to generate (the tasks field, 1 or more).", severity="warning")
            return
        difficulty = self.query_one("#gen-difficulty", Select).value
        prompt = self.query_one("#gen-prompt", Select).value
        request = generation.GenerateRequest(
            n=n,
            prompt_version=prompt if isinstance(prompt, str) else DEFAULT_PROMPT,
            difficulty=None if difficulty == "any" or not isinstance(difficulty, str) else difficulty,
        )
        self.app.push_screen(
            ConfirmDialog(self.start_question(request), yes="generate", no="start nothing"),
            lambda yes: self._start(request) if yes else None,
        )

    def start_question(self, request: generation.GenerateRequest) -> str:
        """What ``n`` would spend, in one question."""
        try:
            model = generation.generator_model(self.workspace)
        except ConfigError:
            model = "the configured generator"
        budget = request.budget or generation.Budget()
        n = request.n
        return (
            f"Generate {n} task{'s' * (n != 1)} with {model} (prompt {request.prompt_version}, "
            f"{request.difficulty or 'any'} difficulty)? Each attempt spends the generator's tokens — up "
            f"to {budget.max_turns} turns and ${budget.max_usd:g} — and audits what it submits in Docker "
            f"containers (minutes each): at most ${budget.max_usd * n:g} in all."
        )

    def _start(self, request: generation.GenerateRequest) -> None:
        if self._stop is not None:
            return
        self._stop = threading.Event()
        self.query_one("#gen-start", Button).disabled = True
        self.query_one("#gen-stop", Button).disabled = False
        self.query_one("#gen-status", Static).update(f"generating {counted(request.n, 'task')}…")
        self._run(request, self._stop)

    @on(Button.Pressed, "#gen-stop")
    def action_stop(self) -> None:
        if self._stop is None:
            self.notify("Nothing is generating.", severity="warning")
            return
        self._stop.set()
        self.notify("Stopping after the current turn.", title="Generate")

    @work(thread=True, group="gen-run")
    def _run(self, request: generation.GenerateRequest, stop: threading.Event) -> None:
        try:
            result = generation.generate(
                self.workspace,
                request,
                bus=self.app.bus,  # type: ignore[attr-defined]
                stop=stop,
            )
            self.app.call_from_thread(self.notify, describe_result(result), title="Generation finished")
        except BandpassError as exc:  # no key, nothing listening, a bad prompt version: one notification
            show_refusal(self, exc, title="Generation failed", timeout=20, named=True)
        finally:
            self.app.call_from_thread(self._done)

    def _done(self) -> None:
        self._stop = None
        self.query_one("#gen-start", Button).disabled = False
        self.query_one("#gen-stop", Button).disabled = True
        self.query_one("#gen-status", Static).update("idle")
        bandpass_app(self).tasks_changed += 1
        self.action_refresh()
