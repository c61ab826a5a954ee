"""Small Harbor task directories written by tests, for behaviours the examples do not show."""

from __future__ import annotations

from pathlib import Path

SOUND_TEST = """#!/bin/bash
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "42" ]; then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""


#: What a task writes (as ``verifier=``) to be verified in place: Bandpass's own opt-in (a table of its own,
#: which TOML allows right after the ``[verifier]`` lines).
IN_PLACE = '[metadata.bandpass]\nverify_mode = "in_place"'


def make_task(
    root: Path,
    name: str,
    *,
    instruction: str = "Write the number 42 into /app/answer.txt.",
    dockerfile: str = "FROM debian:bookworm-slim\nWORKDIR /app\n",
    solve: str = "#!/bin/bash\necho 42 > /app/answer.txt\n",
    test: str = SOUND_TEST,
    agent_timeout: float = 60,
    verifier_timeout: float = 30,
    memory_mb: int = 256,
    environment: str = "",
    verifier: str = "",
    top: str = "",
) -> Path:
    """``environment``: extra ``[environment]`` lines (``storage_mb = 32``, ``pids_limit = 64``);
    ``verifier``: extra ``[verifier]`` lines (``environment_mode = "shared"``: verified as a service;
    :data:`IN_PLACE`: in place, the task's own opt-in);
    ``top``: top-level keys (``artifacts = [...]``)."""
    d = root / name
    (d / "environment").mkdir(parents=True)
    (d / "solution").mkdir()
    (d / "tests").mkdir()
    (d / "instruction.md").write_text(instruction + "\n")
    (d / "task.toml").write_text(
        f"""version = "1.0"
{top}
[metadata]
difficulty = "easy"
category = "test"
tags = ["fixture"]

[agent]
timeout_sec = {agent_timeout}

[verifier]
timeout_sec = {verifier_timeout}
{verifier}

[environment]
build_timeout_sec = 120.0
cpus = 1
memory_mb = {memory_mb}
network_mode = "no-network"
workdir = "/app"
{environment}"""
    )
    (d / "environment" / "Dockerfile").write_text(dockerfile)
    for rel, text in (("solution/solve.sh", solve), ("tests/test.sh", test)):
        p = d / rel
        p.write_text(text)
        p.chmod(0o755)
    return d
