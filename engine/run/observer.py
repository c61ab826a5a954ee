"""The verifier, watched from outside the code it runs: the reward is what the verifier's own script left
when it exited, and a test session that did not finish does not pay.

The verifier runs the policy's code (the artifacts are the solution), so that code can try what the
policy itself no longer can: leave the test process with status 0 before any test ran (``os._exit(0)`` at
import: pytest "passes"), write the reward file while the tests import it, leave a background writer
that overwrites the verifier's reward, stop or kill the verifier's script after writing its own reward.
Two defences, both reported over the verifier's own terminal, which the host reads and nothing in the
container can read back (a pty's output goes to its master, on the host):

* **A wrapper** (``verifier_kit/verify.sh``) sourced by the verifier's shell runs ``tests/test.sh`` and,
  the moment it exits, stops every other process in the container with one ``kill(-1, SIGSTOP)``
  (builtins only), lets the lifeline watchdog go on, and reports test.sh's exit status, whether it was
  stopped instead of exiting, the processes still alive (those started during the tests marked ``new``)
  and — when any are alive — whether a reward file changed in a short window with them resumed. The host
  reads the reward files only then: no write after test.sh's exit can count.
* **A pytest plugin** (``verifier_kit/pytest_observer.py``) that any pytest the verifier starts loads from
  ``PYTHONPATH`` through an entry point (a pytest that cannot see it runs unchanged), reporting the
  session's start, its collected tests, each test as it starts, and its finish.

Both carry a per-run nonce (the kit's directory name, the plugin's module name), unknown to the policy
when it wrote its code; their reports are OSC 7717 sequences the terminal reader cuts out of the text
(engine/sandbox/terminal.py). What this covers and what it cannot is in docs/design/reward-integrity.md
("The policy's code").
"""

from __future__ import annotations

import base64
import io
import json
import re
import secrets
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

KIT = Path(__file__).parent / "verifier_kit"
#: Where the kit goes in the verifier's container: a directory named by the nonce, so nothing the
#: policy left can stand there already.
KIT_PARENT = "/run"
#: Seconds the processes alive at test.sh's exit get to show whether they write a reward file.
LATE_WINDOW_S = 0.3
#: Signals: an exit status 128+N with N up to this is a death by signal N (bash's convention).
_MAX_SIGNAL = 64


def new_nonce() -> str:
    return secrets.token_hex(8)


@dataclass(frozen=True)
class Kit:
    """One verifier run's kit: the wrapper and the pytest plugin, in ``/run/bandpass-<nonce>``."""

    nonce: str

    @property
    def dir(self) -> str:
        return f"{KIT_PARENT}/bandpass-{self.nonce}"

    @property
    def module(self) -> str:
        return f"bp_observer_{self.nonce}"

    def command(self, shell: str, script: str) -> str:
        """The line typed into the verifier's shell (its recording shows the test script it runs)."""
        return f". {self.dir}/verify {shell} {script}\n"

    def env(self, base: dict[str, str]) -> dict[str, str]:
        """``PYTHONPATH`` with the plugin's directory last (a task's own path still comes first)."""
        own = base.get("PYTHONPATH", "")
        return {**base, "PYTHONPATH": f"{own}:{self.dir}" if own else self.dir}

    def files(self) -> dict[str, tuple[bytes, int]]:
        """Path (relative to ``/``) -> (content, mode) of every file of the kit."""
        d = self.dir.lstrip("/")
        dist = f"{d}/{self.module}-1.0.dist-info"
        return {
            f"{d}/verify": ((KIT / "verify.sh").read_bytes(), 0o644),
            f"{d}/{self.module}.py": ((KIT / "pytest_observer.py").read_bytes(), 0o644),
            f"{dist}/METADATA": (
                f"Metadata-Version: 2.1\nName: bp-observer-{self.nonce}\nVersion: 1.0\n".encode(),
                0o644,
            ),
            f"{dist}/entry_points.txt": (f"[pytest11]\n{self.module} = {self.module}\n".encode(), 0o644),
        }

    def add_to(self, tar: tarfile.TarFile) -> None:
        """The kit's directories and files, owned by root, into an archive extracted at ``/``."""
        d = self.dir.lstrip("/")
        for sub in (d, f"{d}/{self.module}-1.0.dist-info"):
            info = tarfile.TarInfo(sub)
            info.type, info.mode = tarfile.DIRTYPE, 0o755
            tar.addfile(info)
        for name, (data, mode) in self.files().items():
            info = tarfile.TarInfo(name)
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))

    def archive(self) -> bytes:
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:
            self.add_to(tar)
        return buf.getvalue()


