"""The verifier: runs only after the agent is done, in a terminal of its own.

Where: by default in a clean room (engine/run/cleanroom.py: a fresh container with the artifacts carried
in), in place for a service task (the agent's container, its other processes killed). Order matters
(DESIGN.md): no agent process runs any more (a background loop cannot keep writing a reward),
``/logs/verifier`` is recreated empty (a reward the agent wrote is gone), ``tests/`` is copied in only now
(the agent never saw it), and ``tests/test.sh`` runs under its timeout in its own recorded pty, started
cleanly (:data:`SAFE_ENV`). The reward is then read back from the file, ``reward.json`` first, then
``reward.txt``.
"""

from __future__ import annotations

import contextlib
import json
import math
from dataclasses import dataclass
from pathlib import Path

import docker

from bandpass.engine.core.events import EventBus
from bandpass.engine.run.guard import VERIFIER_PATH
from bandpass.engine.run.phases import start_failure_code
from bandpass.engine.run.verifier_reports import pick_reports, save_reports
from bandpass.engine.sandbox.asciicast import CastWriter
from bandpass.engine.sandbox.container import Sandbox, SandboxError
from bandpass.engine.sandbox.terminal import TerminalSession
from bandpass.engine.tasks.taskdir import TaskSpec

TESTS_DIR = "/tests"
LOGS_DIR = "/logs/verifier"
#: How long the verifier's bash may take to print its first prompt. The verifier runs once per episode and
#: a loaded machine (16 episodes on 2 cores) was seen to need more than the terminal's default 10 s.
START_TIMEOUT_S = 30.0


@dataclass
class VerifierResult:
    reward: float | None
    infra_code: str | None  # verifier_timeout | reward_missing | container_died | oom | env_start_timeout
    output: str  # the verifier terminal's text (the test log), capped
    detail: str = ""


def parse_reward(json_bytes: bytes | None, txt_bytes: bytes | None) -> tuple[float | None, str]:
    """Returns (reward, problem). ``reward.json`` is ``{"reward": x}`` or a single numeric value."""
    if json_bytes is not None:
        try:
            data = json.loads(json_bytes.decode("utf-8"))
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            return None, f"reward.json is not valid JSON ({exc})"
        value = data.get("reward") if isinstance(data, dict) else data
        if isinstance(data, dict) and value is None and len(data) == 1:
            value = next(iter(data.values()))
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            return None, f'reward.json: expected {{"reward": <number>}}, got {json_bytes[:80]!r}'
        return float(value), ""
    if txt_bytes is not None:
        text = txt_bytes.decode("utf-8", "replace").strip()
        try:
            value = float(text)
        except ValueError:
            return None, f"reward.txt: expected a number, got {text[:80]!r}"
        if not math.isfinite(value):
            return None, f"reward.txt: expected a finite number, got {text[:80]!r}"
        return value, ""
    return None, f"neither {LOGS_DIR}/reward.json nor reward.txt was written"


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
) -> VerifierResult:
    """``agent_stopped``: the caller already killed every agent process (the capture phase does, so it
    reads a still end state); only the logs and tests directories are then reset. ``prepared``: a fresh
    clean room whose ``/tests`` and empty ``/logs/verifier`` came with the artifacts (nothing to reset)."""
    if not prepared:
        failed = _prepare(sandbox, task, agent_stopped)
        if failed is not None:
            return failed

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
        env={**SAFE_ENV, **task.verifier_env},
        shell=shell or verifier_shell(client, sandbox),
    )
    try:
        try:
            term.start(timeout=START_TIMEOUT_S)
        except Exception as exc:  # noqa: BLE001 - any start failure is the container's
            return VerifierResult(
                None, start_failure_code(sandbox), "", f"verifier terminal did not start: {exc}"
            )
        res = term.send_and_wait(
            f"{term.shell} {TESTS_DIR}/test.sh\n", timeout=task.verifier_timeout_sec, quiescence=1e9
        )
        output = term.recent_output(64 * 1024)
        if res.timed_out:
            term.interrupt()
            return VerifierResult(
                None, "verifier_timeout", output, f"tests/test.sh ran past {task.verifier_timeout_sec:g} s"
            )
        if not sandbox.is_running():
            return _died(sandbox, output, "container stopped while the verifier ran")
    finally:
        term.close()

    try:
        files = sandbox.get_files(LOGS_DIR)
        reward, problem = parse_reward(files.get("reward.json"), files.get("reward.txt"))
    except SandboxError as exc:
        return VerifierResult(None, exc.code, output, str(exc))
    if recorder is not None:  # a CTRF report beside the casts: the diagnosis reads failing checks from it
        with contextlib.suppress(OSError):
            save_reports(Path(recorder.path).parent, pick_reports(files))
    if reward is None:
        return VerifierResult(None, "reward_missing", output, problem)
    return VerifierResult(reward, None, output, f"test.sh exit status {res.exit_code}")


def _prepare(sandbox: Sandbox, task: TaskSpec, agent_stopped: bool) -> VerifierResult | None:
    """Empties ``/logs/verifier`` and ``/tests`` and copies the tests in; a result only on failure."""
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
        sandbox.put_dir(Path(task.path) / "tests", TESTS_DIR)
    except SandboxError as exc:
        return VerifierResult(None, exc.code, "", str(exc))
    return None


def _died(sandbox: Sandbox, output: str, detail: str) -> VerifierResult:
    code = "oom" if sandbox.oom_killed() else "container_died"
    return VerifierResult(None, code, output, detail)
