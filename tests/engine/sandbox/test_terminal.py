"""The harness's own terminal, against a real Docker engine."""

from __future__ import annotations

import hashlib
import random
import re
import string
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.core.events import EventBus, PtyInput, PtyOutput
from bandpass.engine.sandbox.asciicast import CastWriter, read_cast
from bandpass.engine.sandbox.emulator import Screen
from bandpass.engine.sandbox.keys import translate_keys
from bandpass.engine.sandbox.terminal import TerminalSession, _MarkerScanner, _TailBuffer
from tests.support.waiting import wait_until

IMAGE = "bandpass/base:bookworm"


# --- pure parts (no Docker) --- #


def test_marker_scanner_handles_any_split() -> None:
    stream = (
        "out\x1b]133;D;0\x07\x1b]133;A\x07$ x\x1b[31m\x1b]133;D;127\x1b\\\x1b]133;A\x07\x1b]0;t\x07end\x1b"
    )
    expected_text = "out$ x\x1b[31m\x1b]0;t\x07end"
    expected_markers = [("D", "0"), ("A", None), ("D", "127"), ("A", None)]
    rng = random.Random(0)
    for _ in range(300):
        cuts = sorted(rng.sample(range(1, len(stream)), rng.randint(0, 8)))
        pieces = [stream[a:b] for a, b in zip([0, *cuts], [*cuts, len(stream)], strict=True)]
        scanner = _MarkerScanner()
        text, markers = "", []
        for p in pieces:
            t, m = scanner.feed(p)
            text += t
            markers += m
        assert markers == expected_markers
        assert text == expected_text  # the final lone ESC is held: it could start a marker


def test_tail_buffer_keeps_the_last_cap_characters() -> None:
    buf = _TailBuffer(10)
    for chunk in ["abc", "defgh", "ijklmnop", "q"]:
        buf.append(chunk)
    assert buf.tail() == "hijklmnopq"
    assert buf.tail(3) == "opq"
    assert buf.tail(0) == ""
    buf.clear()
    assert buf.tail() == ""


@pytest.mark.parametrize(
    ("keys", "expected"),
    [
        ("C-c", "\x03"),
        ("C-a", "\x01"),
        ("C-z", "\x1a"),
        ("C-D", "\x04"),
        ("Enter", "\r"),
        ("Escape", "\x1b"),
        ("Esc", "\x1b"),
        ("Tab", "\t"),
        ("BSpace", "\x7f"),
        ("Up", "\x1b[A"),
        ("Down", "\x1b[B"),
        ("Right", "\x1b[C"),
        ("Left", "\x1b[D"),
        ("Home", "\x1b[H"),
        ("End", "\x1b[F"),
        ("PageUp", "\x1b[5~"),
        ("PageDown", "\x1b[6~"),
        ("M-x", "\x1bx"),
        ("ls -la", "ls -la"),
        ("C-", "C-"),
        (["echo hi", "Enter"], "echo hi\r"),
    ],
)
def test_translate_keys(keys: str | list[str], expected: str) -> None:
    assert translate_keys(keys) == expected


# --- Docker --- #


@pytest.fixture(scope="module")
def docker_client() -> Iterator[Any]:
    import docker

    try:
        client = docker.from_env()
        client.ping()
    except Exception as e:  # noqa: BLE001 - Docker tests never skip: scripts/test starts an engine
        pytest.fail(f"no Docker engine: {e}")
    yield client
    client.close()


@pytest.fixture
def container(docker_client: Any, request: pytest.FixtureRequest) -> Iterator[Any]:
    c = docker_client.containers.run(
        IMAGE,
        ["sleep", "infinity"],
        detach=True,
        network_mode="none",
        init=True,
        labels={"bandpass": "1", "bandpass.test": request.node.name[:60]},
    )
    try:
        yield c
    finally:
        c.remove(force=True)


@pytest.fixture
def session(docker_client: Any, container: Any) -> Iterator[TerminalSession]:
    s = TerminalSession(docker_client, container, cols=120, rows=30)
    s.start()
    try:
        yield s
    finally:
        s.close()


