"""Recordings must round-trip, play in the real asciinema, and survive a crashed writer."""

from __future__ import annotations

import contextlib
import json
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from bandpass.engine.sandbox.asciicast import Cast, CastError, CastWriter, read_cast

ASCIINEMA = str(Path(sys.executable).with_name("asciinema"))


def write_sample(path: Path) -> None:
    with CastWriter(path, 80, 24, title="demo", env={"TERM": "xterm-256color", "API_KEY": "sk-secret"}) as w:
        w.output("hello \x1b[31mworld\x1b[0m\r\n")
        w.marker("step 1")
        w.input("ls\r")
        w.output("é 日本\r\n")
        w.resize(100, 30)
        w.output("bye\r\n")


def test_round_trip(tmp_path: Path) -> None:
    path = tmp_path / "run.cast"
    write_sample(path)
    cast = read_cast(path)
    assert cast.version == 2 and not cast.truncated
    assert (cast.cols, cast.rows) == (80, 24)
    assert cast.header["title"] == "demo"
    assert [e.code for e in cast.events] == ["o", "m", "i", "o", "r", "o"]
    assert cast.output() == "hello \x1b[31mworld\x1b[0m\r\né 日本\r\nbye\r\n"
    assert cast.markers == [(cast.events[1].time, "step 1")]
    assert cast.events[4].data == "100x30"
    times = [e.time for e in cast.events]
    assert times == sorted(times) and cast.duration == times[-1]
    assert all(round(t, 6) == t for t in times)


def test_env_never_carries_secrets(tmp_path: Path) -> None:
    path = tmp_path / "run.cast"
    write_sample(path)
    header = json.loads(path.read_text().splitlines()[0])
    assert header["env"] == {"TERM": "xterm-256color"}
    assert "sk-secret" not in path.read_text()


def test_threads_share_a_writer(tmp_path: Path) -> None:
    path = tmp_path / "threads.cast"
    with CastWriter(path, 80, 24) as w:

        def burst(tag: str) -> None:
            for i in range(200):
                w.output(f"{tag}{i}\n" * 3)

        threads = [threading.Thread(target=burst, args=(t,)) for t in "abcd"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    cast = read_cast(path)
    assert len(cast.events) == 800 and not cast.truncated
    times = [e.time for e in cast.events]
    assert times == sorted(times)


def test_elapsed_and_closed_writer(tmp_path: Path) -> None:
    w = CastWriter(tmp_path / "x.cast", 10, 5)
    assert w.elapsed() >= 0
    w.close()
    w.close()
    with pytest.raises(ValueError, match="closed"):
        w.output("late")


def test_plays_in_real_asciinema(tmp_path: Path) -> None:
    path = tmp_path / "run.cast"
    write_sample(path)
    for args in (["cat", str(path)], ["play", "-s", "100", str(path)]):
        res = subprocess.run(
            [ASCIINEMA, *args], stdin=subprocess.DEVNULL, capture_output=True, timeout=60, check=False
        )
        assert res.returncode == 0, res.stderr
        out = res.stdout.decode()
        assert "hello" in out and "world" in out and "bye" in out and "日本" in out


def test_reads_a_real_asciinema_recording(tmp_path: Path) -> None:
    path = tmp_path / "rec.cast"
    res = subprocess.run(
        [ASCIINEMA, "rec", "-c", "echo hi", "--cols", "80", "--rows", "24", str(path)],
        stdin=subprocess.DEVNULL,
        capture_output=True,
        timeout=60,
        check=False,
        cwd=tmp_path,
    )
    assert res.returncode == 0, res.stderr
    cast = read_cast(path)
    assert cast.version == 2 and (cast.cols, cast.rows) == (80, 24)
    assert "hi" in cast.output()


V3 = """{"version": 3, "term": {"cols": 80, "rows": 24, "type": "xterm-256color"}, "timestamp": 1700000000}
# a comment
[0.5, "o", "hello\\r\\n"]
[0.25, "m", "step 1"]
[1.0, "o", "done\\r\\n"]
[0.125, "x", "0"]
"""


def test_v3_relative_times_and_exit() -> None:
    cast = read_cast(V3)
    assert cast.version == 3 and (cast.cols, cast.rows) == (80, 24)
    assert [(e.time, e.code) for e in cast.events] == [(0.5, "o"), (0.75, "m"), (1.75, "o"), (1.875, "x")]
    assert cast.markers == [(0.75, "step 1")]
    assert cast.duration == 1.875


def test_unknown_codes_are_kept() -> None:
    text = (
        '{"version": 2, "width": 80, "height": 24}\n[0.1, "o", "a"]\n[0.2, "z", {"k": 1}]\n[0.3, "m", ""]\n'
    )
    cast = read_cast(text)
    assert [(e.code, e.data) for e in cast.events] == [("o", "a"), ("z", '{"k": 1}'), ("m", "")]


def test_truncated_last_line_is_tolerated(tmp_path: Path) -> None:
    path = tmp_path / "crash.cast"
    write_sample(path)
    full = path.read_text()
    path.write_text(full[: full.rstrip("\n").rfind("\n") + 12])  # cut the last event mid-line
    cast = read_cast(path)
    assert cast.truncated
    assert len(cast.events) == 5


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "line 1: expected a JSON header object"),
        ("[1, 2]\n", "line 1: expected a JSON header object"),
        ('{"version": 1, "width": 80}\n', "expected asciicast version 2 or 3"),
        ('{"version": 2, "width": 80}\n', "positive integer 'height'"),
        ('{"version": 3, "term": {}}\n', '"term"'),
        ('{"version": 2, "width": 80, "height": 24}\n[0.1, "o", "a"]\ngarbage\n[0.2, "o", "b"]\n', "line 3"),
        ('{"version": 2, "width": 80, "height": 24}\n[0.1, "o"]\n', "line 2: expected [time, code, data]"),
        ('{"version": 2, "width": 80, "height": 24}\n[-1, "o", "a"]\n', "line 2"),
        ('{"version": 2, "width": 80, "height": 24}\n[NaN, "o", "a"]\n', "line 2"),
        ('{"version": 2, "width": 80, "height": 24}\n[1, "o", 5]\n', "line 2: expected a string"),
        ('{"version": 2, "width": 80, "height": 24}\n[1, "o", "a"]\n[0.2, "o", "b\n', "line 3"),
    ],
)
def test_malformed_input_names_the_line(text: str, message: str) -> None:
    with pytest.raises(CastError, match=message.replace("[", r"\[").replace("]", r"\]")):
        read_cast(text)


