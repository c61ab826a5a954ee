"""The verifier: runs only after the agent is done, in a terminal of its own.

Where: by default in a clean room (engine/run/cleanroom.py: a fresh container with the artifacts carried
in), in place for a service task (the agent's container, its other processes killed). Order matters
(DESIGN.md): no agent process runs any more (a background loop cannot keep writing a reward),
``/logs/verifier`` is recreated empty (a reward the agent wrote is gone), ``tests/`` is copied in only now
(the agent never saw it), and ``tests/test.sh`` runs under its timeout in its own recorded pty, started
cleanly (:data:`SAFE_ENV`).

The verifier runs the policy's code (the artifacts are the solution), so it is watched from outside that
code (engine/run/observer.py): test.sh runs under a wrapper that stops every other process the moment it
exits, and a pytest plugin reports whether the test session it runs finished. The reward files are read
only then, by the one reading rule (engine/tasks/rewards.py): every key kept, one scalar. What the
policy's code could have left instead of the verifier's reward is the policy's outcome:
``agent_error:reward_forged`` (a reward file the task's tests never write, the two files disagreeing, a
reward file written after test.sh exited), ``agent_error:verifier_hijacked`` (test.sh stopped or killed,
or a pytest session that never finished, while the verifier paid).
"""

from __future__ import annotations

import contextlib
import io
import os
import tarfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from ..core.events import EventBus
from ..sandbox.asciicast import CastWriter
from ..sandbox.container import Sandbox, SandboxError
from ..sandbox.terminal import TerminalSession
from ..tasks import rewards
from ..tasks.taskdir import TaskSpec
from . import observer
from .cleanroom import add_tree
from .guard import VERIFIER_PATH
from .phases import start_failure_code
from .verifier_reports import pick_reports, save_reports

TESTS_DIR = "/tests"
LOGS_DIR = "/logs/verifier"
#: How long the verifier's bash may take to print its first prompt. The verifier runs once per episode and
#: a loaded machine (16 episodes on 2 cores) was seen to need more than the terminal's default 10 s.
START_TIMEOUT_S = 30.0
#: ``0`` runs the verifier without the wrapper and the pytest observer (bench/bench_defences.py measures
#: what they cost against exactly that); anything else, or unset, runs them.
OBSERVER_ENV = "BANDPASS_VERIFIER_OBSERVER"
#: Agent codes of a reward the policy's code, not the verifier, left (engine/core/outcomes.py).
REWARD_FORGED, VERIFIER_HIJACKED = "reward_forged", "verifier_hijacked"
#: Of each reward file, what the evidence keeps verbatim (the audit compares a hostile twin's own bytes).
_RAW_KEEP = 256


def observer_enabled() -> bool:
    return os.environ.get(OBSERVER_ENV, "1") != "0"


@dataclass
class VerifierResult:
    reward: float | None
    infra_code: str | None  # verifier_timeout | reward_missing | reward_unscored | container_died | oom | ...
    output: str  # the verifier terminal's text (the test log), capped
    detail: str = ""
    #: The policy's code, not the verifier, left this reward: ``reward_forged`` | ``verifier_hijacked``
    #: (the reward stays as evidence, the episode counts 0).
    agent_code: str | None = None
    #: Every key of reward.json (else ``{"reward": <reward.txt>}``): Harbor's ``rewards``.
    components: dict[str, float] = field(default_factory=dict)
    #: What the reading and the observer saw: test.sh's exit status, the files, the pytest sessions...
    evidence: dict[str, Any] = field(default_factory=dict)


def parse_reward(json_bytes: bytes | None, txt_bytes: bytes | None) -> tuple[float | None, str]:
    """(scalar, problem) by the reading rule (engine/tasks/rewards.py), for callers without a task."""
    reading = rewards.read(json_bytes, txt_bytes)
    return reading.reward, reading.problem