@pytest.mark.docker
def test_exit_status(session: TerminalSession) -> None:
    r = session.run("false")
    assert (r.completed, r.exit_code, r.timed_out) == (True, 1, False)
    assert session.run("(exit 3)").exit_code == 3
    r = session.run("true")
    assert (r.completed, r.exit_code) == (True, 0)
    r = session.run("echo hello-there")
    assert "hello-there" in r.output and "\x1b]133" not in r.output
    assert "hello-there" in session.screen_text()
    assert "\x1b]133" not in session.recent_output(10_000)


@pytest.mark.docker
def test_a_line_typed_in_parts_still_waits_for_its_marker(session: TerminalSession) -> None:
    session.send("sleep 0.5; echo par")
    session.send("\x1b[D\x1b[C")  # arrow keys: still editing at the prompt
    r = session.send_and_wait("tial\n", timeout=10, quiescence=0.1)
    assert r.completed and r.exit_code == 0 and "partial" in r.output


@pytest.mark.docker
def test_ten_megabytes_of_output_do_not_stall(session: TerminalSession) -> None:
    r = session.run("head -c 10000000 /dev/zero | tr '\\0' a; echo; echo END-OF-FLOOD", timeout=240)
    assert r.completed and r.exit_code == 0, r
    assert "END-OF-FLOOD" in session.screen_text()
    assert len(session.recent_output(500_000).encode()) == 500_000
    # run() returns on the completion marker; the prompt bash prints after it may still be in flight,
    # and readline may or may not clear the line after it (ESC [ K) depending on when it redraws
    prompt = re.compile(r"END-OF-FLOOD\r\n\x1b\[\?2004h# (\x1b\[K)?$")
    wait_until(lambda: prompt.search(session.recent_output(100)), what="the prompt after the flood")
    assert len(session.recent_output(50_000_000)) < 2_000_000  # the buffer is capped, not the stream


@pytest.mark.docker
def test_hundred_kilobytes_of_typed_input_arrive_intact(session: TerminalSession) -> None:
    rng = random.Random(7)
    alphabet = string.ascii_letters + string.digits + " .,;:-_=+()[]{}<>/'\"!?#$%&*"
    lines = ["".join(rng.choices(alphabet, k=rng.randint(0, 1000))) for _ in range(400)]
    payload = "\n".join(lines) + "\n"
    assert len(payload) > 100_000 and max(map(len, lines)) < 4096  # canonical-mode line limit
    r = session.run("cat > /tmp/typed.txt", timeout=1)
    assert r.timed_out  # cat is reading: no prompt yet
    session.send(payload)  # echoed back while we still write: the reader thread must keep draining
    r = session.send_and_wait("\x04", timeout=60)  # EOF at the start of a line ends cat
    assert r.completed and r.exit_code == 0, r
    r = session.run("sha256sum /tmp/typed.txt")
    assert hashlib.sha256(payload.encode()).hexdigest() in r.output


@pytest.mark.docker
def test_hung_command_times_out_and_interrupt_recovers(session: TerminalSession) -> None:
    r = session.send_and_wait("sleep 100\n", timeout=1.5)
    assert r.timed_out and not r.completed and not r.quiescent
    assert r.duration >= 1.4  # the timeout does not fire early; how late it returns is the machine's load
    session.interrupt()
    r = session.run("echo back")
    assert (r.completed, r.exit_code) == (True, 0) and "back" in r.output
    r = session.send_and_wait("sleep 100\n", timeout=0.5)
    assert r.timed_out
    r = session.send_and_wait("\x03", timeout=10)  # C-c as an action: the shell's own status comes back
    assert r.completed and r.exit_code == 130


@pytest.mark.docker
def test_quiescence_for_a_program_that_never_returns(session: TerminalSession) -> None:
    r = session.send_and_wait("cat\n", timeout=3, quiescence=0.5)
    assert r.timed_out  # a line typed at the prompt waits for the marker, not for silence
    r = session.send_and_wait("hello cat\n", timeout=10, quiescence=0.5)
    assert r.quiescent and not r.completed and not r.timed_out
    assert "hello cat" in r.output  # the flags say it returned on silence, not at the 10 s timeout
    session.interrupt()
    assert session.run("true").exit_code == 0


