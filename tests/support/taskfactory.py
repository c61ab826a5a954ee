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


#: A sidecar for compose tests: a tiny HTTP server built FROM the base image, answering ``/token`` with a
#: token it draws when it starts (so only an agent that asked this episode's server knows it).
TOKEN_SERVER = """import http.server, secrets
TOKEN = secrets.token_hex(8)
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open("/srv/requests.log", "a") as log:
            log.write(self.path + "\\n")
        body = TOKEN.encode() if self.path == "/token" else b"not found"
        self.send_response(200 if self.path == "/token" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
http.server.ThreadingHTTPServer(("", 8000), Handler).serve_forever()
"""
FETCH = (
    'python3 -c "import urllib.request; '
    "print(urllib.request.urlopen('http://api:8000/token', timeout=5).read().decode())\""
)
TOKEN_TEST = f"""#!/bin/bash
mkdir -p /logs/verifier
want=$({FETCH})
if [ -n "$want" ] && [ "$(cat /app/answer.txt 2>/dev/null)" = "$want" ]
then echo 1 > /logs/verifier/reward.txt
else echo 0 > /logs/verifier/reward.txt; fi
"""
SIDECAR_COMPOSE = """services:
  main:
    depends_on:
      api:
        condition: service_healthy
    environment:
      API_URL: http://api:8000
  api:
    build:
      context: ./api
    healthcheck:
      test: ["CMD", "python3", "-c", "import socket; socket.create_connection(('localhost', 8000), 2)"]
      interval: 1s
      timeout: 3s
      retries: 30
"""


def make_compose_task(root: Path, name: str, *, compose: str = SIDECAR_COMPOSE, **kw: object) -> Path:
    """A task whose answer only its sidecar knows: the agent and the verifier both ask ``http://api:8000``."""
    d = make_task(
        root,
        name,
        instruction="Ask the API at $API_URL/token for a token and write it into /app/answer.txt.",
        dockerfile="FROM bandpass/base:bookworm\nWORKDIR /app\n",
        solve=f"#!/bin/bash\n{FETCH} > /app/answer.txt\n",
        test=TOKEN_TEST,
        **kw,  # type: ignore[arg-type]
    )
    (d / "environment" / "api").mkdir()
    (d / "environment" / "api" / "server.py").write_text(TOKEN_SERVER)
    (d / "environment" / "api" / "Dockerfile").write_text(
        'FROM bandpass/base:bookworm\nCOPY server.py /srv/server.py\nCMD ["python3", "/srv/server.py"]\n'
    )
    (d / "environment" / "docker-compose.yaml").write_text(compose)
    return d


def make_steps_task(
    root: Path,
    name: str,
    *,
    first_solve: str = "#!/bin/bash\nprintf 'hello\\n' > /app/greet.txt\n",
    first_min_reward: float | None = 1.0,
    strategy: str = "",
    verifier: str = "",
) -> Path:
    """A two-step task (Harbor's ``[[steps]]``, schema 1.1) in the cookbook's shape: step ``write`` asks for
    /app/greet.txt, step ``extend`` gets a ``workdir/`` file and a ``setup.sh``, a healthcheck, a verifier
    env, and a test that sources the task's shared ``tests/helpers.sh``."""
    d = root / name
    (d / "environment").mkdir(parents=True)
    (d / "environment" / "Dockerfile").write_text("FROM bandpass/base:bookworm\nWORKDIR /app\n")
    (d / "tests").mkdir()
    (d / "tests" / "helpers.sh").write_text(
        "pass() { echo 1 > /logs/verifier/reward.txt; exit 0; }\n"
        "fail() { echo 0 > /logs/verifier/reward.txt; exit 0; }\n"
    )
    steps = {
        "write": (
            "Write the line `hello` into /app/greet.txt.",
            first_solve,
            '#!/bin/bash\nsource /tests/helpers.sh\n[ "$(cat /app/greet.txt)" = hello ] && pass\nfail\n',
        ),
        "extend": (
            "Append the name in /app/name.txt to /app/greet.txt as a second line.",
            "#!/bin/bash\ncat /app/name.txt >> /app/greet.txt\n",
            "#!/bin/bash\nsource /tests/helpers.sh\n"
            '[ "$(sed -n 2p /app/greet.txt)" = "$EXPECTED" ]'
            ' && [ "$(cat /tests/expected.txt)" = "$EXPECTED" ]'
            " && [ ! -e /app/setup.sh ] && pass\nfail\n",
        ),
    }
    for step, (instruction, solve, test) in steps.items():
        sd = d / "steps" / step
        (sd / "solution").mkdir(parents=True)
        (sd / "tests").mkdir()
        (sd / "instruction.md").write_text(instruction + "\n")
        (sd / "solution" / "solve.sh").write_text(solve)
        (sd / "tests" / "test.sh").write_text(test)
    (d / "steps" / "extend" / "tests" / "expected.txt").write_text("Harbor\n")
    (d / "steps" / "extend" / "workdir").mkdir()
    (d / "steps" / "extend" / "workdir" / "name.txt").write_text("  Harbor  \n")
    (d / "steps" / "extend" / "workdir" / "setup.sh").write_text(
        "set -e\nname=$(tr -d '[:space:]' < /app/name.txt)\n"
        'printf \'%s\\n\' "$name" > /app/name.txt\nrm -- "$0"\n'
    )
    min_reward = f"min_reward = {first_min_reward}\n" if first_min_reward is not None else ""
    (d / "task.toml").write_text(
        f"""schema_version = "1.1"
{f'multi_step_reward_strategy = "{strategy}"' if strategy else ""}

[task]
name = "test/{name}"

[agent]
timeout_sec = 60.0

[verifier]
timeout_sec = 30.0
{verifier}

[environment]
build_timeout_sec = 120.0
memory_mb = 256
network_mode = "no-network"
workdir = "/app"

[[steps]]
name = "write"
{min_reward}
[steps.agent]
timeout_sec = 30.0

[steps.verifier]
timeout_sec = 20.0

[[steps]]
name = "extend"

[steps.verifier]
timeout_sec = 20.0

[steps.verifier.env]
EXPECTED = "Harbor"

[steps.healthcheck]
command = "test -f /app/greet.txt"
interval_sec = 0.2
retries = 3
"""
    )
    return d
