"""Runs screen: start a rollout batch and watch its episodes live.

A grid of :class:`~tui.widgets.episode_pane.EpisodePane` (policy terminal, then the verifier's) for the
episodes the app's :class:`~tui.widgets.live_episodes.LiveEpisodes` registry knows; ``f`` shows the
focused one full size; the side panel lists the focused episode's steps (the model's analysis, plan and
keystrokes) as they finish; counters and a progress bar follow the batch.

The batch itself runs through ``engine.app.batches`` (``start_batch`` + ``run_batch``) in a worker thread,
so the UI never waits on Docker. Infra errors get their own red counter: a batch where the infrastructure
failed must never read as a hard task set.

Where episodes run is a choice (``#runs-executor``): this machine's Docker engine, or the Ray cluster of
``bandpass.toml``'s ``[ray] address``. The worker connects to Ray *before* planning, so Ray missing or a
cluster that does not answer is one red line under the bar and nothing is queued; the UI never waits on it.

Batches this screen did not start (``bandpass run`` in a terminal, another TUI) are followed from the
store: while the screen is shown it looks every ``WATCH_INTERVAL_S`` (backing off to ``WATCH_CEILING_S``
while nothing changes) whether anything was committed, and only then reads the batches into
:class:`~tui.widgets.batch_watch.BatchWatch`: each one's executor, done/total and outcomes. Left for
another screen, it stops looking, and looks again the moment it is shown. The ``RECENT_BATCHES`` newest
batches are listed too, finished or not: a curator coming back to Runs sees what ran last and how it
ended. Their episodes that run on this host get live panes as well:
:class:`~tui.widgets.episode_follower.EpisodeFollower` tails the recordings they write into the
workspace and republishes them on the app's bus (Ray batches: progress only).
"""

from __future__ import annotations

import contextlib
import json
import threading
from functools import partial
from typing import Any

from rich.markup import escape
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Grid, Horizontal, Vertical
from textual.message import Message
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Button, Footer, Header, Input, ProgressBar, RichLog, Select, Static

from ...engine.core import probes
from ...engine.core.config import ConfigError
from ...engine.core.workspace import Workspace
from ..errors import Guarded, show_refusal
from ..typed_app import bandpass_app
from ..widgets.backoff import Backoff
from ..widgets.batch_progress import BatchProgressBar
from ..widgets.batch_watch import BatchWatch
from ..widgets.episode_follower import EpisodeFollower
from ..widgets.episode_pane import EpisodePane
from ..widgets.live_episodes import LiveEpisode, LiveEpisodes
from ..widgets.threadsafe import UiCaller
from ..worker_answer import dropped_once_gone
from .batch_confirm import BatchConfirm, BatchRequest

BUILTIN_CHOICES = (probes.ORACLE, probes.NOP)
#: How often the screen looks whether the store changed (and then reads the batches) while it does...
WATCH_INTERVAL_S = 1.0
#: ...and the longest it waits between two looks while nothing changes (doubling up to it).
WATCH_CEILING_S = 4.0
#: Finished batches listed beside the live ones (newest first), so Runs shows what ran last.
RECENT_BATCHES = 10


def format_step(index: int, action: dict[str, Any]) -> str:
    """One step for the side panel: analysis, plan and keystrokes when the model gave them."""
    lines = [f"[b]step {index}[/b]"]
    if "error" in action or "parse_error" in action:
        lines.append(f"  [red]{escape(str(action.get('error') or action.get('parse_error')))}[/red]")
    if action.get("analysis"):
        lines.append(f"  [dim]analysis[/dim] {escape(str(action['analysis']).strip())}")
    if action.get("plan"):
        lines.append(f"  [dim]plan[/dim] {escape(str(action['plan']).strip())}")
    keys: list[str] = []
    for cmd in action.get("commands") or []:
        keys.append(str(cmd.get("keystrokes", "")) if isinstance(cmd, dict) else str(cmd))
    if action.get("keystrokes"):
        keys.append(str(action["keystrokes"]))
    for k in keys:
        shown = k if len(k) <= 400 else k[:400] + f"… ({len(k)} chars)"
        lines.append(f"  [dim]keys[/dim] [b]{escape(json.dumps(shown)[1:-1])}[/b]")
    if action.get("task_complete"):
        lines.append("  [green]task_complete[/green]")
    if "exit_code" in action and action["exit_code"] is not None:
        lines.append(f"  [dim]exit[/dim] {action['exit_code']}")
    return "\n".join(lines)


