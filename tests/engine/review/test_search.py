"""Search over what the terminals showed, on the real recorded sample episodes (recordings/samples/).

The samples are real casts from real containers: ``policy-context-truncated`` prints 400 numbered lines in
one write (``line 200`` is on screen at no frame boundary and not at any step's end: only in what
scrolled away), and the ``fix-wordfreq`` verifiers print ``FAIL: blank.txt N=None`` where no agent
terminal ever shows it.
"""

from __future__ import annotations

import json
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from bandpass.engine.audit.samples import load_samples
from bandpass.engine.core.events import EpisodeFinished, EventBus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.replay import KeyframeIndex
from bandpass.engine.review.search import Filters, episode_hits, search
from bandpass.engine.review.search_index import BackgroundIndexer, build_index
from bandpass.engine.review.search_query import Matcher, QueryError, index_text, parse, tokens
from bandpass.engine.review.transcript import (
    INSIDE,
    TRANSCRIPT_VERSION,
    TYPED,
    frame_of,
    highlight_spans,
    screen_at,
    transcript,
)
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.tasks.importer import import_paths
from bandpass.store.db import session
from bandpass.store.queries import search as sq
from tests.support.narrow import present
from tests.support.paths import EXAMPLES, REPO

SAMPLES = REPO / "recordings" / "samples"
BANDPASS = [sys.executable, "-m", "bandpass.tui.cli"]
SCROLLED = "policy-context-truncated"


def _samples_workspace(root: Path) -> Workspace:
    ws = Workspace.open(root)
    assert import_paths(ws, [EXAMPLES]).ok
    assert load_samples(ws, SAMPLES) > 0
    return ws


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> Workspace:
    ws = _samples_workspace(tmp_path_factory.mktemp("search") / "ws")
    report = build_index(ws)
    assert report.indexed > 0 and report.remaining == 0
    return ws


def _episode_of(ws: Workspace, slug: str) -> int:
    with session(ws.engine) as s:
        rows = s.connection().exec_driver_sql("SELECT id, agent_cast FROM episode").fetchall()
    return next(int(eid) for eid, cast in rows if Path(cast).parent.name == slug)


def bp(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*BANDPASS, "--workspace", str(ws), *args], capture_output=True, text=True, timeout=300, cwd=REPO
    )


# --- the Done-when items -------------------------------------------------------------------------


def test_a_phrase_seen_only_in_scrollback_is_found_and_replay_lands_where_it_is_visible(
    indexed: Workspace,
) -> None:
    ws = indexed
    eid = _episode_of(ws, SCROLLED)
    cast = read_cast(ws.abs(f"recordings/samples/{SCROLLED}/agent.cast"))
    index = KeyframeIndex(cast)
    index.build()
    # The premise: at no frame of the recording (no event boundary, no step's end) is the line on screen.
    assert not any("line 200" in index.screen_at_index(k).text() for k in range(len(cast.events) + 1))

    result = search(ws, '"line 200"')
    assert [e.episode_id for e in result.episodes] == [eid]
    (hit,) = result.episodes[0].hits
    assert (hit.terminal, hit.step, hit.text, hit.line.kind) == ("agent", 0, "line 200", INSIDE)
    assert hit.before == ["line 199"] and hit.after == ["line 201"]

    # Replay's landing: the frame inside the write where the line is on screen, and the match marked.
    frame = frame_of(index, hit.line)
    assert frame is not None and 0 < frame.chars < len(cast.events[frame.event].data)
    shown = screen_at(index, frame)
    rows = shown.lines()
    assert "line 200" in rows
    spans = highlight_spans(shown, Matcher.of('"line 200"'))
    assert spans == [(rows.index("line 200"), 0, len("line 200"))]
    assert frame.time == pytest.approx(cast.events[frame.event].time)