#: The verifier's environment, whatever the image or the policy left behind: a fixed PATH, no start-up
#: files for non-interactive shells (``BASH_ENV``, ``ENV``), no readline macros (``INPUTRC``); Python
#: never puts the working directory (or the script's) first on ``sys.path`` (``PYTHONSAFEPATH``:
#: ``python3 -m pytest`` or ``-c`` from the workdir would import a ``pytest.py``/``json.py`` there), runs
#: no ``PYTHONSTARTUP``; pytest loads no ``conftest.py`` above ``/tests`` (``--confcutdir``). A task's
#: ``[verifier] env`` still wins (it is the task's own).
SAFE_ENV = {
    "PATH": VERIFIER_PATH,
    "BASH_ENV": "",
    "ENV": "",
    "INPUTRC": "/dev/null",
    "PYTHONSAFEPATH": "1",
    "PYTHONSTARTUP": "",
    "PYTEST_ADDOPTS": "--confcutdir=/tests",
}
SHELLS = ("/bin/bash", "/usr/bin/bash")


def verifier_shell(client: docker.DockerClient, sandbox: Sandbox) -> str:
    """The image's bash by absolute path (never a PATH lookup, which a policy can shadow); the tamper guard
    flags any change to it. Asked of the engine, not of a program inside the container."""
    api = client.api
    for shell in SHELLS:
        url = api._url("/containers/{0}/archive", sandbox.id)  # type: ignore[attr-defined]  # docker-py private
        res = api.head(url, params={"path": shell})
        if res.status_code == 200:
            return shell
    return SHELLS[0]