# --- what came back over the terminal ---------------------------------------------------------------

#: An observer report as the terminal reader hands it over: the text between ``ESC ] 7717 ;`` and BEL.
_REPORT = re.compile(r"([0-9a-f]{1,64});([A-Z]);(\d{1,10});(.*)", re.S)


@dataclass
class PytestSession:
    """One pytest session the plugin saw (one pytest process)."""

    pid: int
    collected: int | None = None
    collect_only: bool = False
    started_tests: int = 0
    last_test: str = ""
    finished: bool = False
    status: int | None = None
    ran: int | None = None  # tests that finished, as the session counted them at its end
    failed: int | None = None

    def problem(self) -> str:
        """Why this session did not judge the work ("" when it ran to its end): it never finished, or it
        finished with status 0 after fewer tests than it collected."""
        where = (
            f"the last test started: {self.last_test}"
            if self.last_test
            else (
                "while collecting, before any test ran" if self.collected is None else "before any test ran"
            )
        )
        if not self.finished:
            return f"the pytest session (pid {self.pid}) started and never finished ({where})"
        if (
            self.status == 0
            and not self.collect_only
            and self.collected is not None
            and self.ran is not None
            and self.ran < self.collected
        ):
            return (
                f"the pytest session (pid {self.pid}) ended with status 0 after {self.ran} of "
                f"{self.collected} collected tests ({where})"
            )
        return ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "pid": self.pid,
            "collected": self.collected,
            "collect_only": self.collect_only,
            "started_tests": self.started_tests,
            "last_test": self.last_test,
            "finished": self.finished,
            "status": self.status,
            "ran": self.ran,
            "failed": self.failed,
            "problem": self.problem(),
        }


@dataclass
class Alive:
    """A process alive when test.sh exited (besides init, the verifier's shell and the lifeline)."""

    pid: int
    new: bool  # started during the verifier run (else it was there before: a service kept in place)
    cmd: str

    def as_dict(self) -> dict[str, Any]:
        return {"pid": self.pid, "new": self.new, "cmd": self.cmd}


@dataclass
class Observation:
    """What the wrapper and the plugin reported for one verifier run."""

    exit_status: int | None = None  # test.sh's; None: the wrapper never reported (the shell died)
    stopped: bool = False  # test.sh was stopped by a signal instead of exiting
    waited: bool = False  # processes were alive at the exit: they got the late-write window
    late: list[str] = field(default_factory=list)  # "reward.txt:written" ...
    alive: list[Alive] = field(default_factory=list)
    sessions: list[PytestSession] = field(default_factory=list)
    foreign: int = 0  # reports with another nonce: something imitated the observer

    @property
    def reported(self) -> bool:
        return self.exit_status is not None

    def as_dict(self) -> dict[str, Any]:
        return {
            "exit_status": self.exit_status,
            "stopped": self.stopped,
            "alive": [a.as_dict() for a in self.alive],
            "late_writes": self.late,
            "late_window_s": LATE_WINDOW_S if self.waited else 0,
            "pytest_sessions": [s.as_dict() for s in self.sessions],
            "imitations": self.foreign,
        }