@pytest.mark.docker
def test_full_screen_program_falls_back_to_quiescence(session: TerminalSession) -> None:
    cmd = "printf '\\033[?1049h\\033[2J\\033[HFULLSCREEN'; sleep 100"
    r = session.send_and_wait(cmd + "\n", timeout=20, quiescence=0.5)
    assert r.quiescent and session.screen.alternate_screen
    assert session.screen_text() == "FULLSCREEN"
    session.send_and_wait("\x03", timeout=10)
    session.send("printf '\\033[?1049l'\n")
    assert session.run("echo again").completed
    assert not session.screen.alternate_screen


@pytest.mark.docker
def test_recorded_cast_rebuilds_the_live_screen(docker_client: Any, container: Any, tmp_path: Path) -> None:
    path = tmp_path / "agent.cast"
    bus = EventBus()
    seen: list[Any] = []
    bus.subscribe(PtyOutput, seen.append)
    bus.subscribe(PtyInput, seen.append)
    with CastWriter(path, 100, 30) as rec:
        s = TerminalSession(docker_client, container, cols=100, rows=30, recorder=rec, bus=bus, episode_id=7)
        s.start()
        s.run("for i in $(seq 1 50); do printf '\\033[3%dmline %d \\u00e9\\033[0m\\n' $((i % 8)) $i; done")
        s.run("printf '\\033[?1049h\\033[5;5Hin-alt'; sleep 0.2; printf '\\033[?1049l'")
        s.resize(90, 25)
        s.run("ls -la /usr/bin | head -n 40")
        live_lines, live_cursor = s.screen.lines(), s.screen.cursor()
        s.close()
    cast = read_cast(path)
    replay = Screen(cast.cols, cast.rows)
    for e in cast.events:
        if e.code == "o":
            replay.feed(e.data)
        elif e.code == "r":
            cols, rows = map(int, e.data.split("x"))
            replay.resize(cols, rows)
    assert replay.lines() == live_lines
    assert replay.cursor() == live_cursor
    assert any(e.code == "i" for e in cast.events)
    outputs = [e for e in seen if isinstance(e, PtyOutput)]
    assert outputs and all(e.episode_id == 7 and e.stream == "agent" for e in outputs)
    assert "".join(e.data for e in outputs) == cast.output()


@pytest.mark.docker
def test_resize_reaches_the_program(session: TerminalSession) -> None:
    session.resize(97, 23)
    r = session.run("stty size; tput cols")
    assert "23 97" in r.output and "\n97" in r.output.replace("\r", "")
    assert (session.screen.cols, session.screen.rows) == (97, 23)


@pytest.mark.docker
def test_env_workdir_user_and_death(docker_client: Any, container: Any) -> None:
    s = TerminalSession(docker_client, container, env={"GREETING": "hi there"}, workdir="/tmp", user="nobody")
    s.start()
    r = s.run('echo "$GREETING|$(pwd)|$(whoami)|$TERM"')
    assert "hi there|/tmp|nobody|xterm-256color" in r.output
    container.kill()
    deadline = time.monotonic() + 15
    while s.alive and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not s.alive
    assert (s.send_and_wait("true\n", timeout=1) if s.alive else None) is None
    s.close()


@pytest.mark.docker
def test_an_idle_shell_outlives_the_api_timeout(container: Any) -> None:
    # Found with a real vLLM on CPU: the policy took 160 s to answer, longer than the Docker API timeout
    # the SDK leaves on the attach socket, and the terminal was declared dead (agent_crashed).
    import docker

    client = docker.from_env(timeout=2)
    s = TerminalSession(client, container, cols=80, rows=24)
    s.start()
    try:
        deadline = time.monotonic() + 5  # idle for more than twice the API timeout
        while time.monotonic() < deadline:
            assert s.alive
            time.sleep(0.2)
        r = s.run("echo still-here", timeout=30)
        assert r.exit_code == 0 and "still-here" in r.output
    finally:
        s.close()
        client.close()
