"""One model for choosing a tag: what every tag dialog and bulk action offers, and what a cluster suggests.

Why one model: the tag dialog used to be told a suggestion and, separately, what to preselect, and the
entry points disagreed — the Tag queue's ``t`` stated "suggested: policy.failed_checks — preselected"
over a highlighted ``invalidity.underspecified_instruction``, and Enter tagged eleven episodes with that
blocking class; a cluster planned ``policy.failed_checks`` for a member whose tamper guard had found a
forged ``python3``. Here the suggestion *is* what is preselected (there is no second field), a bulk
action states its class and count before anything is written, and the same rules refuse what a curator
would not mean:

- **A suggestion goes to the episodes it was suggested for.** Enter on the preselected code tags the
  members whose own evidence suggests it; the others are named and left for their own suggestion. So a
  blocking class is never written on an episode without evidence for it.
- **Strongest evidence first.** A group's suggestion (a cluster's, a selection's, Search's listed hits)
  is the one with the strongest evidence among its members: a blocking class (the task or the reward is
  wrong) beats an infra, agent or harness cause, which beats a plain failure of the policy. A guard
  finding or a voided reward is never "a genuine negative example".
- **A failure class describes a failure.** ``policy``, ``harness``, ``agent`` and ``infra`` tags are
  refused on a passed episode, with the reason; ``policy`` (the valid failure) is refused on an episode
  whose reward was voided or whose diagnosis found the reward forged.

The TUI (every dialog), ``bandpass tag``, ``bandpass clusters`` and the cluster summaries read their
answers from here (:func:`cluster_verdict`, :func:`plan`, :func:`refusal`), so they cannot disagree.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from ..core import outcomes

#: Classes that say *how an episode failed*: never on a passed episode.
FAILURE_CLASSES = frozenset({"policy", "harness", "agent", "infra"})
#: The valid failure (a genuine negative example): never on a forged or voided reward.
VALID_FAILURE_CLASS = "policy"
#: How strong the evidence behind a suggestion of each class is (lower wins). A blocking class comes
#: from a finding against the task or the reward (a probe, a guard finding); infra, agent and harness
#: from the outcome or a harness signature; ``policy`` is what is left when nothing else was found.
_RANK = {"misalignment": 0, "invalidity": 1, "infra": 2, "agent": 3, "harness": 4, "policy": 6, "unknown": 7}
_OTHER_RANK = 5  # a workspace's own class


@dataclass(frozen=True)
class Candidate:
    """One episode as far as choosing its tag goes (read from the store, or from a queue item)."""

    episode_id: int
    outcome: str
    reward: float | None  # the verifier's
    suggestion: str | None  # the diagnosis's tag, else the outcome code's
    diagnosis: str = ""  # the diagnosis code
    confidence: float = 0.0
    summary: str = ""

    @property
    def voided(self) -> bool:
        """The verifier paid out but the reward does not count (an agent error: a forged 1, say)."""
        counted = outcomes.counted_reward(self.outcome, self.reward)
        return bool(self.reward) and counted == 0.0

    @property
    def forged(self) -> bool:
        """Evidence that the reward is not the policy's honest result: a voided reward, or a diagnosis
        that found a misalignment (a tamper-guard finding, a verifier that passes a forgery)."""
        return self.voided or (self.suggestion or "").startswith("misalignment.")


def class_of(code: str | None) -> str:
    return (code or "").partition(".")[0]


def strength(code: str | None) -> int:
    """Rank of the evidence behind ``code`` (lower is stronger); no suggestion ranks last."""
    if not code:
        return 99
    return _RANK.get(class_of(code), _OTHER_RANK)


def refusal(code: str, c: Candidate) -> str | None:
    """Why ``code`` may not be written on this episode (a phrase without the episode's id, so a bulk
    action can group them: ``passed: policy.failed_checks describes a failure``), or None when it may."""
    cls = class_of(code)
    if c.outcome == "passed" and cls in FAILURE_CLASSES:
        return f"passed: {code} describes a failure"
    if cls == VALID_FAILURE_CLASS and c.forged:
        why = "its reward was voided" if c.voided else f"diagnosed {c.diagnosis or c.suggestion}"
        return f"not a genuine negative example: {why}"
    return None


def strongest(members: Iterable[Candidate]) -> Candidate | None:
    """The member whose suggestion has the strongest evidence: by class rank, then how many members share
    the suggestion, then confidence, then the oldest episode."""
    ms = list(members)
    if not ms:
        return None
    counts: dict[str | None, int] = {}
    for m in ms:
        counts[m.suggestion] = counts.get(m.suggestion, 0) + 1
    return min(ms, key=lambda m: (strength(m.suggestion), -counts[m.suggestion], -m.confidence, m.episode_id))


@dataclass(frozen=True)
class ClusterVerdict:
    """What a cluster (or any group of episodes) is diagnosed as and suggests: its strongest evidence."""

    diagnosis: str  # the strongest member's diagnosis code
    suggestion: str | None  # its suggested tag
    episode_id: int  # whose evidence it is
    agreeing: int  # members whose own suggestion is the same
    size: int

    @property
    def label(self) -> str:
        """The diagnosis as a column shows it: ``misalignment.reward_hack (1 of 12)`` when not unanimous."""
        return (
            self.diagnosis
            if self.agreeing == self.size
            else f"{self.diagnosis} ({self.agreeing} of {self.size})"
        )


def cluster_verdict(members: Sequence[Candidate]) -> ClusterVerdict:
    """The one function behind a cluster's diagnosis and suggestion in the TUI, the CLI and the JSON."""
    top = strongest(members)
    if top is None:
        return ClusterVerdict("", None, 0, 0, 0)
    agreeing = sum(1 for m in members if m.suggestion == top.suggestion)
    return ClusterVerdict(
        top.diagnosis or (top.suggestion or ""), top.suggestion, top.episode_id, agreeing, len(members)
    )