def test_error_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / "run.cast"
    path.write_text('{"version": 2, "width": 80, "height": 24}\n[1, "o", "a"]\n{"x": 1}\n[2, "o", "b"]\n')
    with pytest.raises(CastError, match=r"run.cast line 3: expected \[time, code, data\]"):
        read_cast(path)
    with pytest.raises(CastError, match="cannot read"):
        read_cast(tmp_path / "missing.cast")
    assert isinstance(CastError("x"), ValueError)


@settings(max_examples=300, deadline=None)
@given(st.one_of(st.text(), st.binary()))
@example("/proc/self/ns/pid")  # found by this test: opens, then reading fails with EINVAL
def test_read_cast_returns_or_raises_cast_error(data: str | bytes) -> None:
    try:
        cast = read_cast(data)
    except CastError:
        return
    assert isinstance(cast, Cast)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.one_of(
            st.just('{"version": 2, "width": 80, "height": 24}'),
            st.just('[0.5, "o", "x"]'),
            st.just('[1e400, "o", "x"]'),
            st.just("[" * 5000),
            st.text(max_size=30),
        ),
        max_size=6,
    ),
    st.booleans(),
)
def test_read_cast_line_soup(lines: list[str], trailing_newline: bool) -> None:
    text = "\n".join(lines) + ("\n" if trailing_newline else "")
    with contextlib.suppress(CastError):
        read_cast(text)


def test_a_long_recording_is_held_compactly_and_reads_back_exactly(tmp_path: Path) -> None:
    """Events spanning many compressed blocks (non-ASCII, lone surrogates, empty data, unknown codes)
    read back exactly as written, by index, slice, negative index and iteration, from several threads."""
    from bandpass.engine.sandbox.asciicast import CastEvent, EventLog

    events = []
    t = 0.0
    for i in range(4000):
        t += 0.01
        data = f"line {i} é 日本 \x1b[3{i % 8}m{'x' * (i % 97)}\x1b[0m\r\n" if i % 7 else ""
        if i % 500 == 3:
            data += "\ud800"  # JSON can carry a lone surrogate
        events.append(CastEvent(round(t, 6), "o" if i % 11 else ("m" if i % 2 else "zz"), data))
    path = tmp_path / "long.cast"
    lines = [json.dumps({"version": 2, "width": 80, "height": 24})]
    lines += [json.dumps([e.time, e.code, e.data]) for e in events]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8", errors="surrogatepass")
    cast = read_cast(path)
    log = cast.events
    assert isinstance(log, EventLog) and len(log._blocks) >= 3
    assert log == events and events == log and list(log) == events
    assert log[-1] == events[-1] and log[1234] == events[1234] and log[10:20] == events[10:20]
    assert [(log.code(i), log.length(i)) for i in range(len(log))] == [(e.code, len(e.data)) for e in events]
    assert list(log.items(100, 3900)) == [(e.code, e.data) for e in events[100:3900]]
    raw = sum(len(e.data.encode("utf-8", "surrogatepass")) for e in events)
    assert sum(map(len, log._blocks)) < raw / 3  # the data is held compressed

    errors: list[BaseException] = []

    def reader(seed: int) -> None:
        import random

        r = random.Random(seed)
        try:
            for _ in range(300):
                i = r.randrange(len(events))
                assert log[i] == events[i]
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=reader, args=(s,)) for s in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    assert not errors


def test_a_cut_last_line_and_bad_bytes_are_reported_as_before(tmp_path: Path) -> None:
    head = json.dumps({"version": 2, "width": 80, "height": 24})
    good = json.dumps([0.5, "o", "ok"])
    cut = tmp_path / "cut.cast"
    cut.write_text(f'{head}\n{good}\n[1.0, "o", "half', encoding="utf-8")
    cast = read_cast(cut)
    assert cast.truncated and [e.data for e in cast.events] == ["ok"]
    complete_but_bad = tmp_path / "bad.cast"
    complete_but_bad.write_text(f'{head}\n[1.0, "o", "half\n{good}\n', encoding="utf-8")
    with pytest.raises(CastError, match="bad.cast line 2"):
        read_cast(complete_but_bad)
    binary = tmp_path / "bin.cast"
    binary.write_bytes(f"{head}\n{good}\n".encode() + b'[1.0, "o", "\xff"]\n')
    with pytest.raises(
        CastError, match=rf"bin.cast: not UTF-8 text \(byte {len(head) + len(good) + 2 + 12}\)"
    ):
        read_cast(binary)
