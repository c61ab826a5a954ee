"""The verifier's observer, read on the host (engine/run/observer.py): its reports as the terminal hands
them over, what each verdict needs, and the terminal reader cutting them out of the text. The real
wrapper and plugin run in the red-team matrix (tests/engine/run/test_redteam.py)."""

from __future__ import annotations

import base64
import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

from bandpass.engine.run import observer
from bandpass.engine.sandbox.terminal import _MarkerScanner

NONCE = "0123abcd0123abcd"


def _report(kind: str, pid: int, payload: dict[str, object], nonce: str = NONCE) -> str:
    return f"{nonce};{kind};{pid};" + base64.b64encode(json.dumps(payload).encode()).decode()


def _exit(rc: int = 0, *, stopped: int = 0, late: str = "", alive: str = "") -> str:
    return f"{NONCE};X;7;rc={rc}|stopped={stopped}|waited={int(bool(alive))}|late={late}|alive={alive}"


def test_a_finished_session_judged_the_work() -> None:
    obs = observer.observe(
        NONCE,
        [
            _report("S", 20, {}),
            _report("C", 20, {"n": 2, "co": False}),
            _report("T", 20, {"id": "test_x.py::test_a"}),
            _report("T", 20, {"id": "test_x.py::test_b"}),
            _report("F", 20, {"status": 0, "ran": 2, "failed": 0}),
            _exit(0),
        ],
    )
    assert obs.exit_status == 0 and not obs.alive and obs.sessions[0].problem() == ""
    assert observer.session_hijack(obs, 1.0) == "" and observer.script_hijack(obs, 1.0) == ""


def test_a_session_that_never_finished_does_not_pay() -> None:
    obs = observer.observe(NONCE, [_report("S", 21, {}), _exit(0)])
    why = observer.session_hijack(obs, 1.0)
    assert "pid 21" in why and "never finished" in why and "while collecting" in why
    assert observer.session_hijack(obs, 0.0) == ""  # it did not pay: a plain failure
    # pytest.exit(returncode=0) in the middle: finished with status 0, short of its tests
    short = observer.observe(
        NONCE,
        [
            _report("S", 22, {}),
            _report("C", 22, {"n": 3, "co": False}),
            _report("T", 22, {"id": "t.py::test_1"}),
            _report("F", 22, {"status": 0, "ran": 1, "failed": 0}),
            _exit(0),
        ],
    )
    assert "after 1 of 3 collected tests" in observer.session_hijack(short, 1.0)
    # --collect-only, or -x after a failure (status 1), is no hijack
    co = observer.observe(
        NONCE,
        [
            _report("S", 23, {}),
            _report("C", 23, {"n": 3, "co": True}),
            _report("F", 23, {"status": 0, "ran": 0}),
        ],
    )
    assert observer.session_hijack(co, 1.0) == ""


def test_reports_of_another_nonce_are_counted_never_believed() -> None:
    forged = [_report("S", 5, {}, nonce="ffff"), _report("F", 5, {"status": 0}, nonce="ffff")]
    obs = observer.observe(NONCE, [*forged, _report("S", 21, {}), _exit(0)])
    assert obs.foreign == 2 and len(obs.sessions) == 1 and not obs.sessions[0].finished


def test_test_sh_stopped_or_killed_and_late_writes() -> None:
    stopped = observer.observe(NONCE, [_exit(148, stopped=1)])
    assert "stopped by a signal" in observer.script_hijack(stopped, None)
    killed = observer.observe(NONCE, [_exit(137)])
    assert "killed by signal 9" in observer.script_hijack(killed, 1.0)
    assert (
        observer.script_hijack(killed, 0.0) == ""
        and observer.script_hijack(observer.observe(NONCE, [_exit(1)]), 1.0) == ""
    )
    late = observer.observe(
        NONCE, [_exit(0, late="reward.txt:written", alive="31/new/sh -c loop,8/old/server")]
    )
    assert [a.as_dict() for a in late.alive] == [
        {"pid": 31, "new": True, "cmd": "sh -c loop"},
        {"pid": 8, "new": False, "cmd": "server"},
    ]
    why = observer.late_write(late)
    assert "reward.txt written" in why and "31 sh -c loop" in why and "server" not in why


def test_the_kit_and_its_late_window() -> None:
    kit = observer.Kit(NONCE)
    files = kit.files()
    assert set(files) == {
        f"run/bandpass-{NONCE}/verify",
        f"run/bandpass-{NONCE}/bp_observer_{NONCE}.py",
        f"run/bandpass-{NONCE}/bp_observer_{NONCE}-1.0.dist-info/METADATA",
        f"run/bandpass-{NONCE}/bp_observer_{NONCE}-1.0.dist-info/entry_points.txt",
    }
    assert kit.env({"PYTHONPATH": "/opt/x"})["PYTHONPATH"] == f"/opt/x:/run/bandpass-{NONCE}"
    assert (
        kit.command("/bin/bash", "/tests/test.sh")
        == f". /run/bandpass-{NONCE}/verify /bin/bash /tests/test.sh\n"
    )
    window = re.search(r"^__bp_window=([0-9.]+)$", (observer.KIT / "verify.sh").read_text(), re.M)
    assert window is not None and float(window.group(1)) == observer.LATE_WINDOW_S
    assert (
        subprocess.run(["bash", "-n", str(observer.KIT / "verify.sh")], capture_output=True).returncode == 0
    )


def test_the_plugin_reports_a_session_from_any_pytest_that_can_see_it(tmp_path: Path) -> None:
    """The plugin as the verifier's pytest loads it (entry point on PYTHONPATH), here under this
    machine's pytest and a pseudo-terminal as its /dev/tty."""
    kit = observer.Kit(NONCE)
    for name, (data, _mode) in kit.files().items():
        dest = tmp_path / name
        dest.parent.mkdir(parents=True, exist_ok=True)
        dest.write_bytes(data)
    (tmp_path / "test_x.py").write_text("def test_a():\n    pass\n\ndef test_b():\n    pass\n")
    code = (
        "import os, sys, pytest; os.chdir(sys.argv[1]); "
        "sys.exit(pytest.main(['-q', '-p', 'no:cacheprovider', 'test_x.py']))"
    )
    out = bytearray()

    def read(fd: int) -> bytes:
        data = os.read(fd, 65536)
        out.extend(data)
        return data

    old = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(tmp_path / kit.dir.lstrip("/"))  # pty.spawn passes the environment on
    try:
        status = pty.spawn([sys.executable, "-c", code, str(tmp_path)], read)
    finally:
        if old is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = old
    assert os.waitstatus_to_exitcode(status) == 0
    scanner = _MarkerScanner(observe=True)
    text, markers = scanner.feed(out.decode("utf-8", "replace"))
    assert "7717" not in text and "2 passed" in text
    obs = observer.observe(NONCE, [v or "" for k, v in markers if k == "O"])
    (session,) = obs.sessions
    assert (session.collected, session.started_tests, session.finished, session.status, session.ran) == (
        2,
        2,
        True,
        0,
        2,
    )