def run_verifier(
    client: docker.DockerClient,
    sandbox: Sandbox,
    task: TaskSpec,
    *,
    recorder: CastWriter | None = None,
    bus: EventBus | None = None,
    episode_id: int | None = None,
    cols: int = 160,
    rows: int = 40,
    agent_stopped: bool = False,
    shell: str | None = None,
    prepared: bool = False,
    kit: observer.Kit | None = None,
    resume: bool = False,
    primary: str = "",
) -> VerifierResult:
    """``agent_stopped``: the caller already killed every agent process (the capture phase does, so it
    reads a still end state); only the logs and tests directories are then reset. ``prepared``: a fresh
    clean room whose ``/tests``, empty ``/logs/verifier`` and ``kit`` came with the artifacts (nothing to
    reset, nothing to copy). ``resume``: the verifier runs again on this container afterwards: what the
    tests started is killed and the rest resumed once the reward is read. ``primary``: the reward key the
    curator declared for this task (the task's own declaration is read from its ``task.toml``)."""
    if not observer_enabled():
        kit = None
    elif kit is None:
        kit = observer.Kit(observer.new_nonce())
    if not prepared:
        failed = _prepare(sandbox, task, agent_stopped, kit)
        if failed is not None:
            return failed

    env = {**SAFE_ENV, **task.verifier_env}
    term = TerminalSession(
        client,
        sandbox.container,
        cols=cols,
        rows=rows,
        recorder=recorder,
        bus=bus,
        episode_id=episode_id,
        stream="verifier",
        workdir=task.workdir,
        env=kit.env(env) if kit is not None else env,
        shell=shell or verifier_shell(client, sandbox),
        observe=kit is not None,
    )
    script = f"{TESTS_DIR}/test.sh"
    since = time.time()
    try:
        try:
            term.start(timeout=START_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any start failure is the container's
            return VerifierResult(
                None, start_failure_code(sandbox), "", f"verifier terminal did not start: {exc}"
            )
        line = kit.command(term.shell, script) if kit is not None else f"{term.shell} {script}\n"
        res = term.send_and_wait(line, timeout=task.verifier_timeout_sec, quiescence=1e9)
        output = term.recent_output(64 * 1024)
        if res.timed_out:
            term.interrupt()
            return VerifierResult(
                None, "verifier_timeout", output, f"tests/test.sh ran past {task.verifier_timeout_sec:g} s"
            )
        if not sandbox.is_running():
            if kit is not None and not res.completed and _ended_inside(client, sandbox, since):
                why = (
                    "the verifier's container ended while tests/test.sh ran, and not from outside (no kill "
                    "or out-of-memory from the engine): a process in it (the code under test) ended it"
                )
                ev = {"verdict": {"code": VERIFIER_HIJACKED, "why": why}}
                return VerifierResult(None, None, output, why, VERIFIER_HIJACKED, {}, ev)
            return _died(sandbox, output, "container stopped while the verifier ran")
        # the verifier's own shell gone while its container runs: only a process in there kills it, and
        # the one running then is what test.sh ran (a kill(-1, SIGKILL) from the code under test)
        shell_killed = (
            kit is not None
            and not res.completed
            and not term.alive
            and _signalled(client, term)
            # no kill, stop or out-of-memory event from the engine up to a second after it (a docker kill
            # lands before the exec it ends dies; the container may die next, its lifeline killed too)
            and _outside(client, sandbox, since) == []
        )
        try:  # read while every other process is stopped (the wrapper): nothing writes after test.sh
            files = sandbox.get_files(LOGS_DIR)
        except SandboxError as exc:
            return VerifierResult(None, exc.code, output, str(exc))
        if resume and kit is not None:
            term.run("__bp_resume", timeout=30)
        reports = term.reports()
    finally:
        term.close()

    if recorder is not None:  # a CTRF report beside the casts: the diagnosis reads failing checks from it
        with contextlib.suppress(OSError):
            save_reports(Path(recorder.path).parent, pick_reports(files))
    verdict = judge(task, files, output, res.exit_code, kit, reports, primary=primary)
    if shell_killed and verdict.agent_code is None:
        why = (
            "the verifier's own shell was killed while tests/test.sh ran, its container still running: "
            "a process in the container (the code under test) killed it"
        )
        verdict.evidence["verdict"] = {"code": VERIFIER_HIJACKED, "why": why}
        return VerifierResult(
            verdict.reward, None, output, why, VERIFIER_HIJACKED, verdict.components, verdict.evidence
        )
    return verdict


def judge(
    task: TaskSpec,
    files: dict[str, bytes],
    output: str,
    exit_code: int | None,
    kit: observer.Kit | None,
    reports: list[str],
    *,
    primary: str = "",
) -> VerifierResult:
    """The verifier's result from what ``/logs/verifier`` held when test.sh exited and what the observer
    reported: the policy's code caught leaving the reward (``reward_forged``, ``verifier_hijacked``), no
    valid reward (``reward_missing``, ``reward_unscored``: infra), or the reward with its components."""
    declared, _problems = rewards.declared(task.metadata)  # the loader reported problems
    reading = rewards.read(
        files.get(rewards.REWARD_JSON), files.get(rewards.REWARD_TXT), primary=declared.primary or primary
    )
    written = rewards.files_written(task.tests_dir, declared.files)  # a step: its merged tests
    obs = observer.observe(kit.nonce, reports) if kit is not None else None
    evidence: dict[str, Any] = {
        "reading": reading.as_dict(),
        "files": {
            name: files[name][:_RAW_KEEP].decode("utf-8", "replace")
            for name in rewards.REWARD_FILES
            if name in files
        },
        "tests_write": list(written) if written is not None else None,
        "exit_status": obs.exit_status if obs is not None and obs.reported else exit_code,
    }
    if obs is not None:
        evidence["observer"] = obs.as_dict()
    comps = reading.components

    def policy(code: str, why: str) -> VerifierResult:
        evidence["verdict"] = {"code": code, "why": why}
        return VerifierResult(reading.reward, None, output, why, code, comps, evidence)

    hijacked = observer.script_hijack(obs, reading.reward) if obs is not None else ""
    if hijacked:  # test.sh stopped, or killed with a reward there: it never left one of its own
        return policy(VERIFIER_HIJACKED, hijacked)
    forged = rewards.forgery(reading, written) or (observer.late_write(obs) if obs is not None else "")
    if forged:
        return policy(REWARD_FORGED, forged)
    hijacked = observer.session_hijack(obs, reading.reward) if obs is not None else ""
    if hijacked:
        return policy(VERIFIER_HIJACKED, hijacked)
    if reading.reward is None:
        code = "reward_unscored" if reading.unscored else "reward_missing"
        return VerifierResult(None, code, output, reading.problem, None, comps, evidence)
    status = evidence["exit_status"]
    detail = f"test.sh exit status {status}" + (f"; reward from {reading.source}" if len(comps) > 1 else "")
    return VerifierResult(reading.reward, None, output, detail, None, comps, evidence)


def _prepare(
    sandbox: Sandbox, task: TaskSpec, agent_stopped: bool, kit: observer.Kit | None
) -> VerifierResult | None:
    """Empties ``/logs/verifier`` and ``/tests``, copies the tests (and the kit) in; a result only on
    failure."""
    try:
        reset = f"rm -rf {LOGS_DIR} {TESTS_DIR} && mkdir -p {LOGS_DIR} {TESTS_DIR}"
        if agent_stopped:
            code, out = sandbox.exec(reset)
            if code != 0:
                return VerifierResult(
                    None, "reward_missing", out, f"could not prepare {LOGS_DIR}: {out.strip()}"
                )
        elif sandbox.kill_all_processes_except_init(then=reset) == "restart":
            code, out = sandbox.exec(reset)  # the restart path skipped ``then``
            if code != 0:
                return VerifierResult(
                    None, "reward_missing", out, f"could not prepare {LOGS_DIR}: {out.strip()}"
                )
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as tar:  # the tests and the kit: one round trip
            add_tree(tar, task.tests_dir, TESTS_DIR.strip("/"))  # a step: its tests over the task's
            if kit is not None:
                kit.add_to(tar)
        if not sandbox.container.put_archive("/", buf.getvalue()):
            raise SandboxError("container_died", "put_archive refused")
    except SandboxError as exc:
        return VerifierResult(None, exc.code, "", str(exc))
    except docker.errors.APIError as exc:
        return VerifierResult(None, "container_died", "", f"tests not copied in: {exc}")
    return None


def _signalled(client: docker.DockerClient, term: TerminalSession) -> bool:
    """The verifier's shell (the engine's exec) is over and died by a signal: not a dropped stream."""
    exec_id = getattr(term, "_exec_id", "") or ""
    try:
        info = client.api.exec_inspect(exec_id) if exec_id else {}
    except Exception:  # noqa: BLE001 - without the engine's word nothing is concluded
        return False
    code = info.get("ExitCode")
    return not info.get("Running") and isinstance(code, int) and 128 < code <= 192


#: The engine's events for a container that mean it was ended from outside (or for memory).
_OUTSIDE = ("kill", "stop", "oom")


def _outside(client: docker.DockerClient, sandbox: Sandbox, since: float) -> list[str] | None:
    """The engine's ``kill``/``stop``/``oom`` events for the container since ``since``, and Bandpass's own
    stops; None when the events cannot be read. Read to the next whole second (the API counts seconds)."""
    if sandbox.stopped_by_harness:
        return ["bandpass"]
    try:
        events = client.api.events(
            since=int(since) - 1, until=int(time.time()) + 1, filters={"container": sandbox.id}, decode=True
        )
        actions = [str(e.get("Action") or e.get("status") or "") for e in events]
    except Exception:  # noqa: BLE001 - without the engine's word nothing is concluded
        return None
    return [a for a in actions if a.startswith(_OUTSIDE)]


def _ended_inside(client: docker.DockerClient, sandbox: Sandbox, since: float) -> bool:
    """The container died with no ``kill``/``stop`` (``docker kill``/``stop``/removal, Bandpass's own
    included) nor ``oom`` from the engine since ``since``: its main process was ended from inside."""
    return not sandbox.oom_killed() and _outside(client, sandbox, since) == []


def _died(sandbox: Sandbox, output: str, detail: str) -> VerifierResult:
    code = "oom" if sandbox.oom_killed() else "container_died"
    return VerifierResult(None, code, output, detail)
