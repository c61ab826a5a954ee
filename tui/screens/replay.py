"""Replay screen: an episode's agent and verifier casts with instant seek, step sync and tagging.

Why this shape: a curator replays a failed episode to decide *why* it failed, so the cast (what
happened) sits next to the step the policy was on (what it thought, typed and was shown) and the
verifier's output (what was checked), and a tag can be written without leaving the screen. The transport
is :class:`engine.review.replay.Player` (UI-free, the same one ``bandpass replay --print-at`` and the tests
drive); this screen only turns keys into player calls and paints what the player holds.

The keyframe index of each cast is built in a thread worker right after mounting; seeks work at once
and get instant as the index fills in (the status line shows how far it got).
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import Screen
from textual.timer import Timer
from textual.widgets import Footer, Header, Static

from engine.core.workspace import Workspace
from engine.review.outcomes import suggested_tag
from engine.review.replay import (
    KeyframeIndex,
    Player,
    ReplaySource,
    ReplaySourceError,
    load_source,
    settle_gc,
)
from engine.review.reviewer import ReviewError
from engine.review.tagging import TagError, Tagger
from engine.review.taxonomy import TaxonomyError
from engine.sandbox.asciicast import CastError, read_cast
from tui.screens.changes import ChangesScreen
from tui.screens.tag_dialog import TagChoice, TagDialog
from tui.widgets.review_panel import ReviewPanel, run_summary
from tui.widgets.step_panel import StepPanel
from tui.widgets.terminal_view import TerminalView
from tui.widgets.timeline import Timeline, fmt_time

FPS = 30
SEEK_STEP = 5.0
#: Idle limit the "i" key toggles on when the cast's header names none.
DEFAULT_IDLE = 2.0
CASTS = ("agent", "verifier")


class ReplayScreen(Screen[None]):
    CSS_PATH = "replay.tcss"
    BINDINGS = [
        Binding("space", "toggle_play", "Play/Pause"),
        Binding("left", "skip(-5)", "−5 s", show=False),
        Binding("right", "skip(5)", "+5 s", show=False),
        Binding("left_square_bracket", "prev_marker", "Prev step", show=False),
        Binding("right_square_bracket", "next_marker", "Next step"),
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
        Binding("t", "tag", "Tag"),
        Binding("u", "undo", "Undo tag", show=False),
        Binding("y", "accept_review", "Accept review"),
        Binding("R", "request_review", "Review with Claude"),
        Binding("d", "changes", "Changes"),
        Binding("escape", "back", "Back"),
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

    # --- composition --- #

    def compose(self) -> ComposeResult:
        yield Header()
        with Horizontal(id="replay-main"):
            with Vertical(id="replay-left"):
                yield Static(self.source.title, id="replay-title")
                with Horizontal(id="replay-panes"):
                    for kind in CASTS:
                        with Vertical(id=f"pane-{kind}", classes="replay-pane"):
                            yield Static(kind, classes="pane-label")
                            yield TerminalView(id=f"view-{kind}", cols=80, rows=24)
                yield Timeline(id="replay-timeline")
                yield Static("", id="replay-status")
            with Vertical(id="replay-side"):
                yield StepPanel(id="step-panel")
                yield ReviewPanel(self.ws, id="review-panel")
                yield Static("Verifier output", classes="side-heading")
                with VerticalScroll(id="verifier-scroll"):
                    yield Static(self.source.verifier_output or "—", id="verifier-output", markup=False)
        yield Footer()

    def on_mount(self) -> None:
        self.sub_title = self.source.title
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
            player = Player(KeyframeIndex(cast), idle_limit=self._idle_arg, speed=self._speed)
            self.players[kind] = player
            self._generations[kind] = player.screen_generation
            self.query_one(f"#view-{kind}", TerminalView).set_screen(player.screen)
            if cast.truncated:
                problems.append(
                    f"{path.name}: last line was cut (crashed writer); replaying what precedes it"
                )
            self.run_worker(
                lambda idx=player.index: self._build_index(idx),
                thread=True,
                group="keyframes",
                exit_on_error=False,
            )
        if self.active not in self.players and self.players:
            self.active = next(iter(self.players))
        if problems:
            self.notify("\n".join(problems), severity="warning", timeout=8)
        self.problems = problems
        self._apply_layout()
        self._last = time.perf_counter()
        self._timer = self.set_interval(1 / FPS, self._tick)
        self._refresh_all()

    def _build_index(self, index: KeyframeIndex) -> None:
        """Runs in a thread worker: index the whole cast, then keep full GC passes off the snapshots."""
        if index.build(cancel=self._cancel):
            settle_gc()

    def on_unmount(self) -> None:
        self._cancel.set()

    def on_screen_suspend(self) -> None:
        # A dialog (tag) on top: stop playback and the frame timer, so nothing moves while choosing.
        if self.player is not None:
            self.player.pause()
        if self._timer is not None:
            self._timer.pause()

    def on_screen_resume(self) -> None:
        self._last = time.perf_counter()
        if self._timer is not None:
            self._timer.resume()

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

    def _refresh_all(self) -> None:
        for kind in self.players:
            self._sync_view(kind)
        self._refresh_status()

    def status_text(self) -> str:
        p = self.player
        if p is None:
            return "nothing to replay: " + ("; ".join(self.problems) or "the episode has no recordings")
        parts = [
            f"{'▶' if p.playing else '⏸'} {fmt_time(p.position)} / {fmt_time(p.duration)}",
            f"{p.speed:g}x",
            f"idle ≤{p.idle_limit:g}s" if p.idle_limit else "idle: full",
        ]
        if p.pause_at_markers:
            parts.append("pause at steps")
        marker = p.current_marker()
        if marker is not None:
            parts.append(marker.label)
        if not p.index.complete:
            parts.append(f"indexing {p.index.progress:.0%}")
        parts.append(self.active + (" (v: switch)" if len(self.players) > 1 else ""))
        return " · ".join(parts)

    def _refresh_status(self) -> None:
        p = self.player
        timeline = self.query_one("#replay-timeline", Timeline)
        if p is not None:
            timeline.duration = p.duration
            timeline.position = p.position
            timeline.indexed = p.index.progress
        self.query_one("#replay-status", Static).update(self.status_text())
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

    # --- transport actions --- #

    def action_toggle_play(self) -> None:
        if self.player:
            self.player.toggle()
            self._last = time.perf_counter()
            self._refresh_status()

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
        if self.player:
            self.player.pause()
        self.active = "verifier" if self.active == "agent" else "agent"
        self._apply_layout()
        self._refresh_all()

    def action_toggle_side_by_side(self) -> None:
        self.side_by_side = not self.side_by_side
        self._apply_layout()
        self._refresh_all()

    def on_timeline_seek(self, event: Timeline.Seek) -> None:
        if self.player:
            self.player.seek(event.time)
            self._seeked()

    def action_back(self) -> None:
        self._cancel.set()
        self.dismiss(None)

    def action_changes(self) -> None:
        """What the policy changed in its container, with the tamper guard's findings."""
        eid = self.source.episode_id
        if eid is None or self.ws is None:
            self.notify("changes are kept for episodes, not bare cast files", severity="warning")
            return
        self.app.push_screen(ChangesScreen(self.ws, eid))

    # --- tagging --- #

    def action_tag(self) -> None:
        eid = self.source.episode_id
        tagger = self.tagger
        if eid is None or tagger is None:
            self.notify("only an episode can be tagged (this is a bare cast file)", severity="warning")
            return
        suggestion = suggested_tag(self.source.outcome)

        def done(choice: TagChoice | None) -> None:
            if choice is None:
                return
            try:
                (tag,) = tagger.tag(eid, choice.code, note=choice.note)
            except (TagError, TaxonomyError) as e:
                self.notify(str(e), severity="error")
                return
            extra = " · blocks its task's export" if tag.blocking else ""
            self.notify(f"tagged episode {eid}: {choice.code}{extra} (u: undo)")

        self.app.push_screen(
            TagDialog(
                tagger.taxonomy,
                targets=f"episode {eid}",
                preselect=suggestion,
                suggestion=suggestion,
                reason=self.source.outcome,
            ),
            done,
        )

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
        self.notify("asking Claude to review this episode…", timeout=3)

        def done(result, error: str) -> None:  # noqa: ANN001 - ReviewRunResult | None
            message, severity = run_summary(result, error)
            self.notify(message, severity=severity)  # type: ignore[arg-type]

        self.query_one(ReviewPanel).request([eid], done)

    def action_accept_review(self) -> None:
        """Claude's review becomes the curator's tag in one key (undo with u)."""
        tagger = self.tagger
        if tagger is None:
            self.notify("only an episode has reviews (this is a bare cast file)", severity="warning")
            return
        try:
            tag = self.query_one(ReviewPanel).accept(tagger)
        except (ReviewError, TagError, TaxonomyError) as e:
            self.notify(str(e), severity="warning")
            return
        self.notify(
            f"tagged episode {tag.episode_id}: {tag.tag_class}.{tag.subclass} from the review (u: undo)"
        )
