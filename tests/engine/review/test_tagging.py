"""Failure tagging: taxonomy as data, validated tags, queue states, bulk, undo, blocking, and the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from bandpass.engine.core.taxonomy import TaxonomyError, load_taxonomy
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.tagging import (
    TagError,
    Tagger,
    current_author,
    failing_tests,
    load_queue,
    similar,
)
from bandpass.store import queries as q
from bandpass.store.db import session
from bandpass.store.models import pk
from tests.support.narrow import present
from tests.support.replay_data import make_episode


def test_default_taxonomy_is_the_design_list() -> None:
    tax = load_taxonomy()
    assert list(tax.classes) == ["invalidity", "harness", "misalignment", "infra", "agent", "policy"]
    assert "invalidity.oracle_fails" in tax.names() and "infra.orchestrator_failure" in tax.names()
    assert (
        len(tax.classes["invalidity"].subclasses) == 14 and len(tax.classes["misalignment"].subclasses) == 7
    )
    assert tax.is_blocking("invalidity") and tax.is_blocking("misalignment")
    assert not tax.is_blocking("harness") and not tax.is_blocking("infra") and not tax.is_blocking("agent")
    assert not tax.is_blocking("policy") and "policy.failed_checks" in tax.names()  # the valid failure
    assert present(tax.class_at(2)).name == "harness" and tax.class_at(9) is None


def test_every_outcome_suggestion_is_in_the_taxonomy() -> None:
    from bandpass.engine.core.outcomes import SUGGESTED_TAG, SUGGESTED_TAG_BY_OUTCOME

    tax = load_taxonomy()
    for code in [*SUGGESTED_TAG.values(), *SUGGESTED_TAG_BY_OUTCOME.values()]:
        tax.parse(code)


def test_workspace_taxonomy_extends_the_default(tmp_path: Path) -> None:
    (tmp_path / "taxonomy.toml").write_text(
        '[classes.harness.subclasses]\nssh_hang = "the ssh session hung"\n'
        '[classes.policy]\ndescription = "the model itself"\n'
        '[classes.policy.subclasses]\ngave_up = "stopped early"\n'
        "[classes.invalidity]\nblocking = false\n"  # cannot switch the export gate off
    )
    tax = load_taxonomy(tmp_path)
    assert tax.parse("harness.ssh_hang") == ("harness", "ssh_hang")
    assert tax.parse("harness.turn_limit") == ("harness", "turn_limit")  # defaults kept
    assert list(tax.classes)[-1] == "policy" and present(tax.class_at(6)).name == "policy"
    assert tax.is_blocking("invalidity")


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("[classes", "not valid TOML"),
        ('[classes."Bad Name"]\nsubclasses = ["x"]\n', "class name 'Bad Name'"),
        ("[classes.empty]\n", "has no subclasses"),
        ('[classes.harness]\nblocking = "yes"\n', "blocking true/false"),
        ('[classes.harness.subclasses]\n"With Space" = ""\n', "subclass 'With Space'"),
    ],
)
def test_broken_workspace_taxonomy_says_where(tmp_path: Path, content: str, message: str) -> None:
    (tmp_path / "taxonomy.toml").write_text(content)
    with pytest.raises(TaxonomyError, match=message) as e:
        load_taxonomy(tmp_path)
    assert "taxonomy.toml" in str(e.value)


def test_unknown_tags_list_the_valid_ones() -> None:
    tax = load_taxonomy()
    with pytest.raises(TaxonomyError) as e:
        tax.parse("harnes.turn_limit")
    assert "unknown tag class 'harnes'" in str(e.value) and "harness" in str(e.value)
    with pytest.raises(TaxonomyError) as e:
        tax.parse("harness.turnlimit")
    assert "unknown subclass 'turnlimit'" in str(e.value) and "harness.turn_limit" in str(e.value)
    with pytest.raises(TaxonomyError, match="has no subclass"):
        tax.parse("harness")


def test_failing_tests_from_pytest_output() -> None:
    out = (
        "tests/test_outputs.py::test_a PASSED\ntests/test_outputs.py::test_b FAILED\n"
        "FAILED tests/test_outputs.py::test_c - AssertionError: x\nFAILED tests/test_outputs.py::test_b\n"
    )
    assert failing_tests(out) == ("tests/test_outputs.py::test_b", "tests/test_outputs.py::test_c")
    assert failing_tests("all good") == ()


def test_author_from_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("BANDPASS_AUTHOR", "ana")
    assert current_author() == "ana"
    monkeypatch.delenv("BANDPASS_AUTHOR")
    assert current_author()


def test_queue_states_tag_skip_clear_and_undo(workspace: Workspace) -> None:
    a = make_episode(workspace, task="t1")
    b = make_episode(workspace, task="t1", outcome="agent_error:turn_limit")
    make_episode(workspace, task="t1", outcome="passed")
    tagger = Tagger(workspace, author="ana")
    queue = load_queue(workspace)
    assert [(i.episode_id, i.state) for i in queue] == [(a, "pending"), (b, "pending")]
    assert queue[1].suggestion == "harness.turn_limit" and queue[0].suggestion == "policy.failed_checks"
    assert queue[0].failing_tests == ("tests/test_outputs.py::test_answer",)

    (tag,) = tagger.tag(a, "invalidity.tests_unstated_behavior", note="  asks for 42, tests want 43 ")
    assert (tag.author, tag.note, tag.blocking) == ("ana", "asks for 42, tests want 43", True)
    assert tag.created_at is not None
    tagger.skip(b)
    assert {i.episode_id: i.state for i in load_queue(workspace)} == {a: "tagged", b: "skipped"}
    assert [i.episode_id for i in load_queue(workspace, states={"pending"})] == []

    with session(workspace.engine) as s:
        (row,) = q.task_rows(s)
        assert row.blocking_tags == 1
    tagger.clear(pk(tag))
    with session(workspace.engine) as s:
        assert q.task_rows(s)[0].blocking_tags == 0  # cleared: the task may be exported again
        assert q.tags_for_episode(s, a, include_cleared=True)[0].cleared

    assert tagger.undo() == "clear invalidity.tests_unstated_behavior"
    with session(workspace.engine) as s:
        assert q.task_rows(s)[0].blocking_tags == 1
    assert tagger.undo() == "skip 1"
    assert tagger.undo() == "invalidity.tests_unstated_behavior on 1 episode"
    assert {i.episode_id: i.state for i in load_queue(workspace)} == {a: "pending", b: "pending"}
    with session(workspace.engine) as s:
        assert q.tags_for_episode(s, a, include_cleared=True) == []
    assert tagger.undo() is None


def test_skip_persists_across_sessions(workspace: Workspace) -> None:
    a = make_episode(workspace)
    Tagger(workspace).skip(a)
    assert load_queue(Workspace.open(workspace.root))[0].state == "skipped"
    Tagger(workspace).unskip(a)
    assert load_queue(workspace)[0].state == "pending"


def test_bulk_tag_of_similar_episodes_is_one_undo(workspace: Workspace) -> None:
    same = [make_episode(workspace, task="t1", test="test_x") for _ in range(3)]
    other_test = make_episode(workspace, task="t1", test="test_y")
    other_task = make_episode(workspace, task="t2", test="test_x")
    queue = load_queue(workspace)
    first = next(i for i in queue if i.episode_id == same[0])
    group = [i.episode_id for i in similar(queue, first)]
    assert group == same and other_test not in group and other_task not in group

    tagger = Tagger(workspace, author="ana")
    tags = tagger.tag(group, "misalignment.miscalibrated_tolerance")
    assert len(tags) == 3 and all(t.blocking and t.author == "ana" for t in tags)
    assert {i.episode_id for i in load_queue(workspace, states={"tagged"})} == set(same)
    assert tagger.undo() == "misalignment.miscalibrated_tolerance on 3 episodes"
    assert load_queue(workspace, states={"tagged"}) == []


def test_invalid_tags_write_nothing(workspace: Workspace) -> None:
    a = make_episode(workspace)
    tagger = Tagger(workspace)
    with pytest.raises(TagError, match="valid classes"):
        tagger.tag(a, "bogus.x")
    with pytest.raises(TagError, match="episode 999 does not exist"):
        tagger.tag([a, 999], "harness.turn_limit")
    with pytest.raises(TagError, match="no episodes selected"):
        tagger.tag([], "harness.turn_limit")
    with session(workspace.engine) as s:
        assert q.tags_for_episode(s, a) == []  # the failed bulk rolled back as a whole
    assert not tagger.can_undo


def test_workspace_class_declared_blocking_blocks(workspace: Workspace) -> None:
    (workspace.root / "taxonomy.toml").write_text(
        '[classes.policy]\nblocking = true\n[classes.policy.subclasses]\nsandbagging = ""\n'
    )
    a = make_episode(workspace)
    (tag,) = Tagger(workspace).tag(a, "policy.sandbagging")
    assert tag.blocking
    with session(workspace.engine) as s:
        assert q.task_rows(s)[0].blocking_tags == 1


# --- CLI ------------------------------------------------------------------------------------------------


def bp(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(ws), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BANDPASS_AUTHOR": "cli-user"},
    )


@pytest.mark.slow
def test_cli_tag_untag_tags_queue(workspace: Workspace) -> None:
    a = make_episode(workspace, task="t1")
    b = make_episode(workspace, task="t1", outcome="agent_error:turn_limit")
    root = workspace.root

    queue = json.loads(bp(root, "queue", "--json").stdout)
    assert [(i["episode_id"], i["state"], i["suggestion"]) for i in queue] == [
        (a, "pending", "policy.failed_checks"),  # a plain failed check: the valid failure
        (b, "pending", "harness.turn_limit"),
    ]
    res = bp(root, "tag", str(a), "invalidity.oracle_fails", "--note", "solve.sh exits 1")
    assert res.returncode == 0 and "blocks export" in res.stdout and "cli-user" in res.stdout

    res = bp(root, "tag", str(b), "harness.turnlimit")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.count("\n") == 1 and "valid: harness.turn_limit" in res.stderr
    res = bp(root, "tag", "999", "harness.turn_limit")
    assert res.returncode == 1 and "episode 999 does not exist" in res.stderr

    (tag,) = json.loads(bp(root, "tags", "--json").stdout)
    assert (tag["episode_id"], tag["tag"], tag["author"], tag["blocking"], tag["note"]) == (
        a,
        "invalidity.oracle_fails",
        "cli-user",
        True,
        "solve.sh exits 1",
    )
    assert "invalidity.oracle_fails" in bp(root, "tags").stdout
    assert "1 pending, 1 tagged, 0 skipped" in bp(root, "queue").stdout

    res = bp(root, "untag", str(tag["id"]))
    assert res.returncode == 0 and "cleared tag" in res.stdout
    assert json.loads(bp(root, "tags", "--json").stdout) == []
    assert json.loads(bp(root, "tags", "--json", "--all").stdout)[0]["cleared"] is True
    res = bp(root, "untag", str(tag["id"]))
    assert res.returncode == 1 and "already cleared" in res.stderr
    res = bp(root, "queue", "--state", "bogus")
    assert res.returncode == 1 and "--state must be one of" in res.stderr
