"""Replay screen: an episode's agent and verifier casts with instant seek, step sync and tagging.

Why this shape: a curator replays a failed episode to decide *why* it failed, so the cast (what
happened) sits next to the step the policy was on (what it thought, typed and was shown) and the
verifier's output (what was checked), and a tag can be written without leaving the screen. The transport
is :class:`engine.review.replay.Player` (UI-free, the same one ``bandpass replay --print-at`` and the tests
drive); this screen only turns keys into player calls and paints what the player holds.

The keyframe index of each cast is built in a thread worker right after mounting; seeks work at once
and get instant as the index fills in (the status line shows how far it got, and says when it is done).

Nothing runs while nothing moves: the frame clock (``FPS`` ticks a second) runs only while a cast plays;
paused, or under a dialog, the screen costs no CPU (a paused replay left open all day used 6-14% of a
core when the clock ticked regardless; ``bench/bench_idle.py``).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from textual.app import App, ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, OptionList, Static
from textual.widgets.option_list import Option

from ...engine.app.episodes import strip_controls
from ...engine.app.replay import (
    CastError,
    KeyframeIndex,
    Player,
    ReplaySource,
    ReplaySourceError,
    index_path_in,
    load_source,
    read_cast,
    settle_gc,
    time_of_text,
)
from ...engine.app.review import ReviewRunResult
from ...engine.app.tagging import Tagger, plan_for
from ...engine.core.workspace import Workspace
from ..errors import Guarded, SafeApp, refusals
from ..navigation import go_back
from ..widgets.cursor_rest import CursorRest
from ..widgets.option_list import SteadyOptionList
from ..widgets.review_panel import ReviewPanel, run_summary
from ..widgets.search_bar import SearchBar
from ..widgets.step_panel import StepPanel
from ..widgets.terminal_view import TerminalView
from ..widgets.threadsafe import UiCaller
from ..widgets.timeline import Timeline, fmt_time
from .changes import ChangesScreen
from .replay_search import ReplayHost, ReplaySearch, SearchHits
from .tag_dialog import open_tag_dialog

FPS = 30
#: Seconds of keyframe indexing between two reports of its progress on the status line.
INDEX_SLICE_S = 0.25
SEEK_STEP = 5.0
#: Idle limit the "i" key toggles on when the cast's header names none.
DEFAULT_IDLE = 2.0
CASTS = ("agent", "verifier")


def _clock(t: float, duration: float) -> str:
    """``mm:ss``, with tenths for a recording under a minute: a verifier's 0.4 s cast read
    "00:00 / 00:00" whatever its position."""
    return f"{fmt_time(t)}.{int(max(t, 0.0) * 10) % 10}" if duration < 60 else fmt_time(t)


class ReplayScreen(Guarded, Screen[None]):
    CSS_PATH = "replay.tcss"
    BINDINGS = [
        Binding("space", "toggle_play", "Play", tooltip="Play/Pause"),
        Binding("left", "skip(-5)", "−5 s", show=False),
        Binding("right", "skip(5)", "+5 s", show=False),
        Binding("left_square_bracket", "prev_marker", "Prev step", show=False),
        Binding("right_square_bracket", "next_marker", "Step", tooltip="Next step"),
        Binding("comma", "frame_back", "Frame back", show=False),
        Binding("full_stop", "frame_forward", "Frame fwd", show=False),
        Binding("minus", "slower", "Slower", show=False),
        Binding("plus,equals_sign", "faster", "Faster", key_display="+", show=False),
        Binding("home", "seek_start", "Start", show=False),
        Binding("end", "seek_end", "End", show=False),
        *(Binding(str(n), f"jump({n})", f"Jump to {n}0%", show=False) for n in range(10)),
        Binding("i", "toggle_idle", "Idle limit", show=False),
        Binding("m", "toggle_marker_pause", "Pause at steps", show=False),
        Binding("v", "switch_cast", "Agent/Verifier"),
        Binding("b", "toggle_side_by_side", "Side by side", show=False),
        Binding("e", "next_evidence", "Evidence", tooltip="Next evidence"),
        Binding("less_than_sign", "pan(-20)", "Pan left", key_display="<", show=False),
        Binding("greater_than_sign", "pan(20)", "Pan right", key_display=">", show=False),
        Binding("t", "tag", "Tag"),
        Binding("u", "undo", "Undo tag", show=False),
        Binding("y", "accept_review", "Accept review", show=False),
        Binding("R", "request_review", "Review with Claude", show=False),
        Binding("d", "changes", "Changes"),
        Binding("slash", "search_cast", "Search cast", key_display="/", show=False),
        Binding("n", "next_hit", "Next match", show=False),
        Binding("N", "prev_hit", "Previous match", show=False),
        Binding("escape", "back", "Back", show=False),
    ]

    def __init__(
        self,
        ws: Workspace | None,
        episode_id: int | None = None,
        cast_path: str | Path | None = None,
        *,
        source: ReplaySource | None = None,
        verifier: bool = False,
        speed: float = 1.0,
        idle_limit: float | None = None,
        tagger: Tagger | None = None,
        search: SearchHits | None = None,
    ) -> None:
        super().__init__()
        self.ws = ws
        self.error = ""
        self.problems: list[str] = []
        if source is None:
            ref = episode_id if episode_id is not None else cast_path
            try:
                source = load_source(ws, ref if ref is not None else "")
            except ReplaySourceError as e:
                self.error = str(e)
                source = ReplaySource(title=str(ref))
        self.source = source
        self.players: dict[str, Player] = {}
        self.active = "verifier" if verifier else "agent"
        self.side_by_side = False
        self._speed = speed
        self._idle_arg = idle_limit
        self._tagger = tagger
        self._cancel = threading.Event()
        self._last = time.perf_counter()
        self._generations: dict[str, int] = {}
        self._timer: Timer | None = None
        self._status_shown: str | None = None  # the status line as last painted
        self._ui: UiCaller  # set on mount: the keyframe worker reports its progress through it
        #: The episode's record (engine/review/evidence.py): why it ended, with evidence to seek to.
        self.record: dict[str, Any] | None = None
        self._evidence_at = -1
        #: ``/``, ``n``, ``N``: search hits in this episode (tui/screens/replay_search.py).
        self.search = ReplaySearch(self, search)
        #: Casts the curator has looked at (the verifier opens at its end the first time it is shown).
        self._shown: set[str] = set()

    # --- composition --- #

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="replay-main"):
            with Vertical(id="replay-left"):
                yield Static(self.source.title, id="replay-title")
                yield Static("", id="replay-why", markup=False)
                with Horizontal(id="replay-panes"):
                    for kind in CASTS:
                        with Vertical(id=f"pane-{kind}", classes="replay-pane"):
                            yield Static(kind, classes="pane-label")
                            yield TerminalView(id=f"view-{kind}", cols=80, rows=24)
                yield Timeline(id="replay-timeline")
                yield Static("", id="replay-status")
                yield SearchBar(id="replay-search")
            with Vertical(id="replay-side"):
                yield StepPanel(id="step-panel")
                yield Static("Evidence (e: next, Enter: seek)", id="evidence-heading")
                yield SteadyOptionList(id="replay-evidence")
                yield ReviewPanel(self.ws, id="review-panel")
                yield Static("Verifier output", classes="side-heading")
                with VerticalScroll(id="verifier-scroll"):
                    yield Static(
                        strip_controls(self.source.verifier_output) or "—", id="verifier-output", markup=False
                    )
        yield Footer(compact=True)

    def on_mount(self) -> None:
        self._ui = UiCaller()
        self.sub_title = self.source.title
        self._load_record()  # diagnoses if needed, so the review panel shows the diagnosis beside the review
        self.query_one(ReviewPanel).show(self.source.episode_id)
        paths = {"agent": self.source.agent_cast, "verifier": self.source.verifier_cast}
        problems = [self.error] if self.error else []
        for kind, path in paths.items():
            if path is None:
                continue
            try:
                cast = read_cast(path)
            except CastError as e:
                problems.append(str(e))
                continue
            # beside the workspace's own casts, in its cache for any other: never beside a curator's file
            kf_path = index_path_in(self.ws.root if self.ws is not None else None, Path(path))
            index = KeyframeIndex.open(cast, kf_path)  # a saved index seeks at once
            player = Player(index, idle_limit=self._idle_arg, speed=self._speed)
            self.players[kind] = player
            self._generations[kind] = player.screen_generation
            self.query_one(f"#view-{kind}", TerminalView).set_screen(player.screen)
            if cast.truncated:
                problems.append(
                    f"{path.name}: last line was cut (crashed writer); replaying what precedes it"
                )
            self.run_worker(
                lambda idx=player.index, kp=kf_path: self._build_index(idx, kp),
                thread=True,
                group="keyframes",
                exit_on_error=False,
            )
        if self.active not in self.players and self.players:
            self.active = next(iter(self.players))
        self._first_look(self.active)
        if problems:
            self.notify("\n".join(problems), severity="warning", timeout=8)
        self.problems = problems
        self._apply_layout()
        self._last = time.perf_counter()
        # paused until a cast plays (space): a clock that ticks while nothing moves costs CPU all day
        self._timer = self.set_interval(1 / FPS, self._tick, pause=True)
        self._refresh_all()
        self.search.mounted()

    def _load_record(self) -> None:
        """Why the episode ended (outcome, detail, tries, failing checks, diagnosis) in the header, and
        the diagnosis's evidence as a list that seeks the replay."""
        why = self.query_one("#replay-why", Static)
        evidence = self.query_one("#replay-evidence", OptionList)
        if self.ws is None or self.source.episode_id is None:
            why.display = False
            evidence.display = False
            self.query_one("#evidence-heading").display = False
            return
        from ...engine.app.episodes import EpisodeNotFound, episode_record, why_lines

        try:
            self.record = episode_record(self.ws, self.source.episode_id)
        except EpisodeNotFound:
            why.display = False
            return
        why.update("\n".join(why_lines(self.record, checks=3, evidence=0)))
        items = (self.record.get("diagnosis") or {}).get("evidence", [])
        evidence.clear_options()
        evidence.add_options(
            [
                Option(
                    (f"[{e['cast']} {e['time']:.1f}s] " if e.get("time") is not None else "")
                    + e["what"]
                    + (f"\n  {e['quote'].splitlines()[-1][:120]}" if e.get("quote") else ""),
                    id=str(n),
                )
                for n, e in enumerate(items)
            ]
        )
        # An empty list takes no focus: Textual's OptionList fails on page keys with no options.
        evidence.display = bool(items)
        if not items:
            self.query_one("#evidence-heading", Static).update("Evidence: none cited")

    def evidence_items(self) -> list[dict[str, Any]]:
        record = self.record or {}
        return list(record.get("diagnosis", {}) and record["diagnosis"]["evidence"] or [])

    def seek_evidence(self, n: int) -> None:
        """Seeks the cast an evidence item names to its time (the step's marker)."""
        items = self.evidence_items()
        if not 0 <= n < len(items):
            return
        e = items[n]
        self._evidence_at = n
        kind = e.get("cast") or "agent"
        if kind in self.players and kind != self.active:
            self.action_switch_cast()  # the evidence's own terminal: a failing check is the verifier's
        player = self.player
        t = e.get("time")
        if t is None and player is not None and kind == self.active:
            # cited by its output line, not a time (the verifier has no step markers): where it appears
            t = time_of_text(player.index, e.get("quote") or "")
            if t is None:
                t = player.duration
        if t is None or player is None:
            self.notify(e["what"], timeout=3)
            return
        player.pause()
        player.seek(float(t))
        self._seeked()

    def seek_first_evidence(self) -> None:
        """Seeks to the first evidence item tied to a step (a queue opens the replay there)."""
        for n, e in enumerate(self.evidence_items()):
            if e.get("time") is not None:
                self.query_one("#replay-evidence", OptionList).highlighted = n
                self.seek_evidence(n)
                return

    def action_next_evidence(self) -> None:
        """``e``: the next evidence after the playhead (in time, on the terminal shown), not the next in
        the list: the list is in the diagnosis's order, so stepping it used to jump backwards."""
        items = self.evidence_items()
        if not items:
            self.notify("no evidence to show for this episode", timeout=2)
            return
        player = self.player
        position = player.position if player is not None else 0.0
        n = next_evidence(items, self.active, position, self._evidence_at)
        self.query_one("#replay-evidence", OptionList).highlighted = n
        self.seek_evidence(n)

    def on_option_list_option_selected(self, event: OptionList.OptionSelected) -> None:
        event.stop()
        self.seek_evidence(event.option_index)

    def action_pan(self, delta: int) -> None:
        view = self.query_one(f"#view-{self.active}", TerminalView)
        view.pan(delta)
        self._refresh_status()

    def _build_index(self, index: KeyframeIndex, path: Path | None) -> None:
        """Runs in a thread worker: index the whole cast (unless a saved index was loaded), save it for
        next time (where ``index_path_in`` says; not at all without a workspace), then keep full GC
        passes off the snapshots. The status line is told how far it got after each slice and when it is
        done: with playback paused nothing else repaints it."""
        loaded = index.complete
        ui = self._ui
        while not index.build(budget_s=INDEX_SLICE_S, cancel=self._cancel):
            if self._cancel.is_set():
                return
            ui.call(self._index_progressed)
        if not loaded and path is not None:
            index.save(path)
        settle_gc()
        ui.call(self._index_progressed)

    def _index_progressed(self) -> None:
        """The keyframe worker got further (UI thread): show how far, or that it is done."""
        if self.is_attached:
            self._refresh_status()

    def on_unmount(self) -> None:
        self._cancel.set()

    def on_screen_suspend(self) -> None:
        # A dialog (tag) on top: stop playback and the frame timer, so nothing moves while choosing.
        if self.player is not None:
            self.player.pause()
        self._follow_player()

    def on_screen_resume(self) -> None:
        self._last = time.perf_counter()
        self._follow_player()

    def _follow_player(self) -> None:
        """Runs the frame clock while the cast plays and stops it when it does not (paused by a key, at
        its end or at a step marker, another cast shown, a dialog on top)."""
        if self._timer is None:
            return
        if self.player is not None and self.player.playing and self.is_current:
            self._timer.resume()
        else:
            self._timer.pause()

    # --- state helpers --- #

    @property
    def player(self) -> Player | None:
        return self.players.get(self.active)

    @property
    def tagger(self) -> Tagger | None:
        if self._tagger is None and self.ws is not None:
            self._tagger = Tagger(self.ws)
        return self._tagger

    def _apply_layout(self) -> None:
        for kind in CASTS:
            pane = self.query_one(f"#pane-{kind}")
            shown = kind in self.players and (self.side_by_side or kind == self.active)
            pane.display = shown
            pane.set_class(kind == self.active and self.side_by_side, "active")
        self.query_one("#replay-timeline", Timeline).set_markers(
            [m.time for m in self.player.markers] if self.player else []
        )

    def _sync_view(self, kind: str) -> None:
        player = self.players[kind]
        view = self.query_one(f"#view-{kind}", TerminalView)
        if self._generations.get(kind) != player.screen_generation:
            self._generations[kind] = player.screen_generation
            view.set_screen(player.screen)
        else:
            view.request_paint()

    def _tick(self) -> None:
        now = time.perf_counter()
        dt, self._last = now - self._last, now
        player = self.player
        if player is None:
            return
        if player.playing:
            res = player.tick(dt)
            if res.changed:
                self._sync_view(self.active)
            if res.paused_at is not None:
                self.notify(f"paused at {res.paused_at.label}", timeout=2)
        self._refresh_status()
        self._follow_player()  # it stopped (its end, a marker, a key): so does the clock

    def _refresh_all(self) -> None:
        for kind in self.players:
            self._sync_view(kind)
        self._refresh_status()

    def _task_step(self) -> str | None:
        """The task step the agent's playhead is in, with its verifier's result (multi-step tasks)."""
        agent = self.players.get("agent")
        steps = self.source.task_steps
        if agent is None or not steps:
            return None
        current = self.source.task_step_at(agent.position)
        return current.label(len(steps)) if current is not None else None

    def status_text(self) -> str:
        p = self.player
        if p is None:
            return "nothing to replay: " + ("; ".join(self.problems) or "the episode has no recordings")
        parts = [
            f"{'▶' if p.playing else '⏸'} {_clock(p.position, p.duration)} / "
            f"{_clock(p.duration, p.duration)}",
            f"{p.speed:g}x",
            f"idle ≤{p.idle_limit:g}s" if p.idle_limit else "idle: full",
        ]
        if p.pause_at_markers:
            parts.append("pause at steps")
        marker = p.current_marker()
        if marker is not None:
            parts.append(marker.label)
        task_step = self._task_step()
        if task_step is not None:  # a multi-step task: which of its steps this is, and its own result
            parts.append(task_step)
        if not p.index.complete:
            parts.append(f"indexing {p.index.progress:.0%}")
        parts.append(self.active + (" (v: switch)" if len(self.players) > 1 else ""))
        if self.is_mounted:
            view = self.query_one(f"#view-{self.active}", TerminalView)
            first, last, cols = view.hidden_columns()
            if view.size.width > 0 and (first > 1 or last < cols):  # 0: just switched, not laid out
                parts.append(f"cols {first}-{last} of {cols} (< >: pan)")
        return " · ".join(parts)

    def _refresh_status(self) -> None:
        p = self.player
        timeline = self.query_one("#replay-timeline", Timeline)
        if p is not None:
            timeline.duration = p.duration
            timeline.position = p.position
            timeline.indexed = p.index.progress
        text = self.status_text()
        if text != self._status_shown:  # an unchanged line costs no layout pass
            self._status_shown = text
            self.query_one("#replay-status", Static).update(text)
        self._refresh_step()

    def _refresh_step(self) -> None:
        agent = self.players.get("agent")
        panel = self.query_one("#step-panel", StepPanel)
        if agent is None:
            panel.show(None)
            return
        step = self.source.step_at(agent.position) if self.source.steps else None
        marker = agent.current_marker()
        panel.show(step, marker.label if marker is not None else None)

    def _seeked(self) -> None:
        self._sync_view(self.active)
        self._refresh_status()
        self._follow_player()  # a seek that paused (a frame step, evidence, a match) stops the clock

    # --- transport actions --- #

    def action_toggle_play(self) -> None:
        if self.player:
            self.player.toggle()
            self._last = time.perf_counter()
            self._refresh_status()
            self._follow_player()

    def action_skip(self, delta: float) -> None:
        if self.player:
            self.player.skip(delta)
            self._seeked()

    def action_jump(self, tenth: int) -> None:
        if self.player:
            self.player.seek_fraction(tenth / 10)
            self._seeked()

    def action_seek_start(self) -> None:
        if self.player:
            self.player.seek(0.0)
            self._seeked()

    def action_seek_end(self) -> None:
        if self.player:
            self.player.seek(self.player.duration)
            self._seeked()

    def action_next_marker(self) -> None:
        if self.player:
            if self.player.next_marker() is None:
                self.notify("no later step marker", timeout=2)
            self._seeked()

    def action_prev_marker(self) -> None:
        if self.player:
            self.player.prev_marker()
            self._seeked()

    def action_frame_forward(self) -> None:
        if self.player:
            self.player.pause()
            self.player.frame_forward()
            self._seeked()

    def action_frame_back(self) -> None:
        if self.player:
            self.player.pause()
            self.player.frame_back()
            self._seeked()

    def action_faster(self) -> None:
        if self.player:
            self.player.faster()
            self._refresh_status()

    def action_slower(self) -> None:
        if self.player:
            self.player.slower()
            self._refresh_status()

    def action_toggle_idle(self) -> None:
        p = self.player
        if p is None:
            return
        header = p.index.cast.header.get("idle_time_limit")
        default = float(header) if isinstance(header, int | float) and header > 0 else DEFAULT_IDLE
        p.idle_limit = None if p.idle_limit else default
        self._refresh_status()

    def action_toggle_marker_pause(self) -> None:
        for p in self.players.values():
            p.pause_at_markers = not p.pause_at_markers
        self._refresh_status()

    def action_switch_cast(self) -> None:
        if len(self.players) < 2:
            self.notify("this replay has only one cast", timeout=2)
            return
        old = self.player
        if old:
            old.pause()
        self.active = "verifier" if self.active == "agent" else "agent"
        new = self.player
        if old is not None and new is not None:  # the speed is the curator's, not the cast's
            new.speed = old.speed
        self._first_look(self.active)
        self._apply_layout()
        self._refresh_all()
        self.call_after_refresh(self._refresh_status)  # the shown view's columns, once it is laid out
        self._follow_player()

    def _first_look(self, kind: str) -> None:
        """The first time the verifier's terminal is shown it opens at its end — what it printed — not at
        its empty first frame (which read as a blank pane at "00:00 / 00:00" until space)."""
        player = self.players.get(kind)
        if kind == "verifier" and kind not in self._shown and player is not None and player.position == 0:
            player.seek(player.duration)
        self._shown.add(kind)

    def action_toggle_side_by_side(self) -> None:
        self.side_by_side = not self.side_by_side
        if self.side_by_side:
            for kind in self.players:
                self._first_look(kind)
        self._apply_layout()
        self._refresh_all()

    def on_timeline_seek(self, event: Timeline.Seek) -> None:
        if self.player:
            self.player.seek(event.time)
            self._seeked()

    def action_back(self) -> None:
        self._cancel.set()
        go_back(self)

    def action_changes(self) -> None:
        """What the policy changed in its container, with the tamper guard's findings."""
        eid = self.source.episode_id
        if eid is None or self.ws is None:
            self.notify("changes are kept for episodes, not bare cast files", severity="warning")
            return
        self.app.push_screen(ChangesScreen(self.ws, eid))

    # --- search (tui/screens/replay_search.py) --- #

    def action_search_cast(self) -> None:
        self.search.open_bar()

    def action_next_hit(self) -> None:
        self.search.step(1)

    def action_prev_hit(self) -> None:
        self.search.step(-1)

    def on_search_bar_submitted(self, event: SearchBar.Submitted) -> None:
        self.search.run(event.query)

    # --- tagging --- #

    def action_tag(self) -> None:
        eid = self.source.episode_id
        tagger = self.tagger
        if eid is None or tagger is None:
            self.notify("only an episode can be tagged (this is a bare cast file)", severity="warning")
            return
        with refusals(self):
            plan = plan_for(self.ws, [eid]) if self.ws is not None else None
            if plan is not None:
                open_tag_dialog(self, tagger, plan)

    def action_undo(self) -> None:
        label = self.tagger.undo() if self.tagger is not None else None
        self.notify(f"undone: {label}" if label else "nothing to undo", timeout=3)
        self.query_one(ReviewPanel).show(self.source.episode_id)

    def action_request_review(self) -> None:
        """Claude reviews this episode in the background; the panel repaints when it is stored."""
        eid = self.source.episode_id
        if eid is None:
            self.notify("only an episode can be reviewed (this is a bare cast file)", severity="warning")
            return

        def done(result: ReviewRunResult | None, error: str) -> None:
            message, severity = run_summary(result, error)
            self.notify(message, severity=severity)

        self.query_one(ReviewPanel).request([eid], done)

    def action_accept_review(self) -> None:
        """Claude's review becomes the curator's tag in one key (undo with u)."""
        tagger = self.tagger
        if tagger is None:
            self.notify("only an episode has reviews (this is a bare cast file)", severity="warning")
            return
        with refusals(self, severity="warning"):
            tag = self.query_one(ReviewPanel).accept(tagger)
            code = f"{tag.tag_class}.{tag.subclass}"
            if not tagger.last_added:
                self.notify(
                    f"episode {tag.episode_id} already carries {code}: the review is accepted", timeout=3
                )
            else:
                self.notify(f"tagged episode {tag.episode_id}: {code} from the review (u: undo)")