def test_a_verifier_only_string_is_found_with_terminal_verifier(indexed: Workspace) -> None:
    ws = indexed
    query = '"FAIL: blank.txt N=None"'
    everywhere = search(ws, query)
    verifier = search(ws, query, filters=Filters(terminal="verifier"))
    agent = search(ws, query, filters=Filters(terminal="agent"))
    assert verifier.episodes and not agent.episodes
    assert {e.episode_id for e in verifier.episodes} == {e.episode_id for e in everywhere.episodes}
    assert all(h.terminal == "verifier" and h.step is None for e in verifier.episodes for h in e.hits)
    assert {e.task for e in verifier.episodes} == {"fix-wordfreq"}

    proc = bp(ws.root, "search", query, "--terminal", "verifier", "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert {e["episode"] for e in out["episodes"]} == {e.episode_id for e in verifier.episodes}
    assert all(h["line"].startswith("FAIL: blank.txt N=None") for e in out["episodes"] for h in e["hits"])
    none = bp(ws.root, "search", query, "--terminal", "agent")
    assert none.returncode == 1 and "no episode matches" in none.stdout


def _clone_episodes(ws: Workspace, times: int) -> int:
    """Multiplies the finished episodes (same recordings) so a build takes long enough to kill."""
    con = sqlite3.connect(ws.db_path)
    cols = [r[1] for r in con.execute("PRAGMA table_info(episode)") if r[1] != "id"]
    names = ", ".join(f'"{c}"' for c in cols)
    with con:
        for _ in range(times):
            con.execute(f"INSERT INTO episode ({names}) SELECT {names} FROM episode WHERE status = 'done'")
    n = con.execute("SELECT count(*) FROM episode WHERE status = 'done'").fetchone()[0]
    con.close()
    return int(n)


@pytest.mark.slow
def test_the_index_survives_a_crash_mid_build_and_resumes(tmp_path: Path) -> None:
    ws = _samples_workspace(tmp_path / "ws")
    total = _clone_episodes(ws, 5)  # 41 * 2**5 episodes
    proc = subprocess.Popen(
        [*BANDPASS, "--workspace", str(ws.root), "search"],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
        cwd=REPO,
    )
    assert proc.stderr is not None
    for line in proc.stderr:  # progress lines: "search index: DONE/TOTAL episodes" after each commit
        if line.startswith("search index: ") and not line.startswith("search index: 0/"):
            break
    proc.send_signal(signal.SIGKILL)  # a crash: no cleanup, wherever the build was
    proc.wait()

    con = sqlite3.connect(ws.db_path)
    assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    con.execute("INSERT INTO search_fts(search_fts) VALUES ('integrity-check')")  # raises if corrupt
    done = con.execute("SELECT count(*) FROM search_state").fetchone()[0]
    # Whole episodes only: every indexed episode has its documents, no document lacks its episode's state.
    orphans = con.execute(
        "SELECT count(*) FROM search_doc d LEFT JOIN search_state s ON s.episode_id = d.episode_id"
        " WHERE s.episode_id IS NULL"
    ).fetchone()[0]
    con.close()
    assert 0 < done < total, "the kill must land mid-build"
    assert orphans == 0

    resumed = bp(ws.root, "search")
    assert resumed.returncode == 0, resumed.stderr
    assert f"{total - done}/{total - done} episodes" in resumed.stderr  # only the rest was indexed
    with session(ws.engine) as s:
        status = sq.index_status(s, TRANSCRIPT_VERSION)
    assert status.indexed == status.episodes == total
    every = search(ws, '"line 200"', limit=1000)
    assert len(every.episodes) == 2**5  # the scrolled-away line, in every copy of its episode


# --- building -------------------------------------------------------------------------------------


def test_episodes_are_indexed_as_they_finish(tmp_path: Path) -> None:
    ws = _samples_workspace(tmp_path / "ws")
    bus = EventBus()
    indexer = BackgroundIndexer(ws, bus)
    try:
        eid = _episode_of(ws, SCROLLED)
        bus.publish(EpisodeFinished(episode_id=eid, outcome="agent_error:turn_limit"))
        assert indexer.wait_idle(60)
    finally:
        indexer.close()
    assert [e.episode_id for e in search(ws, '"line 200"').episodes] == [eid]
    with session(ws.engine) as s:
        # only what finished; the rest waits for first use
        assert sq.index_status(s, TRANSCRIPT_VERSION).indexed == 1


def test_a_retried_episode_is_indexed_again(tmp_path: Path) -> None:
    ws = _samples_workspace(tmp_path / "ws")
    build_index(ws)
    eid = _episode_of(ws, SCROLLED)
    with session(ws.engine) as s:
        assert sq.pending_episode_ids(s, TRANSCRIPT_VERSION) == []
        s.connection().exec_driver_sql(
            "UPDATE episode SET ended_at = '2030-01-01 00:00:00.000000' WHERE id = ?", (eid,)
        )
        assert sq.pending_episode_ids(s, TRANSCRIPT_VERSION) == [eid]
    assert build_index(ws).indexed == 1
    with session(ws.engine) as s:
        assert sq.pending_episode_ids(s, TRANSCRIPT_VERSION) == []


def test_a_missing_recording_is_a_note_and_the_rest_is_indexed(tmp_path: Path) -> None:
    ws = _samples_workspace(tmp_path / "ws")
    eid = _episode_of(ws, "step40-fix-wordfreq-02-give-up")
    with session(ws.engine) as s:
        query = "SELECT verifier_cast FROM episode WHERE id = ?"
        (cast,) = present(s.connection().exec_driver_sql(query, (eid,)).fetchone())
    ws.abs(cast).unlink()
    report = build_index(ws)
    assert any(n.startswith(f"episode {eid}: verifier recording missing") for n in report.notes)
    hits = episode_hits(ws, eid, '"blank.txt N=None"')  # from the stored verifier output instead
    assert hits and all(h.terminal == "verifier" and h.time is None for h in hits)


# --- what a transcript holds ---------------------------------------------------------------------


def test_transcript_keeps_each_line_once_per_step_in_screen_order_with_typed_keys() -> None:
    cast = read_cast(SAMPLES / "step10-configure-kv-service-04-repl" / "agent.cast")
    lines = transcript(cast)
    prompts = [li for li in lines if li.text == ">>>"]
    assert [li.step for li in prompts] == [0, 1, 2, 3]  # the stuck prompt, at every step it came back
    step3 = [li.text for li in lines if li.step == 3 and li.kind != TYPED]
    assert step3[:2] == [">>> ls -la /app", "Traceback (most recent call last):"]  # as the screen reads
    typed = [li.text for li in lines if li.kind == TYPED]
    assert typed == ["python3", "ls /app", "cat /app/README.md", "ls -la /app"]
    assert len({(li.step, li.kind, li.text) for li in lines}) == len(lines)


# --- the query language --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "fts"),
    [
        ("command not found", '("command" AND "not" AND "found")'),
        ('"command not found"', '"command not found"'),
        ("modul*", '"modul"*'),
        ('"No module nam"*', '"no module nam"*'),
        ("/app/kv.ini", '"app kv ini"'),
        ("a OR b NOT c", '("a" OR ("b" NOT "c"))'),
        ("(a OR b) c", '(("a" OR "b") AND "c")'),
        ("Café", '"cafe"'),
    ],
)
def test_queries_become_fts5_expressions(query: str, fts: str) -> None:
    assert Matcher.of(query).fts == fts


