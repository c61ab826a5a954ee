"""StepPanel: what the policy saw and did at the step under the replay's playhead.

Why: a cast shows *what happened*; the step row says *why* (the model's analysis and plan), *what it
typed*, and *what it was shown* (the observation, possibly cut: harness evidence). Reading the two in
sync is how a curator tells a policy mistake from a harness defect. The panel re-renders only when the
step changes, not on every playback tick.
"""

from __future__ import annotations

from pathlib import Path

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

from ...engine.app.replay import StepView
from ..errors import Guarded

#: Observation characters shown: the tail, which is what the model acted on last.
OBSERVATION_TAIL = 4000


def step_title(step: StepView) -> str:
    return (
        f"step {step.index} · {step.prompt_tokens:,} prompt + {step.completion_tokens:,} completion tokens"
        f" · {step.latency_s:.2f} s"
    )


class StepPanel(Guarded, VerticalScroll):
    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: tuple[object, ...] | None = None

    def compose(self) -> ComposeResult:
        yield Static("no step yet", id="step-title")
        yield Static("Analysis", classes="step-heading")
        yield Static("", id="step-analysis", classes="step-body")
        yield Static("Plan", classes="step-heading")
        yield Static("", id="step-plan", classes="step-body")
        yield Static("Keystrokes", classes="step-heading")
        yield Static("", id="step-keys", classes="step-body")
        yield Static("Model reply (raw)", classes="step-heading")
        yield Static("", id="step-raw", classes="step-body")
        yield Static("Observation given", classes="step-heading")
        yield Static("", id="step-observation", classes="step-body")
        yield Static("", id="step-notes", classes="step-body")

    @property
    def title_text(self) -> str:
        return str(self.query_one("#step-title", Static).content)

    def show(self, step: StepView | None, marker_label: str | None = None) -> None:
        """Shows ``step`` (from the store) or, for a bare cast, just the marker's label."""
        key = (id(step), step.index if step else None, marker_label)
        if key == self._shown:
            return
        self._shown = key

        def put(widget_id: str, value: str | Text) -> None:
            self.query_one(f"#{widget_id}", Static).update(value)

        if step is None:
            put("step-title", f"marker: {marker_label}" if marker_label else "before the first step")
            for w in (
                "step-analysis",
                "step-plan",
                "step-keys",
                "step-raw",
                "step-observation",
                "step-notes",
            ):
                put(w, "")
            return
        put("step-title", step_title(step) + (" · task_complete" if step.task_complete else ""))
        put("step-analysis", Text(step.analysis or "—"))
        put("step-plan", Text(step.plan or "—"))
        put("step-keys", Text("\n".join(repr(k) for k in step.keystrokes) or "(no keystrokes)"))
        raw = step.raw_reply  # the evidence for a parse error: what the model actually said
        put("step-raw", Text(raw[:OBSERVATION_TAIL] + (" …" if len(raw) > OBSERVATION_TAIL else "") or "—"))
        obs = step.observation
        if len(obs) > OBSERVATION_TAIL:
            obs = f"… {len(obs) - OBSERVATION_TAIL:,} characters above …\n" + obs[-OBSERVATION_TAIL:]
        put("step-observation", Text(obs or "—"))
        extra = [f"note: {n}" for n in step.notes]
        extra += [f"cut: {c}" for c in step.cuts]
        put("step-notes", Text("\n".join(extra)))
