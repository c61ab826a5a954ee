"""Failure tagging: the review queue, validated (bulk) tags, skip, clear, and undo.

Why it lives in the engine and not in a screen: the TUI's queue, ``bandpass tag`` and the tests must
apply the same rules (the taxonomy validates every tag, blocking follows the class, author and time are
always recorded), and undo must reverse exactly what was done, including a bulk tag of forty episodes,
as one step.

An outcome code's suggestion (``engine.review.outcomes.suggested_tag``) is only ever *offered*: nothing here
writes a tag without a caller naming it, because a wrong automatic tag silently keeps tasks in or out of
an export.
"""

from __future__ import annotations

import getpass
import os
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from engine.core.workspace import Workspace
from engine.review.outcomes import suggested_tag
from engine.review.taxonomy import Taxonomy, TaxonomyError, load_taxonomy
from engine.sandbox.attribution import summary as attribution_line
from store import queries
from store.db import session
from store.models import FailureTag

_PYTEST_FAILED = (
    re.compile(r"^FAILED\s+(\S+::\S+?)(?:\s+-\s.*)?$"),  # short test summary
    re.compile(r"^(\S+::\S+)\s+FAILED\b"),  # -v progress lines
)


class TagError(ValueError):
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
    """Tests a pytest run reports as failed, sorted: the key for "every episode of this task that fails
    on the same test", the commonest bulk-tagging selection."""
    found: set[str] = set()
    for line in verifier_output.splitlines():
        line = line.strip()
        for pat in _PYTEST_FAILED:
            m = pat.match(line)
            if m:
                found.add(m.group(1))
                break
    return tuple(sorted(found))


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
    suggestion: str | None
    failing_tests: tuple[str, ...]
    agent_cast: str = ""
    verifier_cast: str = ""
    attribution: str = ""  # who ended the sandbox, one line (engine/sandbox/attribution.py); "" if nobody

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["failing_tests"] = list(self.failing_tests)
        return d


def load_queue(ws: Workspace, *, states: Iterable[str] | None = None) -> list[QueueItem]:
    """The review queue, grouped by task; ``states`` filters (e.g. ``{"pending"}``)."""
    wanted = set(states) if states is not None else None
    with session(ws.engine) as s:
        rows = queries.review_rows(s)
    items = []
    for r in rows:
        if wanted is not None and r.state not in wanted:
            continue
        ep = r.episode
        items.append(
            QueueItem(
                episode_id=ep.id,  # type: ignore[arg-type]
                task=r.task,
                version_hash=r.version_hash,
                agent=ep.agent,
                attempt=ep.attempt,
                outcome=ep.outcome,
                reward=ep.reward,
                state=r.state,
                tags=[f"{t.tag_class}.{t.subclass}" for t in r.tags],
                tag_ids=[t.id for t in r.tags],  # type: ignore[misc]
                suggestion=suggested_tag(ep.outcome),
                failing_tests=failing_tests(ep.verifier_output),
                agent_cast=ep.agent_cast,
                verifier_cast=ep.verifier_cast,
                attribution=attribution_line(ep.evidence_json),
            )
        )
    return items


def similar(items: list[QueueItem], item: QueueItem) -> list[QueueItem]:
    """Episodes of the same task version that failed the same way: the same failing tests when the
    verifier named any, else the same outcome. The usual bulk selection ("this task always fails on
    test_x": one tag for all of them)."""

    def key(i: QueueItem) -> tuple[Any, ...]:
        return (i.version_hash, i.failing_tests) if i.failing_tests else (i.version_hash, i.outcome)

    k = key(item)
    return [i for i in items if key(i) == k]


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

    @property
    def can_undo(self) -> bool:
        return bool(self._undo)

    def validate(self, code: str) -> tuple[str, str]:
        try:
            return self.taxonomy.parse(code)
        except TaxonomyError as e:
            raise TagError(str(e)) from None

    def tag(self, episode_ids: int | Iterable[int], code: str, *, note: str = "") -> list[FailureTag]:
        """Tags one or many episodes with ``class.subclass`` as one undoable step."""
        ids = [episode_ids] if isinstance(episode_ids, int) else list(dict.fromkeys(episode_ids))
        if not ids:
            raise TagError("no episodes selected")
        tag_class, subclass = self.validate(code)
        blocking = self.taxonomy.is_blocking(tag_class)
        made: list[FailureTag] = []
        with session(self.ws.engine) as s:
            for eid in ids:
                if queries.get_episode(s, eid) is None:
                    raise TagError(f"episode {eid} does not exist")
                tag = queries.add_tag(
                    s, eid, tag_class, subclass, blocking=blocking, note=note.strip(), author=self.author
                )
                made.append(tag)
        n = len(ids)
        self._undo.append(
            _Op("tagged", [t.id for t in made], label=f"{code} on {n} episode{'s' * (n != 1)}")  # type: ignore[misc]
        )
        return made

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
