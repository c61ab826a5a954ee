"""``bandpass report review``: agreement of reviews and of the stored diagnosis with curator tags.

Figures are checked against hand-computed values on a real SQLite workspace whose rows are written the
way the reviewer and the tagger write them.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from sqlalchemy import text

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.agreement import agreement, cohens_kappa
from bandpass.engine.review.review_report import review_report
from bandpass.engine.review.tagging import Tagger
from bandpass.store.db import session
from bandpass.store.queries import reviews as rq
from tests.support.narrow import present
from tests.support.paths import REPO
from tests.support.replay_data import make_episode


def test_kappa_and_per_class_figures_by_hand() -> None:
    # curators a,a,b,b; suggester a,a,b,a: p_o = 3/4, p_e = (2*3 + 2*1)/16 = 1/2, kappa = 1/2
    assert cohens_kappa([("a", "a"), ("a", "a"), ("b", "b"), ("b", "a")]) == pytest.approx(0.5)
    assert cohens_kappa([("a", "a"), ("a", "a")]) is None  # chance agreement is total: undefined
    assert cohens_kappa([]) is None
    ag = agreement(
        [
            ("harness.turn_limit", "harness.turn_limit"),
            ("harness.turn_limit", "harness.parse_error"),
            ("invalidity.oracle_fails", "none"),
            ("invalidity.oracle_fails", "invalidity.oracle_fails"),
        ]
    )
    assert ag.n == 4 and ag.class_agreement == 0.75 and ag.subclass_agreement == 0.5
    per = {c.label: c for c in ag.per_class}
    assert set(per) == {"harness", "invalidity"}
    assert (per["harness"].precision, per["harness"].recall) == (1.0, 1.0)
    assert (per["invalidity"].precision, per["invalidity"].recall) == (1.0, 0.5)
    # class labels: curators h,h,i,i; suggester h,h,none,i -> p_o 3/4, p_e (2*2 + 2*1)/16 = 3/8
    assert ag.kappa_class == pytest.approx((0.75 - 0.375) / (1 - 0.375))


def _review(ws: Workspace, eid: int, code: str, *, model: str = "claude-haiku-4-5", **kw: object) -> int:
    cls, _, sub = code.partition(".")
    with session(ws.engine) as s:
        row = rq.add_review(
            s,
            episode_id=eid,
            model=model,
            prompt_version="v1",
            status=kw.pop("status", "ok"),
            verdict="true_fail",
            tag_class=cls if code != "none" else "",
            subclass=sub,
            citations_json=json.dumps([{"source": "verifier", "quote": "x"}]),
            dropped_json=json.dumps(kw.pop("dropped", [])),
            cost_usd=kw.pop("cost_usd", 0.02),
            **kw,
        )
        return row.id  # type: ignore[return-value]


def _build(ws: Workspace) -> list[int]:
    eps = [make_episode(ws, task=f"t{i}", with_casts=False) for i in range(5)]
    tagger = Tagger(ws, author="cur")
    tagger.tag(eps[0], "harness.turn_limit")
    tagger.tag(eps[1], "harness.turn_limit")
    tagger.tag(eps[2], "invalidity.oracle_fails")
    tagger.tag(eps[3], "invalidity.oracle_fails")
    old = tagger.tag(eps[3], "harness.parse_error")[0]  # the latest active tag is the label...
    tagger.clear(old.id)  # type: ignore[arg-type]  # ...unless cleared
    _review(ws, eps[0], "harness.parse_error")  # superseded by the next review of the same episode
    _review(ws, eps[0], "harness.turn_limit")
    _review(ws, eps[1], "harness.parse_error", dropped=[{"what": "citation", "reason": "r"}])
    _review(ws, eps[2], "none", dropped=[{"what": "code", "reason": "unknown class"}])
    _review(ws, eps[3], "invalidity.oracle_fails", cost_usd=None)
    _review(ws, eps[4], "harness.turn_limit")  # no curator tag: reviewed, but not in agreement
    _review(ws, eps[4], "", status="refused")
    return eps


def test_report_figures_and_undiagnosed_episodes(workspace: Workspace) -> None:
    _build(workspace)
    rep = review_report(workspace)
    assert rep.curated_episodes == 4
    (fig,) = rep.reviewers
    a = fig.agreement
    assert a is not None and a.n == 4
    assert (a.class_agreement, a.subclass_agreement) == (0.75, 0.5)
    assert fig.reviews == 7 and fig.reviewed_episodes == 5
    assert fig.by_status == {"ok": 6, "refused": 1}
    assert fig.cost_unknown_reviews == 1
    assert fig.cost_usd == pytest.approx(0.02 * 6)
    assert fig.cost_per_episode == pytest.approx(0.02 * 6 / 5)
    assert (fig.dropped_citations, fig.dropped_codes) == (1, 1)
    # nothing diagnosed these hand-made episodes: the diagnosis row is there, with no episode to compare
    assert rep.diagnosis is not None and rep.diagnosis.agreement.n == 0  # type: ignore[union-attr]


def test_report_reads_a_stored_diagnosis_table_when_present(workspace: Workspace) -> None:
    eps = _build(workspace)
    with session(workspace.engine) as s:
        for eid, code in zip(
            eps, ["harness.turn_limit", "harness.turn_limit", "harness.output_cap", ""], strict=False
        ):
            s.connection().execute(
                text(
                    "INSERT INTO diagnosis (episode_id, code, tag, confidence, summary, evidence_json,"
                    " checks_json, signature, rules_version, created_at)"
                    " VALUES (:e, :c, :t, 0.9, '', '[]', '[]', '', 1, '2026-01-01 00:00:00')"
                ),
                {"e": eid, "c": code or "policy.failed_checks", "t": code},  # "" as the diagnoser stores it
            )
    rep = review_report(workspace)
    assert rep.diagnosis is not None and rep.diagnosis.agreement is not None
    a = rep.diagnosis.agreement
    # pairs (tl,tl) (tl,tl) (oracle_fails,output_cap) (oracle_fails, no suggestion): all four counted
    assert a.n == 4 and a.class_agreement == 0.5 and a.subclass_agreement == 0.5
    assert a.no_suggestion == 1 and rep.diagnosis.no_suggestion_codes == {"policy.failed_checks": 1}
    assert a.class_agreement_suggested == pytest.approx(2 / 3)
    assert rep.reviewers[0].agreement.no_suggestion == 1  # type: ignore[union-attr]  # the review said none


def test_a_diagnosis_with_no_suggested_tag_is_counted_not_dropped(workspace: Workspace) -> None:
    """Real stored rows: a failure with no failing check is ``unknown.no_evidence``, which suggests no tag;
    the report counts that episode (a disagreement with the curator's tag), says so apart, and names
    undiagnosed ones. A plain failed check is ``policy.failed_checks``, the valid failure: a suggestion."""
    from bandpass.engine.review.diagnoser import diagnose_episodes
    from bandpass.store import queries as q

    plain = make_episode(workspace, task="a", test="test_x", with_casts=False)
    loop = make_episode(workspace, task="b", outcome="agent_error:turn_limit", with_casts=False)
    silent = make_episode(workspace, task="d", with_casts=False)
    with session(workspace.engine) as s:  # a verifier that names no check
        ep = present(q.get_episode(s, silent))
        ep.verifier_output = "nothing to report\n"
        s.add(ep)
        s.commit()
    diagnose_episodes(workspace, [plain, loop, silent])
    later = make_episode(workspace, task="c", with_casts=False)  # tagged, never diagnosed
    tagger = Tagger(workspace, author="cur")
    tagger.tag(plain, "misalignment.flaky_verifier")
    tagger.tag(loop, "harness.turn_limit")
    tagger.tag(silent, "harness.turn_limit")
    tagger.tag(later, "harness.turn_limit")
    fig = review_report(workspace).diagnosis
    assert fig is not None and fig.agreement is not None
    a = fig.agreement.as_dict()
    assert (a["n"], a["no_suggestion"]) == (3, 1)
    assert a["subclass_agreement"] == 0.3333 and a["subclass_agreement_suggested"] == 0.5  # rounded in JSON
    assert fig.no_suggestion_codes == {"unknown.no_evidence": 1} and fig.curated_not_diagnosed == 1
    from rich.console import Console

    from bandpass.engine.review.review_report import render_review_report

    con = Console(width=200, record=True)
    con.print(render_review_report(review_report(workspace)))
    out = con.export_text()
    assert "1 of 3 curated episodes got no suggestion (unknown.no_evidence 1)" in out
    assert "(no suggestion)" in out and "1 curated episode not diagnosed yet" in out


def test_the_valid_failure_agrees_like_any_code(workspace: Workspace) -> None:
    """A plain failed check: the diagnosis suggests the taxonomy's valid failure ``policy.failed_checks``,
    the curator confirms it, and the report counts an agreement (it used to be a silent diagnosis)."""
    from bandpass.engine.review.diagnoser import diagnose_episodes

    plain = make_episode(workspace, task="a", test="test_x", with_casts=False)
    diagnose_episodes(workspace, [plain])
    Tagger(workspace, author="cur").tag(plain, "policy.failed_checks")
    fig = review_report(workspace).diagnosis
    assert fig is not None and fig.agreement is not None
    a = fig.agreement.as_dict()
    assert (a["n"], a["no_suggestion"], a["subclass_agreement"]) == (1, 0, 1.0)


def test_independent_leaves_out_tags_written_by_accepting(workspace: Workspace) -> None:
    from bandpass.engine.review.reviewer import accept_review

    eid = make_episode(workspace, with_casts=False)
    rid = _review(workspace, eid, "harness.turn_limit")
    accept_review(workspace, rid, tagger=Tagger(workspace, author="cur"))
    assert review_report(workspace).reviewers[0].agreement.n == 1  # type: ignore[union-attr]
    assert review_report(workspace, independent=True).reviewers[0].agreement.n == 0  # type: ignore[union-attr]


def test_report_review_cli_json_and_table(workspace: Workspace) -> None:
    _build(workspace)
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    base = [sys.executable, "-m", "bandpass.tui.cli", "-w", str(workspace.root), "report", "review"]
    proc = subprocess.run([*base, "--json"], capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    data = json.loads(proc.stdout)
    (r,) = data["reviewers"]
    assert r["agreement"]["class_agreement"] == 0.75 and r["cost_per_reviewed_episode"] == pytest.approx(
        0.024
    )
    assert data["diagnosis"]["agreement"]["n"] == 0  # nothing diagnosed these hand-made episodes
    proc = subprocess.run(base, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert "claude-haiku-4-5 / v1" in proc.stdout and "75%" in proc.stdout
    assert "deterministic diagnosis" in proc.stdout
    assert "cost unknown for 1 review" in proc.stdout
