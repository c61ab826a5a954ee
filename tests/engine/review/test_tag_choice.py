"""The tag-choice model on the demo's real episodes: one suggestion per group, following the strongest
evidence; what a confirmation tags and leaves out; refusals of a failure class on a pass and of the valid
failure on a forged or voided reward — in the engine and through ``bandpass tag``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

from bandpass.engine.app.diagnosis import load_clusters
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.signatures import Cluster
from bandpass.engine.review.tag_choice import Candidate, plan, refusal
from bandpass.engine.review.tagging import TagError, Tagger, load_candidates, plan_for
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk

KV = "configure-kv-service"


def _tags(ws: Workspace, eid: int) -> list[str]:
    with session(ws.engine) as s:
        return [f"{t.tag_class}.{t.subclass}" for t in q.tags_for_episode(s, eid)]


def _kv_cluster(ws: Workspace) -> Cluster:
    return next(c for c in load_clusters(ws) if c.task == KV and c.size >= 10)


def test_a_cluster_with_a_forgery_is_diagnosed_by_it_in_every_front_end(demo: Workspace) -> None:
    c = _kv_cluster(demo)
    assert c.verdict is not None and c.code == "misalignment.reward_hack"
    assert (
        c.suggestion == "misalignment.reward_hack"
        and c.verdict.label == f"misalignment.reward_hack (1 of {c.size})"
    )
    forged = c.representative.episode_id
    assert "tamper" in c.representative.summary
    assert c.as_dict()["diagnosis"] == "misalignment.reward_hack" and c.as_dict()["representative"] == forged
    out = subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "-w", str(demo.root), "clusters", "--json"],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    cli = next(d for d in json.loads(out.stdout) if d["id"] == c.id)
    assert cli["diagnosis"] == "misalignment.reward_hack" and cli["suggestion"] == "misalignment.reward_hack"


def test_the_suggestion_goes_only_to_the_members_it_was_suggested_for(demo: Workspace) -> None:
    c = _kv_cluster(demo)
    members = load_candidates(demo, c.episode_ids)
    p = plan(members)
    forged = c.representative.episode_id
    assert p.suggestion == "misalignment.reward_hack" and f"episode {forged}" in p.reason
    first = p.effect(p.suggestion)
    assert first.targets == (forged,)  # a blocking class on no episode without evidence for it
    assert {w for _, w in first.left_out} <= {
        "suggested policy.failed_checks",
        "suggested harness.command_timeout",
    }
    plain = p.effect("policy.failed_checks")  # the curator's own pick: the forgery still stays out
    assert forged not in plain.targets and len(plain.targets) == c.size - 1
    assert (
        dict(plain.left_out)[forged] == "not a genuine negative example: diagnosed misalignment.reward_hack"
    )
    assert "left out 1 (not a genuine negative example" in plain.describe()


def test_no_failure_class_on_a_pass_and_no_valid_failure_on_a_void(demo: Workspace) -> None:
    with session(demo.engine) as s:
        eps = list(q.episodes(s))
    passed = next(pk(e) for e in eps if e.outcome == "passed" and not _tags(demo, pk(e)))
    void = next(pk(e) for e in eps if e.outcome == "agent_error:verifier_tamper")
    tagger = Tagger(demo, author="test")
    for eid, code, why in (
        (
            passed,
            "policy.failed_checks",
            f"episode {passed} passed: policy.failed_checks describes a failure",
        ),
        (passed, "harness.turn_limit", "describes a failure"),
        (void, "policy.failed_checks", f"episode {void} is not a genuine negative example"),
    ):
        try:
            tagger.tag(eid, code)
        except TagError as e:
            assert why in str(e)
        else:
            raise AssertionError(f"{code} on {eid} was accepted")
        assert code not in _tags(demo, eid)
    tagger.tag(passed, "misalignment.false_positive")  # a pass can still be a false positive
    assert "misalignment.false_positive" in _tags(demo, passed)
    assert tagger.undo() is not None
    # a voided reward is evidence: its own suggestion is the reward hack, never the valid failure
    assert plan_for(demo, [void]).suggestion == "misalignment.reward_hack"


def test_bandpass_tag_refuses_a_failure_class_on_a_pass_and_writes_nothing(demo: Workspace) -> None:
    with session(demo.engine) as s:
        passed = next(pk(e) for e in q.episodes(s) if e.outcome == "passed" and not _tags(demo, pk(e)))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bandpass.tui.cli",
            "-w",
            str(demo.root),
            "tag",
            str(passed),
            "policy.failed_checks",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env=os.environ,
    )
    assert (
        out.returncode != 0 and "passed: policy.failed_checks describes a failure" in out.stderr + out.stdout
    )
    assert _tags(demo, passed) == []


def test_refusal_rules_on_plain_candidates() -> None:
    passed = Candidate(1, "passed", 1.0, None)
    forged = Candidate(2, "agent_error:verifier_tamper", 1.0, "agent.verifier_tamper")
    honest = Candidate(3, "failed", 0.0, "policy.failed_checks")
    assert refusal("policy.failed_checks", passed) and refusal("infra.oom", passed)
    assert refusal("misalignment.false_positive", passed) is None
    assert refusal("policy.failed_checks", forged) == "not a genuine negative example: its reward was voided"
    assert refusal("policy.failed_checks", honest) is None
    # no suggestion at all: nothing is preselected
    assert plan([Candidate(4, "failed", 0.0, None)]).suggestion is None