@pytest.mark.parametrize(
    ("query", "says"),
    [
        ('"abc', "unclosed quote at column 1"),
        ("(a", "'(' at column 1 is never closed"),
        ("a)", "unexpected ')' at column 2"),
        ("NOT x", "NOT needs a word or phrase before it"),
        ("x NOT", "at the end"),
        ("#", "'#' has no letters or digits"),
        ("", "the query is empty"),
    ],
)
def test_a_malformed_query_says_where(query: str, says: str) -> None:
    with pytest.raises(QueryError, match=None) as err:
        parse(query)
    assert says in str(err.value)


def test_symbol_words_are_searchable_and_never_forged() -> None:
    m = Matcher.of(">>>")
    assert m.matches(">>> ls /app") and not m.matches(">>>ls") and not m.matches("> > >")
    assert m.spans("x >>> y") == [(2, 5)]
    assert index_text(">>> ls") != ">>> ls" and ">>>" in index_text(">>> ls")
    forged = index_text(m.fts.strip('"') + " \ue000x3e3e3e")  # output cannot plant the token
    assert [t for t, _a, _b in tokens(forged) if t.startswith("\ue000")] == []
    assert Matcher.of("kv.ini").matches("cat /app/kv.ini") and not Matcher.of("kv.ini").matches("kv")
    assert Matcher.of("modul* NOT found").matches("ModuleNotFoundError x") is True
    assert Matcher.of('"no such" OR denied').spans("ls: no such file; denied") == [(4, 11), (18, 24)]


