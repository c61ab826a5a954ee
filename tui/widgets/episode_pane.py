"""EpisodePane: one running episode in the Runs grid — a title line, the policy's terminal, the verifier's.

The verifier's terminal stays hidden until the verifier writes its first byte (it only runs after the
agent is done), so a grid cell spends its space on the terminal that is live. The pane can be maximized
(Textual's maximize), which is how "focus one to full size" works: the same widgets, no copy.
"""

from __future__ import annotations

from pathlib import Path

from rich.markup import escape
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Static

from ...engine.core import outcomes
from .live_episodes import LiveEpisode
from .terminal_view import TerminalView


def outcome_class(outcome: str) -> str:
    if outcome == outcomes.PASSED:
        return "-passed"
    if outcomes.is_infra(outcome):
        return "-infra"
    if outcome:
        return "-failed"
    return "-running"


class EpisodePane(Vertical, can_focus=False):
    DEFAULT_CSS = (Path(__file__).with_suffix(".tcss")).read_text(encoding="utf-8")
    ALLOW_MAXIMIZE = True

    class Focused(Message):
        """A terminal in this pane got focus: the Runs screen shows this episode's steps."""

        def __init__(self, pane: EpisodePane) -> None:
            super().__init__()
            self.pane = pane

    def __init__(self, live: LiveEpisode, *, max_fps: float = 60.0) -> None:
        super().__init__(id=f"episode-{live.episode_id}", classes="episode-pane -running")
        self.live = live
        self.agent_view = TerminalView(live.screen("agent"), max_fps=max_fps, classes="pane-agent")
        self.verifier_view = TerminalView(live.screen("verifier"), max_fps=max_fps, classes="pane-verifier")
        self.title_bar = Static(self._title(live.outcome, live.reward), classes="pane-title", markup=True)

    def compose(self) -> ComposeResult:
        yield self.title_bar
        yield self.agent_view
        yield self.verifier_view

    def on_mount(self) -> None:
        self.verifier_view.display = self.live.verifier_seen
        self.live.views["agent"] = self.agent_view
        self.live.views["verifier"] = self.verifier_view
        self.update_status()

    def on_unmount(self) -> None:
        for stream, view in (("agent", self.agent_view), ("verifier", self.verifier_view)):
            if self.live.views.get(stream) is view:
                del self.live.views[stream]

    def _title(self, outcome: str, reward_value: float | None) -> str:
        ep = self.live
        state = outcome or (f"step {ep.step_index}" if ep.step_index is not None else "starting")
        label = outcomes.reward_label(outcome, reward_value) if outcome else "—"  # agent errors count 0
        reward = "" if label == "—" else f" · reward {escape(label)}"
        purpose = " · learning where it is verified" if ep.learns_footprint else ""
        return (
            f"[b]#{ep.episode_id}[/b] {escape(ep.task_name or '?')} · {escape(ep.agent)}{purpose} "
            f"· try {ep.attempt} · [b]{escape(state)}[/b]{reward}"
        )

    def update_status(self) -> None:
        """Refreshes title, outcome colour and the verifier's visibility from the live record.

        The record is written on the publishing thread while this runs on the UI thread, so the outcome
        is read once: a title saying ``step 0`` under a ``-passed`` colour was seen when it changed
        between two reads."""
        outcome, reward = self.live.outcome, self.live.reward
        self.title_bar.update(self._title(outcome, reward))
        for cls in ("-running", "-passed", "-failed", "-infra"):
            self.remove_class(cls)
        self.add_class(outcome_class(outcome))
        if self.live.verifier_seen and not self.verifier_view.display:
            self.verifier_view.display = True

    def on_descendant_focus(self) -> None:
        self.post_message(self.Focused(self))
