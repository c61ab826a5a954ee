"""CastTail follows a recording while it is written: real files, written by CastWriter (in this process,
in a thread, or in another process) or byte by byte, read while they grow."""

from __future__ import annotations

import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from bandpass.engine.sandbox.asciicast import CastError, CastWriter, read_cast
from bandpass.engine.sandbox.cast_tail import CastTail
from tests.support.paths import REPO


def test_a_missing_file_is_nothing_new_until_it_appears(tmp_path: Path) -> None:
    path = tmp_path / "agent.cast"
    tail = CastTail(path)
    assert tail.poll() == [] and not tail.started
    with CastWriter(path, 80, 24) as w:
        assert tail.poll() == [] and tail.started  # the header alone
        assert tail.header is not None and tail.header["width"] == 80 and tail.version == 2
        w.output("hello ")
        w.marker("step 0")
        first = tail.poll()
        assert [(e.code, e.data) for e in first] == [("o", "hello "), ("m", "step 0")]
        assert tail.poll() == []  # nothing new
        w.output("日本\r\n")
        assert tail.output() == "日本\r\n"
    # the events and times are exactly what the whole-file reader gives
    whole = read_cast(path)
    assert [*first, whole.events[-1]] == whole.events


def test_a_partial_last_line_waits_for_its_newline(tmp_path: Path) -> None:
    """The file grown byte by byte (a multi-byte character split too): each poll returns only complete
    events, and all of them in the end."""
    src = tmp_path / "src.cast"
    with CastWriter(src, 80, 24) as w:
        w.output("é one\r\n")
        w.input("ls\r")
        w.output("two 日本\r\n")
    data = src.read_bytes()
    path = tmp_path / "grow.cast"
    tail = CastTail(path)
    got = []
    with open(path, "wb") as f:
        for i in range(len(data)):
            f.write(data[i : i + 1])
            f.flush()
            events = tail.poll()
            if events:  # an event only once its line ended
                assert data[i : i + 1] == b"\n"
            got += events
    assert got == read_cast(src).events


def test_events_written_by_a_thread_while_polled(tmp_path: Path) -> None:
    path = tmp_path / "agent.cast"
    tail = CastTail(path)
    done = threading.Event()

    def write() -> None:
        with CastWriter(path, 80, 24) as w:
            for i in range(300):
                w.output(f"line {i}\r\n")
        done.set()

    t = threading.Thread(target=write)
    t.start()
    text = ""
    while not done.is_set():
        text += tail.output()
    t.join()
    text += tail.output()
    assert text == "".join(f"line {i}\r\n" for i in range(300))


def test_a_writer_in_another_process(tmp_path: Path) -> None:
    """The case it exists for: another process writes and flushes, this one follows."""
    path = tmp_path / "agent.cast"
    go = tmp_path / "go"
    program = (
        "import sys, time; from pathlib import Path\n"
        "from bandpass.engine.sandbox.asciicast import CastWriter\n"
        f"w = CastWriter({str(path)!r}, 80, 24)\n"
        "w.output('first\\r\\n')\n"
        f"while not Path({str(go)!r}).exists(): time.sleep(0.01)\n"
        "w.output('second\\r\\n'); w.close()\n"
    )
    proc = subprocess.Popen([sys.executable, "-c", program], cwd=REPO)
    try:
        tail = CastTail(path)
        text = ""
        while "first" not in text:  # the writer is blocked on `go`: this is a live read
            text += tail.output()
            assert proc.poll() is None
        go.touch()
        assert proc.wait(60) == 0
        text += tail.output()
        assert text == "first\r\nsecond\r\n"
    finally:
        proc.kill()
        proc.wait()


def test_a_replaced_file_is_read_from_its_header_again(tmp_path: Path) -> None:
    path = tmp_path / "agent.cast"
    tail = CastTail(path)
    with CastWriter(path, 80, 24) as w:
        w.output("old try, long enough to be longer than the new one\r\n")
    assert "old try" in tail.output()
    with CastWriter(path, 100, 30) as w:  # "w" truncates: the same inode, shorter
        w.output("new\r\n")
    assert tail.output() == "new\r\n"
    assert tail.header is not None and tail.header["width"] == 100
    other = tmp_path / "other.cast"
    with CastWriter(other, 80, 24) as w:
        w.output("moved over\r\n")
    other.replace(path)  # another inode
    assert tail.output() == "moved over\r\n"


def test_v3_relative_times_are_summed(tmp_path: Path) -> None:
    path = tmp_path / "v3.cast"
    path.write_text('{"version": 3, "term": {"cols": 80, "rows": 24}}\n[0.5, "o", "a"]\n')
    tail = CastTail(path)
    assert [e.time for e in tail.poll()] == [0.5]
    with open(path, "a") as f:
        f.write('# a comment\n[0.25, "o", "b"]\n[1, "x", "0"]\n')
    assert [(e.time, e.code) for e in tail.poll()] == [(0.75, "o"), (1.75, "x")]


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json\n", "line 1: expected a JSON header object"),
        ('{"version": 2, "width": 80, "height": 24}\n[1, "o"]\n', "line 2: expected [time, code, data]"),
        ('{"version": 2, "width": 80, "height": 24}\n[1, "o", 5]\n', "line 2: expected a string"),
        ('{"version": 2, "width": 80, "height": 24}\n\n[1, "o", "\xff"\n', "line 3: expected [time"),
    ],
)
def test_a_complete_bad_line_names_the_file_and_line(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.cast"
    path.write_text(text)
    with pytest.raises(CastError, match=re.escape(f"bad.cast {message}")):
        CastTail(path).poll()