def test_cli_query_errors_exit_2_and_no_match_exits_1(indexed: Workspace) -> None:
    bad = bp(indexed.root, "search", '"unclosed', "--no-build")
    assert bad.returncode == 2 and "unclosed quote at column 1" in bad.stderr
    none = bp(indexed.root, "search", "zzzqqq", "--no-build")
    assert none.returncode == 1
    text = bp(indexed.root, "search", ">>>", "--no-build", "--hits", "1")
    assert text.returncode == 0 and "step 0" in text.stdout and "more (--hits" in text.stdout


def test_filters_narrow_by_task_agent_and_outcome(indexed: Workspace) -> None:
    ws = indexed
    all_kv = search(ws, "kv.ini", limit=100)
    failed = search(ws, "kv.ini", filters=Filters(outcome="failed"), limit=100)
    passed = search(ws, "kv.ini", filters=Filters(outcome="passed", agent="demo-step40"), limit=100)
    assert failed.episodes and passed.episodes
    assert {e.outcome for e in failed.episodes} == {"failed"}
    assert {(e.outcome, e.agent) for e in passed.episodes} == {("passed", "demo-step40")}
    assert {e.episode_id for e in failed.episodes} | {e.episode_id for e in passed.episodes} <= {
        e.episode_id for e in all_kv.episodes
    }
    assert not search(ws, "kv.ini", filters=Filters(task="fix-wordfreq")).episodes
    assert search(ws, "kv.ini", filters=Filters(model="demo-step40", agent="demo-step10")).episodes == []


def test_status_without_a_query(indexed: Workspace) -> None:
    out = bp(indexed.root, "search", "--json")
    assert out.returncode == 0, out.stderr
    status = json.loads(out.stdout)
    assert status["indexed"] == status["episodes"] > 0 and status["lines"] > 0


def test_too_common_a_query_lists_the_newest_first_and_says_so(
    indexed: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    import bandpass.engine.review.search as search_mod

    ranked = search(indexed, "root OR ls", limit=100)
    assert ranked.ranked_by == "bm25" and not ranked.matched_more
    monkeypatch.setattr(search_mod, "RANK_ALL", 3)  # as if 3 were the 5,000 of a big workspace
    common = search(indexed, "root OR ls", limit=4)
    assert common.ranked_by == "newest" and common.matched_more and common.matched_docs == 3
    ids = [e.episode_id for e in common.episodes]
    newest = sorted({e.episode_id for e in ranked.episodes}, reverse=True)[:4]
    assert ids == newest


@pytest.mark.slow
def test_replay_find_prints_the_frame_where_the_scrolled_line_is_visible(tmp_path: Path) -> None:
    cast = SAMPLES / SCROLLED / "agent.cast"
    out = bp(tmp_path, "replay", str(cast), "--find", '"line 200"', "--print")
    assert out.returncode == 0, out.stderr
    head, *rows = out.stdout.splitlines()
    assert head.startswith("match 1 of 1 · agent · step 0 ·")
    assert rows[-1] == "line 200" and rows[-2] == "line 199"  # written so far: line 200 at the bottom
    third = bp(
        tmp_path,
        "replay",
        str(SAMPLES / "step10-configure-kv-service-04-repl" / "agent.cast"),
        "--find",
        ">>>",
        "--hit",
        "3",
        "--print",
    )
    assert third.returncode == 0 and third.stdout.startswith("match 3 of ")
    assert bp(tmp_path, "replay", str(cast), "--find", "zzzqqq", "--print").returncode == 1