def observe(nonce: str, reports: list[str]) -> Observation:
    """The reports of one run (in the order the terminal showed them) as an :class:`Observation`; reports
    of another nonce are counted, never believed."""
    obs = Observation()
    live: dict[int, PytestSession] = {}
    for text in reports:
        m = _REPORT.fullmatch(text)
        if m is None or m.group(1) != nonce:
            obs.foreign += 1
            continue
        kind, pid = m.group(2), int(m.group(3))
        if kind == "X":
            _wrapper_report(obs, m.group(4))
            continue
        try:
            payload = json.loads(base64.b64decode(m.group(4), validate=True))
        except (ValueError, TypeError):
            obs.foreign += 1
            continue
        if not isinstance(payload, dict):
            obs.foreign += 1
            continue
        if kind == "S":
            live[pid] = PytestSession(pid)
            obs.sessions.append(live[pid])
            continue
        session = live.get(pid)
        if session is None:  # a report without its start: a session we cannot follow
            session = live[pid] = PytestSession(pid)
            obs.sessions.append(session)
        if kind == "C":
            session.collected = _int(payload.get("n"))
            session.collect_only = bool(payload.get("co"))
        elif kind == "T":
            session.started_tests += 1
            session.last_test = str(payload.get("id", ""))[:300]
        elif kind == "F":
            session.finished = True
            session.status = _int(payload.get("status"))
            session.ran = _int(payload.get("ran"))
            session.failed = _int(payload.get("failed"))
            live.pop(pid, None)
    return obs


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _wrapper_report(obs: Observation, text: str) -> None:
    fields = dict(part.partition("=")[::2] for part in text.split("|"))
    try:
        obs.exit_status = int(fields.get("rc", ""))
    except ValueError:
        obs.exit_status = -1
    obs.stopped = fields.get("stopped") == "1"
    obs.waited = fields.get("waited") == "1"
    obs.late = [x for x in fields.get("late", "").split() if x]
    obs.alive = []
    for entry in (e for e in fields.get("alive", "").split(",") if e):
        pid, _, rest = entry.partition("/")
        age, _, cmd = rest.partition("/")
        if pid.isdigit():
            obs.alive.append(Alive(int(pid), age == "new", cmd))


# --- the verdict ------------------------------------------------------------------------------------


def late_write(obs: Observation) -> str:
    """Why the reward read at test.sh's exit cannot be the verifier's: a process alive then wrote,
    created or removed a reward file afterwards ("" when none did)."""
    if not obs.late:
        return ""
    who = ", ".join(f"{a.pid} {a.cmd[:80]}" for a in obs.alive if a.new) or "a process still running"
    files = ", ".join(x.replace(":", " ") for x in obs.late)
    return (
        f"a reward file changed after tests/test.sh exited ({files}) while processes the tests started were "
        f"still running ({who}): the reward read at its exit may be theirs"
    )


def script_hijack(obs: Observation, reward: float | None) -> str:
    """Why the reward is not what test.sh left at its exit: test.sh was stopped by a signal instead of
    exiting, or died by one while a reward (> 0) was there; "" otherwise."""
    if obs.stopped:
        return (
            "tests/test.sh was stopped by a signal before it exited (the code under test stopped the "
            "verifier's script): whatever reward was there is not the verifier's"
        )
    if reward and reward > 0 and obs.exit_status is not None and 128 < obs.exit_status <= 128 + _MAX_SIGNAL:
        return (
            f"tests/test.sh did not exit on its own (status {obs.exit_status}: killed by signal "
            f"{obs.exit_status - 128}), yet reward {reward:g} was there: not what the verifier's own "
            "script left"
        )
    return ""


def session_hijack(obs: Observation, reward: float | None) -> str:
    """Why the verifier did not judge the work although it paid (``reward`` > 0): a pytest session it
    ran did not finish, or finished with status 0 short of its tests; "" otherwise."""
    if not reward or reward <= 0:
        return ""
    for session in obs.sessions:
        problem = session.problem()
        if problem:
            return f"the verifier paid reward {reward:g}, but {problem}: the tests never judged the work"
    return ""


__all__ = [
    "KIT",
    "LATE_WINDOW_S",
    "Alive",
    "Kit",
    "Observation",
    "PytestSession",
    "script_hijack",
    "session_hijack",
    "late_write",
    "new_nonce",
    "observe",
]
