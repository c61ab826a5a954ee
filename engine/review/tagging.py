"""Failure tagging: the review queue, validated (bulk) tags, skip, clear, and undo.

Why it lives in the engine and not in a screen: the TUI's queue, ``bandpass tag`` and the tests must
apply the same rules (the taxonomy validates every tag, blocking follows the class, author and time are
always recorded), and undo must reverse exactly what was done, including a bulk tag of forty episodes,
as one step.

An outcome code's suggestion (``engine.core.outcomes.suggested_tag``) is only ever *offered*: nothing here
writes a tag without a caller naming it, because a wrong automatic tag silently keeps tasks in or out of
an export.
"""

from __future__ import annotations

import getpass
import json
import os
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ...store import queries
from ...store.db import session
from ...store.models import FailureTag, pk
from ...store.queries import diagnoses as dq
from ..core import outcomes
from ..core.errors import BandpassError
from ..core.outcomes import suggested_tag
from ..core.taxonomy import Taxonomy, TaxonomyError, load_taxonomy
from ..core.workspace import Workspace
from ..sandbox.attribution import facts as attribution_facts
from ..sandbox.attribution import summary as attribution_line
from .checks import check_names, failed_checks
from .diagnosis import is_probe
from .signatures import matches
from .tag_choice import Candidate, TagPlan, plan, refusal


class TagError(BandpassError, ValueError):
    """A tagging request that cannot be applied; the message is one line for the curator."""


def current_author() -> str:
    """``$BANDPASS_AUTHOR``, else the OS user: every tag says who made it."""
    env = os.environ.get("BANDPASS_AUTHOR", "").strip()
    if env:
        return env
    try:
        return getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (some containers)
        return "unknown"


def failing_tests(verifier_output: str) -> tuple[str, ...]:
    """Names of the checks the verifier reports as failed, sorted (every format engine/review/checks.py
    reads: pytest, CTRF, unittest, TAP, generic expected/got)."""
    return check_names(failed_checks(verifier_output))


@dataclass
class QueueItem:
    episode_id: int
    task: str
    version_hash: str
    agent: str
    attempt: int
    outcome: str
    reward: float | None
    state: str  # pending | tagged | skipped
    tags: list[str]  # "class.subclass" of the active tags
    tag_ids: list[int]
    suggestion: str | None  # the diagnosis's tag, else the outcome code's
    failing_tests: tuple[str, ...]
    agent_cast: str = ""
    verifier_cast: str = ""
    batch_id: str = ""
    probe: bool = False  # the audit's own oracle/nop/cheat episode
    diagnosis: str = ""  # diagnosis code (engine/review/diagnosis.py)
    confidence: float = 0.0
    summary: str = ""
    signature: str = ""  # failure signature (engine/review/signatures.py)
    attribution: str = ""  # who ended the sandbox, one line (engine/sandbox/attribution/); "" if nobody
    attribution_facts: str = ""  # its evidence in one line: exit code, OOMKilled, the engine's events

    @property
    def candidate(self) -> Candidate:
        """The item as the tag-choice model sees it (engine/review/tag_choice.py)."""
        return Candidate(
            self.episode_id,
            self.outcome,
            self.reward,
            self.suggestion,
            self.diagnosis,
            self.confidence,
            self.summary,
        )

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["failing_tests"] = list(self.failing_tests)
        # what the episode counts for (an agent error's 0, an infra error's null); the verifier's own apart
        d["reward"] = outcomes.counted_reward(self.outcome, self.reward)
        d["verifier_reward"] = self.reward
        return d


@dataclass
class QueueFilter:
    """What the queue shows besides its state filter. ``outcome`` matches a full outcome or its kind
    (``failed``, ``agent_error``, ``infra_error``); ``cluster`` is a cluster id or a full signature
    (engine/review/signatures.py)."""

    agent: str | None = None
    task: str | None = None
    outcome: str | None = None
    cluster: str | None = None
    include_probes: bool = False

    def admits(self, i: QueueItem) -> bool:
        if i.probe and not self.include_probes:
            return False
        if self.agent is not None and i.agent != self.agent:
            return False
        if self.task is not None and i.task != self.task:
            return False
        if (
            self.outcome is not None
            and i.outcome != self.outcome
            and outcomes.kind_of(i.outcome) != self.outcome
        ):
            return False
        return self.cluster is None or matches(i.signature, self.cluster)

    def describe(self) -> str:
        parts = [
            f"{k} {v}"
            for k, v in (("agent", self.agent), ("task", self.task), ("outcome", self.outcome))
            if v
        ]
        if self.cluster:
            parts.append("one cluster")
        if self.include_probes:
            parts.append("with audit probes")
        return ", ".join(parts)