def next_evidence(items: list[dict[str, Any]], cast: str, position: float, last: int) -> int:
    """The evidence item ``e`` seeks to: the earliest one on ``cast`` (the terminal shown) timed after
    ``position`` (the playhead); past the last of those, the others in turn (another terminal's by time,
    then those with no time, such as a verifier's quoted line) after ``last``; then around."""

    def here(n: int) -> bool:
        return items[n].get("time") is not None and (items[n].get("cast") or "agent") == cast

    def when(n: int) -> float:
        t = items[n].get("time")
        return float(t) if t is not None else float("inf")

    ahead = [n for n in range(len(items)) if here(n) and when(n) > position + 1e-6]
    if ahead:
        return min(ahead, key=when)
    order = sorted(range(len(items)), key=lambda n: (not here(n), when(n), n))
    if last in order:
        for n in order[order.index(last) + 1 :]:
            if not here(n):
                return n
    elif any(not here(n) for n in order):
        return next(n for n in order if not here(n))
    return order[0]


class ReplayApp(SafeApp, CursorRest, App[None]):
    """``bandpass replay``: the Replay screen alone, on one episode or a bare cast file; leaving the
    screen (Escape) ends the app. Defined here, not in the command, so tests drive the same app."""

    TITLE = "Bandpass replay"
    #: The main app's q and ? (its other keys switch screens, which this app has not).
    BINDINGS = [
        Binding("question_mark", "help", "Help", key_display="?"),
        Binding("q", "quit", "Quit"),
    ]

    def __init__(
        self,
        ws: Workspace | None,
        source: ReplaySource,
        *,
        verifier: bool = False,
        speed: float = 1.0,
        idle_limit: float | None = None,
        search: SearchHits | None = None,
    ) -> None:
        super().__init__()
        self.error_root = ws.root if ws is not None else None
        self.replay = ReplayScreen(
            ws, source=source, verifier=verifier, speed=speed, idle_limit=idle_limit, search=search
        )

    def on_mount(self) -> None:
        self.push_screen(self.replay, callback=lambda _: self.exit())

    def action_help(self) -> None:
        """Every key of the Replay screen in one page, as in the main app."""
        from .help import HelpScreen, screen_keys

        if not isinstance(self.screen, HelpScreen):
            self.push_screen(HelpScreen("Replay", screen_keys(self.screen)))


if TYPE_CHECKING:
    # The search reaches this screen through its protocol (replay_search.ReplayHost): all of it is here.
    _gives_the_search_what_it_uses: type[ReplayHost] = ReplayScreen
