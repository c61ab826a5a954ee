"""ReviewPanel: Claude's latest review of an episode, beside the deterministic diagnosis, acceptable in
one key.

Why a widget of its own: Replay and the tag queue both show it, and both screens are reworked by other
features; each only needs ``show(episode_id)`` when its episode changes and ``accept(tagger)`` on its
accept key. The review stays a suggestion until accepted: accepting writes the *curator's* tag through
the screen's :class:`~engine.app.tagging.Tagger`, so the screen's undo takes it back.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rich.text import Text
from textual.notifications import SeverityLevel
from textual.widgets import Static

from ...engine.app import reads, tagging
from ...engine.app import review as reviewing
from ...engine.app.reads import FailureTag, ReviewSuggestion
from ...engine.app.review import ReviewRunResult, review_code
from ...engine.app.tagging import Tagger
from ...engine.core.errors import BandpassError
from ...engine.core.plural import counted
from ...engine.core.workspace import Workspace
from ..errors import Guarded
from ..screens.confirm import ConfirmDialog

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
                out.append(f"{counted(len(dropped), 'unsupported part')} dropped: ", style="yellow")
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
        """Accepts the latest *valid* review of the episode as the curator's tag
        (``tagging.accept_latest_review``); raises ReviewError with a one-line reason when there is
        nothing to accept."""
        accepted = tagging.accept_latest_review(self.ws, self.episode_id, tagger)
        self.show(self.episode_id)
        return accepted.tag

    def request(self, episode_ids: list[int], on_done: Callable[[ReviewRunResult | None, str], None]) -> None:
        """Asks first (a review spends Claude's tokens), then asks Claude for new reviews of
        ``episode_ids`` in a thread worker (network calls never block the UI), repaints and calls
        ``on_done(result, error)`` on the UI thread. Nothing to review is a warning, never a "failure"."""
        ws = self.ws
        if ws is None or not episode_ids:
            self.app.notify("nothing to review here: no episode highlighted or selected", severity="warning")
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

        def answer(yes: bool | None) -> None:
            if yes:
                self.app.notify(f"asking Claude to review {what}…", timeout=3)
                self.run_worker(work, thread=True, group="review")  # a bug: reported by SafeApp

        n = len(episode_ids)
        what = f"episode {episode_ids[0]}" if n == 1 else f"{n} episodes"
        try:
            model = ws.config.generator.model
            priced = reviewing.price_known(ws, model)
        except BandpassError:  # a broken bandpass.toml: the review itself says why
            model, priced = "the configured model", False
        cost = "priced from the price table" if priced else "its cost unknown: the model has no price"
        self.app.push_screen(
            ConfirmDialog(
                f"Ask Claude ({model}) to review {what}? Each review is one API call that spends tokens "
                f"({cost}); {n} call{'s' * (n != 1)} in all.",
                yes="review",
                no="start nothing",
            ),
            answer,
        )


def run_summary(result: ReviewRunResult | None, error: str) -> tuple[str, SeverityLevel]:
    """(message, severity) for a notification after :meth:`ReviewPanel.request`."""
    if result is None:
        return f"review failed: {error}", "error"
    by = ", ".join(f"{k} {v}" for k, v in result.as_dict()["by_status"].items()) or "nothing"
    cost = f"${result.spent_usd:.4f}" if result.cost_known else "cost unknown"
    bad = result.count("error") or result.skipped_budget
    return f"reviewed {len(result.results)}: {by} · {cost}", "warning" if bad else "information"