def load_queue(
    ws: Workspace, *, states: Iterable[str] | None = None, filt: QueueFilter | None = None
) -> list[QueueItem]:
    """The review queue, grouped by task; ``states`` filters (e.g. ``{"pending"}``), ``filt`` narrows
    further. Episodes not yet diagnosed are diagnosed first, so every item carries its signature. The
    audit's probes are left out unless ``filt.include_probes``."""
    wanted = set(states) if states is not None else None
    filt = filt or QueueFilter()
    with session(ws.engine) as s:
        rows = dq.queue_rows(s)
    missing = [r.episode_id for r in rows if r.code is None]
    if missing:
        from .diagnoser import diagnose_episodes

        diagnose_episodes(ws, missing)
        with session(ws.engine) as s:
            rows = dq.queue_rows(s)
    items = []
    for r in rows:
        state = "tagged" if r.tags else "skipped" if r.skipped else "pending"
        if wanted is not None and state not in wanted:
            continue
        try:
            checks = tuple(sorted({c["name"] for c in json.loads(r.checks_json or "[]")}))
        except (ValueError, KeyError, TypeError):
            checks = ()
        item = QueueItem(
            episode_id=r.episode_id,
            task=r.task,
            version_hash=r.version_hash,
            agent=r.agent,
            attempt=r.attempt,
            outcome=r.outcome,
            reward=r.reward,
            state=state,
            tags=[t for _, t in r.tags],
            tag_ids=[tid for tid, _ in r.tags],
            suggestion=r.tag or suggested_tag(r.outcome),
            failing_tests=checks,
            agent_cast=r.agent_cast,
            verifier_cast=r.verifier_cast,
            batch_id=r.batch_id,
            probe=is_probe(r.agent, r.batch_id),
            diagnosis=r.code or "",
            confidence=r.confidence or 0.0,
            summary=r.summary or "",
            signature=r.signature or "",
            attribution=attribution_line(r.evidence_json),
            attribution_facts=attribution_facts(r.evidence_json),
        )
        if filt.admits(item):
            items.append(item)
    return items


def similar(items: list[QueueItem], item: QueueItem) -> list[QueueItem]:
    """Episodes that failed the same way: the same failure signature (task version, outcome, failing
    checks — or diagnosis and last error line when no check was named). The usual bulk selection."""

    def key(i: QueueItem) -> tuple[Any, ...]:
        if i.signature:
            return (i.signature,)
        return (i.version_hash, i.outcome, i.failing_tests)

    k = key(item)
    return [i for i in items if key(i) == k]


def load_candidates(ws: Workspace, episode_ids: Iterable[int]) -> list[Candidate]:
    """The episodes as the tag-choice model sees them, in the order given; one that does not exist raises
    ``TagError``."""
    ids = list(dict.fromkeys(episode_ids))
    with session(ws.engine) as s:
        diag = dq.diagnoses_for(s, ids)
        out = []
        for eid in ids:
            ep = queries.get_episode(s, eid)
            if ep is None:
                raise TagError(f"episode {eid} does not exist")
            code, tag, confidence, summary, _ = diag.get(eid, ("", "", 0.0, "", ""))
            out.append(
                Candidate(
                    eid,
                    ep.outcome or "",
                    ep.reward,
                    tag or suggested_tag(ep.outcome or ""),
                    code or "",
                    confidence or 0.0,
                    summary or "",
                )
            )
    return out


def plan_for(ws: Workspace, episode_ids: Iterable[int]) -> TagPlan:
    """The tag dialog's model for these episodes (engine/review/tag_choice.py)."""
    return plan(load_candidates(ws, episode_ids))


@dataclass
class _Op:
    kind: str  # tagged | cleared | restored | state
    tag_ids: list[int] = field(default_factory=list)
    states: list[tuple[int, str | None]] = field(default_factory=list)  # (episode, previous state)
    label: str = ""


