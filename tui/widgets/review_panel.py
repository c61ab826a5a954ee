"""ReviewPanel: Claude's latest review of an episode, beside the deterministic diagnosis, acceptable in
one key.

Why a widget of its own: Replay and the tag queue both show it, and both screens are reworked by other
features; each only needs ``show(episode_id)`` when its episode changes and ``accept(tagger)`` on its
accept key. The review stays a suggestion until accepted: accepting writes the *curator's* tag through
the screen's :class:`~engine.review.tagging.Tagger`, so the screen's undo takes it back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.notifications import SeverityLevel
from textual.widgets import Static

from bandpass.engine.app import reads
from bandpass.engine.app import review as reviewing
from bandpass.engine.app.reads import FailureTag, ReviewSuggestion
from bandpass.engine.core.errors import BandpassError
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.review_validation import review_code
from bandpass.engine.review.reviewer import ReviewError, ReviewRunResult, accept_review
from bandpass.engine.review.tagging import Tagger
from bandpass.tui.errors import Guarded

#: The key both screens bind to "accept review" (shown in the panel's hint).
ACCEPT_KEY = "y"
#: The key both screens bind to "review with Claude".
REQUEST_KEY = "R"


def review_text(
    review: ReviewSuggestion | None,
    diagnosis: str | None,
    episode_id: int | None,
    accepted: int | None = None,
) -> Text:
    """The panel's content; a plain function so the CLI-free rendering is testable."""
    out = Text()
    out.append("Claude's review", style="bold")
    if review is None:
        ep = episode_id if episode_id is not None else "EP"
        out.append(f"\nnone yet ({REQUEST_KEY}: ask Claude, or bandpass review {ep})\n", style="dim")
    else:
        out.append(
            f" #{review.id} · {review.model} / {review.prompt_version} · {review.status}\n", style="dim"
        )
        if review.status == "ok":
            mapped = review_code(review)
            code = mapped or "no taxonomy code"
            if mapped and not review.tag_class:
                code += " (the valid failure)"
            out.append(f"{review.verdict} · ", style="bold")
            out.append(code, style="bold magenta")
            if accepted is not None:
                out.append(f" · accepted as tag #{accepted}", style="green")
            elif mapped:
                out.append(f"  ({ACCEPT_KEY}: accept)", style="dim")
            out.append("\n")
            if review.explanation:
                out.append(review.explanation + "\n")
            for c in json.loads(review.citations_json or "[]"):
                where = f"step {c.get('step')}" if c.get("source") == "step" else str(c.get("source"))
                out.append(f"  [{where}] ", style="cyan")
                out.append(f"{c.get('quote', '')!r}\n")
            dropped = json.loads(review.dropped_json or "[]")
            if dropped:
                out.append(f"{len(dropped)} unsupported part(s) dropped: ", style="yellow")
                out.append("; ".join(str(d.get("reason", "")) for d in dropped[:3]) + "\n", style="yellow")
        else:
            out.append((review.error or review.explanation or review.status) + "\n", style="yellow")
        cost = "cost unknown" if review.cost_usd is None else f"${review.cost_usd:.4f}"
        out.append(f"{review.tokens_in:,} in / {review.tokens_out:,} out tokens · {cost}\n", style="dim")
    out.append("Deterministic diagnosis: ", style="bold")
    out.append(diagnosis or "none stored", style="" if diagnosis else "dim")
    return out


class ReviewPanel(Guarded, Static):
    DEFAULT_CSS = Path(__file__).with_suffix(".tcss").read_text(encoding="utf-8")

    def __init__(self, ws: Workspace | None, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__("", id=id, classes=classes, markup=False)
        self.ws = ws
        self.episode_id: int | None = None
        self.review: ReviewSuggestion | None = None

    def show(self, episode_id: int | None) -> None:
        """Loads and paints the latest review (any status) and the stored diagnosis of ``episode_id``."""
        self.episode_id = episode_id
        self.review = None
        diagnosis: str | None = None
        accepted: int | None = None
        if self.ws is not None and episode_id is not None:
            view = reads.review_view(self.ws, episode_id)
            self.review, accepted, diagnosis = view.review, view.accepted_tag, view.diagnosis
        self.display = self.ws is not None and episode_id is not None  # a bare cast has no review
        self.update(review_text(self.review, diagnosis, episode_id, accepted))

    def accept(self, tagger: Tagger) -> FailureTag:
        """Accepts the latest *valid* review of the episode as the curator's tag; raises ReviewError with
        a one-line reason when there is nothing to accept."""
        if self.ws is None or self.episode_id is None:
            raise ReviewError("no episode here")
        latest = reviewing.latest_valid_review(self.ws, self.episode_id)
        if latest.review_id is None:
            raise ReviewError(
                f"episode {self.episode_id} has no valid review (bandpass review {self.episode_id})"
            )
        if latest.accepted_tag is not None:
            raise ReviewError(
                f"review #{latest.review_id} is already accepted (tag #{latest.accepted_tag.id})"
            )
        tag = accept_review(self.ws, latest.review_id, tagger=tagger)
        self.show(self.episode_id)
        return tag

    def request(self, episode_ids: list[int], on_done: Callable[[ReviewRunResult | None, str], None]) -> None:
        """Asks Claude for new reviews of ``episode_ids`` in a thread worker (network calls never block
        the UI), then repaints and calls ``on_done(result, error)`` on the UI thread."""
        ws = self.ws
        if ws is None or not episode_ids:
            on_done(None, "no episode to review")
            return

        def finish(result: ReviewRunResult | None, error: str) -> None:
            self.show(self.episode_id)
            on_done(result, error)

        def work() -> None:
            try:
                request = reviewing.ReviewRequest(episodes=episode_ids, again=True)
                result, error = reviewing.review(ws, request, episode_ids), ""
            except BandpassError as exc:  # no key, nothing listening: the curator's notification
                result, error = None, str(exc)
            self.app.call_from_thread(finish, result, error)

        self.run_worker(work, thread=True, group="review")  # a bug: reported by SafeApp, never silent


def run_summary(result: ReviewRunResult | None, error: str) -> tuple[str, SeverityLevel]:
    """(message, severity) for a notification after :meth:`ReviewPanel.request`."""
    if result is None:
        return f"review failed: {error}", "error"
    by = ", ".join(f"{k} {v}" for k, v in result.as_dict()["by_status"].items()) or "nothing"
    cost = f"${result.spent_usd:.4f}" if result.cost_known else "cost unknown"
    bad = result.count("error") or result.skipped_budget
    return f"reviewed {len(result.results)}: {by} · {cost}", "warning" if bad else "information"