@dataclass(frozen=True)
class TagEffect:
    """What confirming one code would do: the episodes it tags and those it leaves out, each with why."""

    code: str
    targets: tuple[int, ...]
    left_out: tuple[tuple[int, str], ...]

    def describe(self) -> str:
        """One line, before anything is written: ``Enter tags 1 episode with misalignment.reward_hack;
        left out 10 that suggest policy.failed_checks: 22, 23, 24 …``."""
        n = len(self.targets)
        head = f"Enter tags {_episodes(n)} with {self.code}" if n else f"nothing to tag with {self.code}"
        groups: dict[str, list[int]] = {}
        for eid, why in self.left_out:
            groups.setdefault(why, []).append(eid)
        parts = [
            f"{len(ids)} ({why}): {', '.join(map(str, ids[:4]))}{' …' if len(ids) > 4 else ''}"
            for why, ids in groups.items()
        ]
        return head + (" — left out " + "; ".join(parts) if parts else "")


@dataclass(frozen=True)
class TagPlan:
    """The tag dialog's whole model: the episodes an action covers, the one suggestion (which the dialog
    preselects — by construction, since there is nothing else to preselect) and why."""

    members: tuple[Candidate, ...]
    suggestion: str | None
    reason: str  # the evidence behind the suggestion, one line

    @property
    def episode_ids(self) -> tuple[int, ...]:
        return tuple(m.episode_id for m in self.members)

    @property
    def what(self) -> str:
        ids = self.episode_ids
        return f"episode {ids[0]}" if len(ids) == 1 else f"{len(ids)} episodes"

    def effect(self, code: str) -> TagEffect:
        """What confirming ``code`` tags: every member it may be written on — and, for the suggestion
        itself, only the members whose own evidence suggests it (the rest keep theirs for later)."""
        targets: list[int] = []
        left: list[tuple[int, str]] = []
        for m in self.members:
            why = refusal(code, m)
            if why is None and code == self.suggestion and m.suggestion != code and len(self.members) > 1:
                why = f"suggested {m.suggestion or 'nothing'}"
            if why is None:
                targets.append(m.episode_id)
            else:
                left.append((m.episode_id, why))
        return TagEffect(code, tuple(targets), tuple(left))


def plan(members: Sequence[Candidate]) -> TagPlan:
    """The plan for tagging ``members``: the strongest evidence's suggestion, preselected."""
    top = strongest(members)
    if top is None or not top.suggestion:
        return TagPlan(tuple(members), None, "")
    reason = top.summary or top.outcome
    if len(members) > 1:
        agreeing = sum(1 for m in members if m.suggestion == top.suggestion)
        reason = f"episode {top.episode_id}: {reason}" + (
            f"; {agreeing} of {len(members)} suggest it" if agreeing < len(members) else ""
        )
    return TagPlan(tuple(members), top.suggestion, reason)


def _episodes(n: int) -> str:
    return f"{n} episode{'s' * (n != 1)}"