class Tagger:
    """Applies tagging actions for one curator and remembers them for undo (in memory: undo is for the
    slip of a key in this session, while the tags themselves carry author and time for good)."""

    def __init__(self, ws: Workspace, *, taxonomy: Taxonomy | None = None, author: str | None = None) -> None:
        self.ws = ws
        self.taxonomy = taxonomy if taxonomy is not None else load_taxonomy(ws.root)
        self.author = author or current_author()
        self._undo: list[_Op] = []
        #: How many tags the last ``tag`` call added (the rest already carried the code).
        self.last_added = 0

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    def validate(self, code: str) -> tuple[str, str]:
        try:
            return self.taxonomy.parse(code)
        except TaxonomyError as e:
            raise TagError(str(e)) from None

    def tag(self, episode_ids: int | Iterable[int], code: str, *, note: str = "") -> list[FailureTag]:
        """Tags one or many episodes with ``class.subclass`` as one undoable step.

        Idempotent per episode and code: an episode that already carries ``code`` (uncleared) keeps its
        tag and gets no second one — counts, clusters and the agreement report would otherwise count it
        twice. Returns each episode's tag with that code, new or existing; ``last_added`` says how many
        are new (0: nothing changed, and nothing was added to the undo stack). Refuses (``TagError``, every
        episode untouched) a failure class on a passed episode and the valid failure on a forged or voided
        reward (``tag_choice.refusal``)."""
        ids = [episode_ids] if isinstance(episode_ids, int) else list(dict.fromkeys(episode_ids))
        if not ids:
            raise TagError("no episodes selected")
        tag_class, subclass = self.validate(code)
        blocking = self.taxonomy.is_blocking(tag_class)
        refused = [
            f"episode {c.episode_id} {why}"
            if why.startswith("passed")
            else f"episode {c.episode_id} is {why}"
            for c in load_candidates(self.ws, ids)
            if (why := refusal(code, c))
        ]
        if refused:
            more = f" (and {len(refused) - 3} more)" if len(refused) > 3 else ""
            raise TagError("; ".join(refused[:3]) + more)
        made: list[FailureTag] = []
        out: list[FailureTag] = []
        with session(self.ws.engine) as s:
            for eid in ids:
                have = [
                    t
                    for t in queries.tags_for_episode(s, eid)
                    if (t.tag_class, t.subclass) == (tag_class, subclass)
                ]
                if have:
                    out.append(have[0])
                    continue
                tag = queries.add_tag(
                    s, eid, tag_class, subclass, blocking=blocking, note=note.strip(), author=self.author
                )
                made.append(tag)
                out.append(tag)
        self.last_added = len(made)
        if made:
            n = len(made)
            self._undo.append(
                _Op("tagged", [pk(t) for t in made], label=f"{code} on {n} episode{'s' * (n != 1)}")
            )
        return out

    def clear(self, tag_id: int) -> FailureTag:
        """Clears a tag (kept as history); a cleared blocking tag readmits its task to export."""
        with session(self.ws.engine) as s:
            tag = queries.get_tag(s, tag_id)
            if tag is None:
                raise TagError(f"tag {tag_id} does not exist")
            if tag.cleared:
                raise TagError(f"tag {tag_id} is already cleared")
            queries.clear_tag(s, tag_id)
        self._undo.append(_Op("cleared", [tag_id], label=f"clear {tag.tag_class}.{tag.subclass}"))
        return tag

    def _set_states(self, episode_ids: Iterable[int], state: str | None, label: str) -> None:
        prev: list[tuple[int, str | None]] = []
        with session(self.ws.engine) as s:
            for eid in episode_ids:
                prev.append((eid, queries.review_state(s, eid)))
                queries.set_review_state(s, eid, state, author=self.author)
        self._undo.append(_Op("state", states=prev, label=label))

    def skip(self, episode_ids: int | Iterable[int]) -> None:
        ids = [episode_ids] if isinstance(episode_ids, int) else list(episode_ids)
        self._set_states(ids, "skipped", f"skip {len(ids)}")

    def unskip(self, episode_ids: int | Iterable[int]) -> None:
        ids = [episode_ids] if isinstance(episode_ids, int) else list(episode_ids)
        self._set_states(ids, None, f"unskip {len(ids)}")

    def undo(self) -> str | None:
        """Reverses the last action; returns what was undone, or None when there is nothing to undo."""
        if not self._undo:
            return None
        op = self._undo.pop()
        with session(self.ws.engine) as s:
            if op.kind == "tagged":
                for tid in op.tag_ids:
                    queries.delete_tag(s, tid)  # a tag undone right away was a slip: no history kept
            elif op.kind == "cleared":
                for tid in op.tag_ids:
                    queries.clear_tag(s, tid, cleared=False)
            else:
                for eid, state in op.states:
                    queries.set_review_state(s, eid, state, author=self.author)
        return op.label