class RunsScreen(Guarded, Screen[None]):
    CSS_PATH = "runs.tcss"
    AUTO_FOCUS = "#runs-steps"
    BINDINGS = [
        Binding("n", "start_batch", "Start batch"),
        Binding("x", "stop_batch", "Stop batch"),
        Binding("f", "full_size", "Full size", show=False),
        Binding("c", "clear_finished", "Clear finished", show=False),
        Binding("l", "toggle_steps", "Steps panel"),
        Binding("o", "open_replay", "Replay episode"),
        Binding("escape", "minimize", "Grid", show=False),
    ]

    class Live(Message):
        """Posted from the publishing thread by the registry listener."""

        def __init__(self, kind: str, episode: LiveEpisode) -> None:
            super().__init__()
            self.kind = kind
            self.episode = episode

    class Progress(Message):
        def __init__(self, summary: Any) -> None:
            super().__init__()
            self.summary = summary

    def __init__(self, workspace: Workspace) -> None:
        super().__init__()
        self.workspace = workspace
        self._remove_listener: Any = None
        self._stop: threading.Event | None = None
        self.batch_id: str | None = None
        self.focused_episode: int | None = None
        self.own_batches: set[str] = set()  # started here: panes fed by the bus, not the follower
        self._watched: set[str] = set()  # other processes' batches shown once: kept until they end
        self._since: Any = None
        self._commits: Any = None  # engine.app.reads.commit_watch: has the store changed since we looked
        self._watch_delay = Backoff(WATCH_INTERVAL_S, WATCH_CEILING_S)
        self._watch_timer: Timer | None = None

    # --- layout --- #

    def _agent_options(self) -> list[tuple[str, str]]:
        opts = [(f"built-in: {n}", f"builtin:{n}") for n in BUILTIN_CHOICES]
        # a broken bandpass.toml: built-ins still work, and Settings explains the problem
        with contextlib.suppress(Exception):
            opts += [(f"model: {m}", f"model:{m}") for m in self.workspace.config.models]
        return opts

    def ray_address(self) -> str:
        """``[ray] address`` of bandpass.toml (``auto`` when unset or the file is broken)."""
        with contextlib.suppress(Exception):
            return self.workspace.config.ray.address
        return "auto"

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="runs-bar"):
            yield Select(self._agent_options(), value="builtin:oracle", allow_blank=False, id="runs-agent")
            yield Select(
                [("local Docker", "local"), (f"Ray: {self.ray_address()}", "ray")],
                value="local",
                allow_blank=False,
                id="runs-executor",
                tooltip="where episodes run (Ray: [ray] address in bandpass.toml)",
            )
            yield Select(
                [("Tasks filter", "filter"), ("all tasks", "all")],
                tooltip="which tasks: those the Tasks screen's filter shows, or all",
                value="filter",
                allow_blank=False,
                id="runs-scope",
            )
            yield Input("1", placeholder="k", type="integer", id="runs-k", tooltip="attempts per task (k)")
            yield Input(
                "2", placeholder="jobs", type="integer", id="runs-jobs", tooltip="concurrent episodes"
            )
            yield Button("Start", id="runs-start", variant="primary")
            yield Button("Stop", id="runs-stop", variant="error", disabled=True)
        with Horizontal(id="runs-status"):
            yield Static("no batch running", id="runs-counters")
            yield BatchProgressBar(id="runs-progress")
        yield Static("", id="runs-error")
        yield BatchWatch(id="runs-watch")
        with Horizontal(id="runs-main"):
            with Vertical(id="runs-grid-box"):
                yield Grid(id="runs-grid")
                yield Static(
                    "No episodes yet. Start a batch (n) — each episode's policy terminal and verifier "
                    "appear here live.",
                    id="runs-empty",
                )
            with Vertical(id="runs-side"):
                yield Static("Steps · focus a pane (click or tab)", id="runs-steps-title")
                yield RichLog(id="runs-steps", wrap=True, markup=True, max_lines=2000)
        yield Footer(compact=True)

    def on_mount(self) -> None:
        live: LiveEpisodes = bandpass_app(self).live
        self._ui = UiCaller()
        self._remove_listener = live.add_listener(
            lambda kind, ep: self._ui.call(self.post_message, self.Live(kind, ep))
        )
        self.query_one("#runs-progress", ProgressBar).display = False  # until a batch reports progress
        for ep in live.episodes():
            self._add_pane(ep)
        from ...engine.app.reads import utcnow

        self._since = utcnow()
        # live panes for other processes' episodes on this host: their casts, tailed off the UI thread
        self.follower = EpisodeFollower(
            self.workspace,
            bandpass_app(self).bus,
            live,
            is_own_batch=self.own_batches.__contains__,
        ).start()
        from ...engine.app import reads

        self._commits = reads.commit_watch(self.workspace)
        self._commits.changed()  # the read below sees everything committed so far
        self._poll_batches()
        self._watch(WATCH_INTERVAL_S)

    def on_unmount(self) -> None:
        if self._stop is not None:  # the app is closing: episodes in flight finish, nothing new starts
            self._stop.set()
        if self._remove_listener is not None:
            self._remove_listener()
        self.follower.stop()
        if self._commits is not None:
            self._commits.close()

    def on_screen_suspend(self) -> None:
        """Left (another area, a replay or a dialog on top): the batch table is not watched meanwhile."""
        if self._watch_timer is not None:
            self._watch_timer.stop()
            self._watch_timer = None

    def on_screen_resume(self) -> None:
        """Shown (again): look at the store at once, then keep watching it while shown."""
        if self._commits is not None:
            self._watch_delay.reset()
            self._look()

    # --- panes --- #

    def _panes(self) -> list[EpisodePane]:
        return list(self.query(EpisodePane))

    def _add_pane(self, ep: LiveEpisode) -> EpisodePane | None:
        if self.query(f"#episode-{ep.episode_id}"):
            return None
        pane = EpisodePane(ep)
        self.query_one("#runs-grid", Grid).mount(pane)
        self._relayout()
        return pane

    def _relayout(self, count: int | None = None) -> None:
        """Grid shape from the pane count: 1, 2, 2x2, 3x2, 4x2, then rows of 4 that scroll."""
        n = len(self._panes()) if count is None else count
        grid = self.query_one("#runs-grid", Grid)
        cols = 1 if n <= 1 else 2 if n <= 4 else 3 if n <= 6 else 4
        rows = max(1, -(-n // cols))
        grid.styles.grid_size_columns = cols
        grid.styles.grid_rows = "1fr" if rows <= 2 else "16"  # past two rows, fixed-height rows scroll
        grid.display = n > 0
        self.query_one("#runs-empty").display = n == 0

    @on(Live)
    def _on_live(self, msg: Live) -> None:
        ep = msg.episode
        panes = self.query(f"#episode-{ep.episode_id}")
        if not panes:
            if msg.kind == "finished" and ep.status == "done" and not ep.bytes_in:
                pass  # an episode that ended before producing anything still gets a pane (its outcome)
            pane = self._add_pane(ep)
        else:
            pane = panes.first(EpisodePane)
        if pane is not None:
            pane.update_status()
        if msg.kind == "step" and ep.episode_id == self.focused_episode and ep.steps:
            index, action = ep.steps[-1]
            self.query_one("#runs-steps", RichLog).write(format_step(index, action))

    @on(EpisodePane.Focused)
    def _pane_focused(self, msg: EpisodePane.Focused) -> None:
        ep = msg.pane.live
        if ep.episode_id == self.focused_episode:
            return
        self.focused_episode = ep.episode_id
        self.query_one("#runs-steps-title", Static).update(f"Steps · #{ep.episode_id} {escape(ep.task_name)}")
        log = self.query_one("#runs-steps", RichLog)
        log.clear()
        for index, action in list(ep.steps):
            log.write(format_step(index, action))

    def action_full_size(self) -> None:
        if self.maximized is not None:
            self.minimize()
            return
        focused = self.focused
        if focused is None or not isinstance(focused.parent, EpisodePane):
            panes = self._panes()
            if not panes:
                self.notify("No episode to show.", severity="warning")
                return
            focused = panes[0].agent_view
            focused.focus()
        self.maximize(focused)

    def action_minimize(self) -> None:
        if self.maximized is not None:
            self.minimize()

    def action_open_replay(self) -> None:
        """Opens the focused pane's episode in Replay (once finished: its recording is complete)."""
        focused = self.focused
        pane = focused.parent if focused is not None else None
        if not isinstance(pane, EpisodePane):
            self.notify("Focus an episode pane first (click or tab).", severity="warning")
            return
        if pane.live.status != "done":
            self.notify("This episode is still running; replay it when it has finished.", severity="warning")
            return
        bandpass_app(self).open_replay(pane.live.episode_id)

    def action_clear_finished(self) -> None:
        gone = set(bandpass_app(self).live.forget_finished())
        for pane in self._panes():
            if pane.live.episode_id in gone or pane.live.status == "done":
                pane.remove()
        self.call_after_refresh(self._relayout)

    def action_toggle_steps(self) -> None:
        side = self.query_one("#runs-side")
        side.display = not side.display

    # --- batch --- #

    @on(Button.Pressed, "#runs-start")
    def _start_pressed(self) -> None:
        self.action_start_batch()

    @on(Button.Pressed, "#runs-stop")
    def _stop_pressed(self) -> None:
        self.action_stop_batch()

    def _int(self, wid: str, default: int) -> int:
        try:
            return max(1, int(self.query_one(wid, Input).value))
        except ValueError:
            return default

    def action_start_batch(self) -> None:
        """Asks first (tui/screens/batch_confirm.py): model or agent, tasks (audit-rejected ones left out
        unless put back), k and where; nothing is planned before the curator says yes."""
        if self._stop is not None:
            self.notify("A batch is already running; stop it first (x).", severity="warning")
            return
        agent = self.query_one("#runs-agent", Select).value
        scope = self.query_one("#runs-scope", Select).value
        where = self.query_one("#runs-executor", Select).value
        k, jobs = self._int("#runs-k", 1), self._int("#runs-jobs", 2)
        if not isinstance(agent, str):
            self.notify("Choose an agent or model.", severity="warning")
            return
        kind, _, name = agent.partition(":")
        kind = "builtin" if kind == "builtin" else "model"
        version_ids: list[int] | None = None
        if scope == "filter":
            shown = getattr(self.app, "task_scope", None)
            if shown is not None and not shown:  # an empty filter means nothing, never every task
                self.notify(
                    "The Tasks filter shows no tasks: nothing to run. Widen the filter in Tasks (1), or "
                    "choose the scope all tasks.",
                    severity="warning",
                )
                return
            version_ids = list(shown) if shown else None  # Tasks never opened: every task, as asked next
        from ...engine.app.batches import batch_scope

        executor = "ray" if where == "ray" else "local"
        request = BatchRequest(kind, name, batch_scope(self.workspace, version_ids), k, jobs, executor)
        self.app.push_screen(
            BatchConfirm(
                request,
                batch_scope(self.workspace, version_ids, include_rejected=True),
                agent_line=self._agent_line(kind, name),
                executor_line="this machine's Docker engine (local)"
                if executor == "local"
                else f"the Ray cluster at {self.ray_address()}",
            ),
            self._confirmed,
        )

    def _agent_line(self, kind: str, name: str) -> str:
        if kind == "builtin":
            return f"built-in agent {name}"
        try:
            cfg = self.workspace.config.models[name]
        except (ConfigError, KeyError):  # a broken bandpass.toml, an unknown model: the check says why
            return f"model {name}"
        served = f", served as {cfg.served_name}" if cfg.served_name != name else ""
        return f"model {name} at {cfg.base_url}{served}"

    def _confirmed(self, request: BatchRequest | None) -> None:
        if request is None:
            return
        if self._stop is not None:  # a second confirmation raced the first
            return
        self._stop = threading.Event()
        self.query_one("#runs-start", Button).disabled = True
        self.query_one("#runs-stop", Button).disabled = False
        self.show_error("")
        self.query_one("#runs-counters", Static).update(
            f"connecting to Ray at {escape(self.ray_address())}…"
            if request.executor == "ray"
            else "planning batch…"
        )
        self._run_batch(
            request.kind,
            request.name,
            request.scope.version_ids,
            request.k,
            request.jobs,
            self._stop,
            request.executor,
        )

    def show_error(self, text: str) -> None:
        """The red line under the bar (a connection that failed); "" hides it."""
        line = self.query_one("#runs-error", Static)
        line.update(f"[b red]{escape(text)}[/b red]" if text else "")
        line.display = bool(text)

    def _make_executor(self, executor: str, jobs: int) -> Any:
        """The executor chosen in the bar, connected (Ray: before anything is planned). Raises
        ``ExecutorError`` with the line to show."""
        from ...engine.app.executors import ExecutorChoice, make_executor

        if executor == "local":
            return make_executor(ExecutorChoice("local", jobs))
        # Ray's worker logs would be printed over the TUI (quiet): they stay in the cluster's log files.
        ex = make_executor(ExecutorChoice("ray", jobs, self.ray_address(), quiet=True))
        ex.connect()
        return ex

    def action_stop_batch(self) -> None:
        if self._stop is None:
            self.notify("No batch is running.", severity="warning")
            return
        self._stop.set()
        self.notify("Stopping: episodes in flight finish, nothing new starts.", title="Batch")

    @work(thread=True, group="runs-batch")
    def _run_batch(
        self,
        kind: str,
        name: str,
        version_ids: list[int] | None,
        k: int,
        jobs: int,
        stop: threading.Event,
        executor_name: str = "local",
    ) -> None:
        from ...engine.app import batches
        from ...engine.app.executors import ExecutorError
        from ...engine.core.errors import BandpassError

        ws = self.workspace
        try:
            try:  # connect before planning: a cluster that does not answer leaves nothing queued
                executor = self._make_executor(executor_name, jobs)
            except ExecutorError as exc:
                line = f"{exc}; nothing was queued"
                self.app.call_from_thread(self.show_error, line)
                self.app.call_from_thread(self.query_one("#runs-counters", Static).update, "no batch running")
                self.app.call_from_thread(self.notify, line, title="Batch not started", severity="error")
                return
            # a dead endpoint or no Docker engine is one notification, not a batch of infra errors
            request = batches.StartBatch(
                name=name,
                kind="model" if kind == "model" else "builtin",
                version_ids=version_ids,
                k=k,
                local=executor_name == "local",
            )
            planned = batches.start_batch(ws, request)
            batch_id = planned.batch_id
            self.batch_id = batch_id
            self.own_batches.add(batch_id)
            self.app.call_from_thread(self._poll_batches)  # the batch table lists it at once
            self.app.call_from_thread(
                self.notify,
                f"{batch_id}: {len(planned.version_ids)} task{'s' * (len(planned.version_ids) != 1)} × {k}"
                f" with {name} ({executor.name})",
                title="Batch started",
            )
            summary = batches.run_batch(
                ws,
                batch_id,
                batches.RunOptions(concurrency=jobs, executor=executor),
                bus=bandpass_app(self).bus,
                on_progress=lambda s: self._ui.call(self.post_message, self.Progress(s)),
                stop=stop,
                # learning an unaudited version's footprint before its first episode: said as it goes
                on_note=lambda line: self._ui.call(partial(self.notify, escape(line), title="Footprint")),
            )
            self._ui.call(self.post_message, self.Progress(summary))
            word = "stopped" if summary.interrupted else "finished"
            sev = "error" if summary.infra_errors else "information"
            halted = f"\n{summary.halted}" if summary.halted else ""
            self.app.call_from_thread(
                self.notify,
                f"{batch_id} {word}: {summary.passed} passed, {summary.failed} failed, "
                f"{summary.agent_errors} agent errors, {summary.infra_errors} infra errors{halted}",
                title="Batch",
                severity=sev,
                timeout=15,
            )
        except BandpassError as exc:  # a refusal or a failed batch: the curator's notification
            show_refusal(self, exc, title="Batch failed", timeout=20, named=True)
        finally:
            self.app.call_from_thread(self._batch_done)

    def _batch_done(self) -> None:
        self._stop = None
        self.query_one("#runs-start", Button).disabled = False
        self.query_one("#runs-stop", Button).disabled = True

    @on(Progress)
    def _progress(self, msg: Progress) -> None:
        s = msg.summary
        infra = f"[b red]infra {s.infra_errors}[/b red]" if s.infra_errors else "infra 0"
        self.query_one("#runs-counters", Static).update(
            f"[b]{escape(s.batch_id)}[/b] {escape(s.agent)} ({escape(s.executor)}) · "
            f"{s.done}/{s.total} done · {s.running} running · {s.queued} queued · "
            f"[green]passed {s.passed}[/green] · failed {s.failed} · agent err {s.agent_errors} · {infra}"
        )
        bar = self.query_one("#runs-progress", ProgressBar)
        bar.display = True
        bar.update(total=max(s.total, 1), progress=s.done)

    # --- batches other processes run --- #

    def _poll_batches(self) -> None:
        """Reads the batches now (a batch was planned here)."""
        self._read_batches()

    def _look(self) -> None:
        """Reads the batches if anything was committed since the last look (a few microseconds when
        not), then waits: a second after a change, up to ``WATCH_CEILING_S`` while the store is quiet."""
        changed = self._commits.changed()
        if changed:
            self._read_batches()
        self._watch(self._watch_delay.after(changed))

    def _watch(self, delay: float) -> None:
        if self._watch_timer is not None:
            self._watch_timer.stop()
        self._watch_timer = self.set_timer(delay, self._look)

    @work(thread=True, exclusive=True, group="runs-watch", exit_on_error=False)
    def _read_batches(self) -> None:
        """Reads the workspace's live batches (and those shown before) off the UI thread."""
        from ...engine.app import reads

        rows = reads.batch_progress(
            self.workspace, since=self._since, also=sorted(self._watched), recent=RECENT_BATCHES
        )
        if rows:
            self.app.call_from_thread(self._show_batches, rows)

    @dropped_once_gone
    def _show_batches(self, rows: list[Any]) -> None:
        """Every batch in the table, this screen's own too (marked); live panes are tailed only for
        other processes' batches: this screen's own episodes reach their panes through the bus."""
        others = [p for p in rows if p.batch.id not in self.own_batches]  # planned here while it was read
        # live panes: batches running now, and new ones that ran to their end between two reads
        fresh = [
            p.batch.id
            for p in others
            if p.batch.id not in self._watched and p.batch.created_at >= self._since
        ]
        self.follower.follow(
            [p.batch.id for p in others if p.unfinished] + fresh,
            finished=[p.batch.id for p in others if not p.unfinished],
        )
        self._watched.update(p.batch.id for p in rows)
        self.query_one("#runs-watch", BatchWatch).show(rows, own=self.own_batches)
