"""Failure signatures and the clusters they make.

A failure signature is what two episodes must share to have failed *the same way*: the task version, the
outcome code, and the normalised failing checks — or, when the verifier named none, the diagnosis code
and the normalised last error line. Bulk tagging ("this task always fails on test_x") selects by it, so
a cluster never mixes episodes that failed on different checks (the mis-tag the old task + outcome key
made when the failing-tests column was empty).

A cluster's **id** is a short hash of its signature (:func:`cluster_id`): the one name for a cluster in
``bandpass clusters``, the tag queue's cluster view and filter (``bandpass queue --cluster``) and the
reviewer (``bandpass review --cluster``, ``bandpass reviews --clusters``); each also takes the full
signature (:func:`matches`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from .tag_choice import Candidate, ClusterVerdict, cluster_verdict, strongest

_HEX = re.compile(r"\b(?:0x[0-9a-f]+|[0-9a-f]{8,})\b", re.IGNORECASE)
_NUM = re.compile(r"\d+(?:\.\d+)?")
_TMP = re.compile(r"/tmp/[\w.-]+")
_TRY = re.compile(r"^try \d+:\s*")


def normalise_line(line: str) -> str:
    """A last error line without what differs run to run: numbers, hex ids, temp paths, the try."""
    s = _TRY.sub("", line.strip())
    s = _TMP.sub("/tmp/…", s)
    s = _HEX.sub("H", s)
    s = _NUM.sub("N", s)
    return " ".join(s.split())[:200]


def signature(version_hash: str, outcome: str, checks: Iterable[str], code: str, last_error: str) -> str:
    names = sorted(set(checks))
    detail = "checks:" + ",".join(names) if names else f"{code}|{normalise_line(last_error)}"
    return f"{version_hash[:12]}|{outcome}|{detail}"


def cluster_id(sig: str) -> str:
    """The cluster's short id (10 hex digits of the signature's sha1)."""
    return hashlib.sha1(sig.encode()).hexdigest()[:10]


def matches(sig: str, key: str) -> bool:
    """Whether ``key`` (a cluster id or a full signature) names the cluster of ``sig``."""
    return bool(sig) and (key == sig or key == cluster_id(sig))


def checks_of(sig: str) -> tuple[str, ...]:
    """The failing checks a signature was keyed on (none when it fell back on the diagnosis)."""
    detail = sig.split("|", 2)[2] if sig.count("|") >= 2 else ""
    return (
        tuple(n for n in detail.removeprefix("checks:").split(",") if n)
        if detail.startswith("checks:")
        else ()
    )


def describe(sig: str) -> str:
    """The signature without its version hash, for a column a curator reads."""
    return sig.split("|", 1)[1] if "|" in sig else sig


@dataclass
class ClusterMember:
    episode_id: int
    task: str
    agent: str
    batch_id: str
    outcome: str
    code: str
    confidence: float
    summary: str
    suggestion: str | None = None  # the diagnosis's tag, else the outcome code's (as the queue's)
    reward: float | None = None  # the verifier's

    @property
    def candidate(self) -> Candidate:
        return Candidate(
            self.episode_id,
            self.outcome,
            self.reward,
            self.suggestion,
            self.code,
            self.confidence,
            self.summary,
        )


@dataclass
class Cluster:
    signature: str
    task: str
    outcome: str
    code: str  # the strongest evidence's diagnosis code (tag_choice.cluster_verdict)
    members: list[ClusterMember] = field(default_factory=list)
    verdict: ClusterVerdict | None = None

    @property
    def id(self) -> str:
        return cluster_id(self.signature)

    @property
    def size(self) -> int:
        return len(self.members)

    @property
    def episode_ids(self) -> list[int]:
        return [m.episode_id for m in self.members]

    @property
    def failing(self) -> tuple[str, ...]:
        return checks_of(self.signature)

    @property
    def representative(self) -> ClusterMember:
        """The member with the strongest evidence (then the most confident, then the oldest): the one to
        replay first, whose diagnosis names the cluster."""
        top = strongest(m.candidate for m in self.members)
        return next(m for m in self.members if top is not None and m.episode_id == top.episode_id)

    @property
    def suggestion(self) -> str | None:
        return self.verdict.suggestion if self.verdict else None

    def as_dict(self, *, members: bool = True) -> dict[str, Any]:
        d: dict[str, Any] = {
            "id": self.id,
            "signature": self.signature,
            "size": self.size,
            "task": self.task,
            "outcome": self.outcome,
            "diagnosis": self.code,
            "suggestion": self.suggestion,
            "agreeing": self.verdict.agreeing if self.verdict else self.size,
            "representative": self.representative.episode_id,
            "summary": self.representative.summary,
            "failing_checks": list(self.failing),
        }
        if members:
            d["episodes"] = [m.episode_id for m in self.members]
        return d


def clusters(members: Iterable[tuple[str, ClusterMember]]) -> list[Cluster]:
    """Groups ``(signature, member)`` pairs; biggest cluster first (then task, signature)."""
    by: dict[str, Cluster] = {}
    for sig, m in members:
        c = by.get(sig)
        if c is None:
            c = by[sig] = Cluster(sig, m.task, m.outcome, m.code)
        c.members.append(m)
    for c in by.values():
        # the strongest evidence among the members names the cluster (a forgery among eleven plain
        # failures makes a reward_hack cluster, never a "genuine negative example"): one function for the
        # TUI, the CLI and the JSON
        c.verdict = cluster_verdict([m.candidate for m in c.members])
        c.code = c.verdict.diagnosis
    return sorted(by.values(), key=lambda c: (-c.size, c.task, c.signature))
