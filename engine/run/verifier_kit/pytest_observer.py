"""Bandpass's observer of a pytest session run by a task's verifier.

Shipped into the verifier's container as ``bp_observer_<nonce>.py`` with a ``pytest11`` entry point on
``PYTHONPATH`` (engine/run/observer.py), so any pytest the verifier starts loads it by itself, and a
pytest that cannot see it (``python3 -I``, another ``PYTHONPATH``) simply runs without it: the observer
never changes what the tests do or how they end.

It reports, on the verifier's terminal (``/dev/tty``, read by Bandpass on the host as OSC 7717 sequences
it cuts out of the recording's text), when the session starts, how many tests it collected, each test as
it starts, and the session's finish with its exit status and how many tests finished. A session that
started and never finished (the code under test called ``os._exit(0)``), or finished with fewer tests
than it collected and status 0 (``pytest.exit(returncode=0)``), did not judge the work, whatever the
verifier then paid. The nonce is this module's own name, unknown to the policy when it wrote its code.
Code running inside this process can still lie to it; the audit's hostile twins are what prove a task.
"""

import base64
import json
import os
from typing import TYPE_CHECKING

from _pytest import hookspec as _hookspec

if TYPE_CHECKING:  # type comments, not annotations: the module loads under whatever Python the task has
    from typing import Any  # noqa: F401 (read by the type comments)

_NONCE = __name__.rsplit("_", 1)[-1]
_FD = [-2]  # the terminal's descriptor: -2 not opened yet, -1 none (the observer is off)
_RAN = [0]  # tests that finished in this process's session


def _emit(kind, payload):
    # type: (str, dict[str, Any]) -> None
    if _FD[0] == -2:
        try:
            _FD[0] = os.open("/dev/tty", os.O_WRONLY | os.O_NOCTTY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            _FD[0] = -1
    if _FD[0] < 0:
        return
    data = base64.b64encode(json.dumps(payload, separators=(",", ":")).encode("utf-8")).decode("ascii")
    msg = ("\x1b]7717;" + _NONCE + ";" + kind + ";" + str(os.getpid()) + ";" + data + "\x07").encode("ascii")
    try:
        while msg:
            msg = msg[os.write(_FD[0], msg) :]
    except OSError:
        _FD[0] = -1


def pytest_configure(config):
    # type: (Any) -> None
    # an xdist worker: its controller reports the session; the worker's own would double it
    if hasattr(config, "workerinput"):
        _FD[0] = -1


def pytest_sessionstart(session):
    # type: (Any) -> None
    _emit("S", {})


def pytest_collection_finish(session):
    # type: (Any) -> None
    collect_only = bool(getattr(session.config.option, "collectonly", False))
    _emit("C", {"n": len(session.items), "co": collect_only})


def pytest_runtest_logstart(nodeid, location):
    # type: (str, Any) -> None
    _emit("T", {"id": nodeid[:300]})


if hasattr(_hookspec, "pytest_runtest_logfinish"):  # pytest >= 3.4: an unknown hook would fail older ones

    def pytest_runtest_logfinish(nodeid, location):
        # type: (str, Any) -> None
        _RAN[0] += 1


def pytest_sessionfinish(session, exitstatus):
    # type: (Any, Any) -> None
    _emit("F", {"status": int(exitstatus), "ran": _RAN[0], "failed": int(session.testsfailed)})
