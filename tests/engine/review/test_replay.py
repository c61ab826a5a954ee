"""Replay engine: keyframe seek equals playing, the player clock, and casts from other recorders."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.replay import (
    KeyframeIndex,
    Player,
    load_source,
    replay_from_start,
    step_of_label,
)
from bandpass.engine.sandbox.asciicast import Cast, CastError, CastEvent, read_cast
from bandpass.engine.sandbox.emulator import Screen
from tests.support.narrow import present
from tests.support.replay_data import agent_events, make_episode, write_cast

CHUNKS = [
    "plain text ",
    "\r\n",
    "\x1b[31mred\x1b[0m",
    "\x1b[1;44mbold on blue\x1b[m",
    "\x1b[2J\x1b[H",
    "\x1b[?1049h",  # alternate screen on
    "\x1b[?1049l",  # and off
    "\x1b[",  # an escape sequence cut across events: the parser state must be in the keyframe
    "5;3H",
    "\x1b[38;2;10;20;30mtrue colour",
    "日本語",
    "e\u0301",
    "x" * 37,
    "\x1b[K",
    "\x1b[3;6r",  # scroll region
    "\x1b]0;title\x07",
]


def screen_state(screen: Screen) -> tuple[object, ...]:
    return (
        screen.cols,
        screen.rows,
        screen.lines(),
        screen.cursor(),
        screen.styled_rows(),
        screen.alternate_screen,
    )


def random_cast(draw: st.DrawFn) -> Cast:
    n = draw(st.integers(1, 120))
    t = 0.0
    events: list[CastEvent] = []
    for _ in range(n):
        t += draw(st.floats(0, 3, allow_nan=False))
        kind = draw(st.sampled_from("oooooooomr"))
        if kind == "o":
            data = "".join(draw(st.lists(st.sampled_from(CHUNKS), min_size=1, max_size=6)))
        elif kind == "m":
            data = f"step {len(events)}"
        else:
            data = f"{draw(st.integers(5, 60))}x{draw(st.integers(3, 20))}"
        # A merged marker may carry a slightly earlier time than the event before it (Terminal-Bench).
        jitter = draw(st.sampled_from([0.0, 0.0, 0.0, -0.5])) if kind == "m" else 0.0
        events.append(CastEvent(max(0.0, t + jitter), kind, data))
    return Cast(header={"version": 2, "width": 30, "height": 8}, version=2, events=events)


@st.composite
def cast_and_times(draw: st.DrawFn) -> tuple[Cast, list[float]]:
    cast = random_cast(draw)
    end = max(e.time for e in cast.events) + 1
    times = draw(st.lists(st.floats(0, end, allow_nan=False), min_size=1, max_size=12))
    return cast, times


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cast_and_times(), st.integers(20, 400))
def test_seek_equals_playing_to_t(data: tuple[Cast, list[float]], every: int) -> None:
    """Tiny keyframe spacing puts many keyframes (and split escape sequences) between the seek targets."""
    cast, times = data
    index = KeyframeIndex(cast, every=every)
    index.build()
    assert len(index.keyframes) > 1 or cast.output().__len__() < every
    player = Player(index)
    for t in times:  # the player keeps its state between seeks: forward feeds and restores both happen
        player.seek(t)
        assert screen_state(player.screen) == screen_state(replay_from_start(cast, t)), t
        assert screen_state(index.screen_at(t)) == screen_state(replay_from_start(cast, t)), t


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cast_and_times())
def test_playing_through_ticks_equals_replay(data: tuple[Cast, list[float]]) -> None:
    cast, _ = data
    player = Player(KeyframeIndex(cast, every=200), speed=4.0)
    player.play()
    for _ in range(10_000):
        res = player.tick(0.37)
        assert screen_state(player.screen) == screen_state(replay_from_start(cast, player.position))
        if res.ended:
            break
    assert player.at_end and not player.playing


def test_a_partly_built_index_still_seeks_correctly() -> None:
    cast = Cast(
        header={"version": 2, "width": 20, "height": 5},
        version=2,
        events=[CastEvent(i * 0.1, "o", f"line {i}\r\n") for i in range(2000)],
    )
    index = KeyframeIndex(cast, every=100)
    index.build(budget_s=0.0)  # one chunk only
    assert not index.complete and 0 < index.progress < 1
    for t in (0.0, 50.0, 150.0, 199.9):
        assert index.screen_at(t).lines() == replay_from_start(cast, t).lines()
    index.build()
    assert index.complete and index.progress == 1.0


@given(st.binary(max_size=400))
@settings(max_examples=200, deadline=None)
def test_arbitrary_bytes_never_crash_the_player(raw: bytes) -> None:
    """Whatever a file holds, the player either replays it or the reader says why, clearly."""
    try:
        cast = read_cast(raw)
    except CastError as e:
        assert str(e).startswith("<bytes>")
        return
    player = Player(KeyframeIndex(cast, every=16))
    player.index.build()
    player.play()
    player.tick(1e6)
    player.seek(player.duration / 2)
    player.next_marker()
    player.frame_back()
    player.frame_forward()


@given(
    st.lists(
        st.tuples(st.floats(-5, 50), st.sampled_from(["o", "i", "m", "r", "x", "zz"]), st.text(max_size=20))
    )
)
@settings(max_examples=150, deadline=None)
def test_arbitrary_event_lines_never_crash_the_player(events: list[tuple[float, str, str]]) -> None:
    lines = [json.dumps({"version": 2, "width": 10, "height": 3})] + [json.dumps(list(e)) for e in events]
    try:
        cast = read_cast("\n".join(lines) + "\n")
    except CastError as e:
        assert "line" in str(e)
        return
    index = KeyframeIndex(cast, every=8)
    index.build()
    for t in (0.0, index.duration / 3, index.duration):
        assert index.screen_at(t).lines() == replay_from_start(cast, t).lines()


def test_keyframes_at_every_marker_and_by_size() -> None:
    cast = read_cast(write_cast_text(agent_events(4)))
    index = KeyframeIndex(cast, every=10)
    index.build()
    marker_kf = {kf.event_index for kf in index.keyframes}
    for m in index.markers:
        assert m.event_index + 1 in marker_kf  # a keyframe right after each marker
    assert [m.step for m in index.markers] == [0, 1, 2, 3]


def write_cast_text(events: list[tuple[float, str, str]], **header: object) -> str:
    head = {"version": 2, "width": 40, "height": 8, **header}
    return "\n".join([json.dumps(head)] + [json.dumps(list(e)) for e in events]) + "\n"


# --- player clock -------------------------------------------------------------------------------------


def player_for(events: list[tuple[float, str, str]], **kwargs: object) -> Player:
    return Player(KeyframeIndex(read_cast(write_cast_text(events))), **kwargs)  # type: ignore[arg-type]


def test_markers_navigation_and_pause_at_markers() -> None:
    p = player_for(agent_events(3))
    assert [m.label for m in p.markers] == ["step 0", "step 1", "step 2"]
    assert present(p.next_marker()).label == "step 0" and p.position == 1.0
    assert present(p.next_marker()).label == "step 1"
    assert present(p.prev_marker()).label == "step 0"
    assert p.prev_marker() is None and p.position == 0.0
    p.seek(15.0)
    assert present(p.current_marker()).label == "step 1"
    assert "output of step 1" in p.screen.text() and "step2" not in p.screen.text()

    p = player_for(agent_events(3), pause_at_markers=True, speed=16.0)
    p.play()
    res = p.tick(10.0)
    assert res.paused_at is not None and res.paused_at.label == "step 0" and not p.playing
    assert p.position == 1.0
    p.play()
    res = p.tick(10.0)
    assert res.paused_at is not None and res.paused_at.label == "step 1"


def test_idle_limit_shortens_long_pauses() -> None:
    events = [(0.0, "o", "a"), (100.0, "o", "b"), (100.5, "o", "c")]
    p = player_for(events, idle_limit=2.0)
    p.play()
    p.tick(1.0)
    assert p.screen.text() == "a"
    p.tick(1.2)  # 2 s of idle shown, then the rest of the gap is skipped
    assert p.screen.text() == "ab" and p.position == pytest.approx(100.2)
    p.tick(1.0)
    assert p.screen.text() == "abc"
    full = player_for(events)
    full.play()
    full.tick(50.0)
    assert full.screen.text() == "a"  # no limit: the pause plays in full


def test_idle_limit_from_the_header() -> None:
    cast = read_cast(write_cast_text([(0.0, "o", "a"), (60.0, "o", "b")], idle_time_limit=1.5))
    assert Player(KeyframeIndex(cast)).idle_limit == 1.5


def test_speed_and_frame_step() -> None:
    events = [(0.0, "o", "a"), (1.0, "i", "x"), (2.0, "o", "b"), (2.0, "m", "step 0"), (3.0, "o", "c")]
    p = player_for(events)
    assert p.faster() == 2.0 and p.slower() == 1.0
    for _ in range(10):
        p.slower()
    assert p.speed == 0.25
    for _ in range(10):
        p.faster()
    assert p.speed == 16.0
    p.frame_forward()
    assert p.screen.text() == "a"
    p.frame_forward()  # skips the input event: only screen-changing events are frames
    assert p.screen.text() == "ab" and p.position == 2.0
    p.frame_forward()
    assert p.screen.text() == "abc"
    p.frame_back()
    assert p.screen.text() == "ab"
    p.frame_back()
    assert p.screen.text() == "a"
    p.frame_back()
    assert p.screen.text() == "" and p.position == 0.0


def test_seek_clamps_and_fractions() -> None:
    p = player_for(agent_events(3))
    p.seek(-5)
    assert p.position == 0.0
    p.seek(1e9)
    assert p.position == p.duration and p.at_end
    p.seek_fraction(0.5)
    assert p.position == pytest.approx(p.duration / 2)
    p.play()  # at the end, play restarts from the beginning
    p.seek(p.duration)
    p.play()
    assert p.position == 0.0 and p.playing


def test_step_labels() -> None:
    assert step_of_label("step 12") == 12 and step_of_label("Step #3") == 3
    assert step_of_label("ls -la\n") is None and step_of_label("rerun") is None


# --- compatibility ------------------------------------------------------------------------------------


def test_v3_cast_replays(tmp_path: Path) -> None:
    events = [(0.5, "o", "hello"), (1.0, "m", "step 0"), (2.5, "o", " world"), (3.0, "x", "0")]
    path = write_cast(tmp_path / "v3.cast", events, version=3, header={"idle_time_limit": 1.0})
    index = KeyframeIndex(read_cast(path))
    index.build()
    assert index.duration == 3.0 and index.markers[0].time == 1.0
    assert index.screen_at(2.0).text() == "hello"
    assert index.screen_at(2.5).text() == "hello world"


def test_truncated_cast_replays(tmp_path: Path) -> None:
    path = write_cast(tmp_path / "cut.cast", agent_events(2), cut_last=True)
    cast = read_cast(path)
    assert cast.truncated
    p = Player(KeyframeIndex(cast))
    p.seek(p.duration)
    assert "output of step 0" in p.screen.text()


def test_terminal_bench_style_merged_markers(tmp_path: Path) -> None:
    """Terminal-Bench writes asciinema 2.x casts and merges its markers afterwards: labels are the keys
    sent, a marker precedes the first event at or after its time, leftovers are appended at the end."""
    header = {
        "version": 2,
        "width": 80,
        "height": 24,
        "timestamp": 1,
        "env": {"SHELL": "/bin/bash", "TERM": "screen"},
    }
    lines = [
        json.dumps(header),
        json.dumps([0.2, "o", "root@c:/app# "]),
        json.dumps([1.0, "m", "ls -la\n"]),
        json.dumps([1.01, "o", "ls -la\r\n"]),
        json.dumps([1.3, "o", "total 0\r\nroot@c:/app# "]),
        json.dumps([9.0, "m", "['C-d']"]),
    ]
    path = tmp_path / "tb.cast"
    path.write_text("\n".join(lines) + "\n")
    p = Player(KeyframeIndex(read_cast(path)))
    assert [(m.label, m.step) for m in p.markers] == [("ls -la\n", None), ("['C-d']", None)]
    p.next_marker()
    assert p.screen.text() == "root@c:/app#"
    p.next_marker()
    assert p.position == 9.0 and "total 0" in p.screen.text()


def test_asciinema_2_header_fields_are_tolerated(tmp_path: Path) -> None:
    header = {
        "version": 2,
        "width": 20,
        "height": 4,
        "timestamp": 1700000000,
        "idle_time_limit": 2.0,
        "command": "/bin/bash",
        "title": "t",
        "env": {"SHELL": "/bin/bash", "TERM": "xterm-256color"},
        "theme": {"fg": "#ffffff", "bg": "#000000", "palette": "#000000:#111111"},
    }
    path = tmp_path / "a.cast"
    path.write_text(json.dumps(header) + "\n" + json.dumps([0.1, "o", "hi"]) + "\n")
    assert Player(KeyframeIndex(read_cast(path))).idle_limit == 2.0


# --- sources and the CLI --------------------------------------------------------------------------------


def test_load_source_for_an_episode_and_a_file(workspace: Workspace, tmp_path: Path) -> None:
    eid = make_episode(workspace, steps=3)
    src = load_source(workspace, str(eid))
    assert src.episode_id == eid and src.agent_cast and src.verifier_cast
    assert "fix-it" in src.title and "FAILED" in src.verifier_output
    assert [s.index for s in src.steps] == [0, 1, 2]
    assert src.step_at(0.5) is None and present(src.step_at(12.0)).index == 1
    assert src.steps[1].keystrokes == ["echo step1\n"] and src.steps[1].analysis == "analysis of step 1"
    cast = write_cast(tmp_path / "x.cast", [(0.0, "o", "x")])
    assert load_source(None, cast).agent_cast == cast


def bp(ws: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(ws), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "BANDPASS_AUTHOR": "tester"},
    )


def test_cli_print_at(workspace: Workspace, tmp_path: Path) -> None:
    eid = make_episode(workspace, steps=3)
    res = bp(workspace.root, "replay", str(eid), "--print-at", "12")
    assert res.returncode == 0, res.stderr
    assert "output of step 1" in res.stdout and "step2" not in res.stdout
    res = bp(workspace.root, "replay", str(eid), "--print-at", "1", "--verifier")
    assert res.stdout.strip() == "running tests\n1 failed"
    cast = write_cast(tmp_path / "v3.cast", [(0.5, "o", "v3 works")], version=3)
    res = bp(workspace.root, "replay", str(cast), "--print-at", "1")
    assert res.stdout.strip() == "v3 works"
    bad = tmp_path / "bad.cast"
    bad.write_text('{"version": 9}\n')
    res = bp(workspace.root, "replay", str(bad), "--print-at", "1")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.startswith("bandpass: error: bad.cast line 1: expected asciicast version 2 or 3")
    res = bp(workspace.root, "replay", "999", "--print-at", "1")
    assert res.returncode == 1 and "episode 999 does not exist" in res.stderr
    res = bp(workspace.root, "replay", "nope.cast", "--print-at", "1")
    assert res.returncode == 1 and "no such cast file" in res.stderr


def test_a_saved_index_reopens_without_rebuilding_and_seeks_identically(tmp_path: Path) -> None:
    """Keyframes are emulator snapshot bytes: an index written beside its cast is read back whole."""
    from bandpass.engine.review.replay import index_path

    events = [CastEvent(i * 0.1, "o", f"\x1b[3{i % 8}mline {i} e\u0301\x1b[0m\r\n") for i in range(3000)]
    events.insert(1500, CastEvent(150.0, "o", "\x1b[?1049h\x1b[2J\x1b[5;5Hin-alt\x1b["))  # cut CSI
    cast = Cast(header={"version": 2, "width": 30, "height": 6}, version=2, events=events)
    path = index_path(tmp_path / "agent.cast")
    built = KeyframeIndex(cast, every=500)
    assert not built.save(path)  # incomplete: nothing written
    built.build()
    assert built.save(path) and path.stat().st_size > 0
    reopened = KeyframeIndex.open(cast, path, every=500)
    assert reopened.complete and len(reopened.keyframes) == len(built.keyframes) > 10
    for t in (0.0, 12.3, 149.95, 150.0, 150.05, 299.9):
        assert screen_state(reopened.screen_at(t)) == screen_state(replay_from_start(cast, t)), t
    other = Cast(header=cast.header, version=2, events=events[:-1])  # a different cast: not trusted
    assert not KeyframeIndex.open(other, path).complete
    path.write_bytes(b"garbage")
    assert not KeyframeIndex.open(cast, path).complete


def test_a_seek_shows_the_right_frame_in_the_rows_a_pane_reads(tmp_path: Path) -> None:
    """A repaint after a seek reads only the rows the pane shows (decoded lazily from the restored
    keyframe); those rows, colours and cursor included, must be exactly what playing from the start
    gives, after a seek back, a seek forward and playing on from there."""
    import random

    r = random.Random(31)
    glyphs = ["日本", "e\u0301", "x"]
    events: list[tuple[float, str, str]] = []
    t = 0.0
    for i in range(400):
        t += 0.1
        k = r.random()
        if k < 0.6:
            data = f"\x1b[3{i % 8}m{i:04d} {'word ' * r.randint(0, 12)}\x1b[0m\r\n"
        elif k < 0.75:
            data = f"\x1b[{r.randint(1, 24)};{r.randint(1, 70)}H\x1b[7m{r.choice(glyphs)}\x1b[0m"
        elif k < 0.85:
            data = r.choice(["\x1b[?1049h\x1b[2J", "\x1b[?1049l", "\x1b[2K", "\x1b[44m\x1b[K\x1b[0m"])
        else:
            events.append((t, "m", f"step {i}"))
            continue
        events.append((t, "o", data))
    cast = read_cast(write_cast(tmp_path / "a.cast", events, cols=80, rows=24))
    index = KeyframeIndex(cast, every=512)
    index.build()
    player = Player(index)
    window = [(y, -1) for y in range(14, 24)]
    for target in (30.0, 4.2, 33.3, 17.77, 0.0, 39.9):
        player.seek(target)
        reference = replay_from_start(cast, target)
        seen = player.screen.styled_runs_many(window, 0, 80)
        assert seen == reference.styled_runs_many(window, 0, 80), target
        assert player.screen.cursor() == reference.cursor()
    player.seek(12.0)
    player.play()
    player.tick(3.0)
    assert player.screen.styled_runs_many(window, 0, 80) == replay_from_start(cast, 15.0).styled_runs_many(
        window, 0, 80
    )
