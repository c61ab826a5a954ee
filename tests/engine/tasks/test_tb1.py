"""Terminal-Bench 1 → Harbor conversion (engine.tasks.tb1)."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
import uuid
from pathlib import Path

import pytest

from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run.agents.builtin import builtin_agent
from bandpass.engine.run.episode import run_episode
from bandpass.engine.tasks.importer import import_paths
from bandpass.engine.tasks.taskdir import TaskInvalid, load_task, validate_task
from bandpass.engine.tasks.tb1 import convert_tb1
from bandpass.store import queries
from bandpass.store.db import session
from tests.support.paths import FIXTURES

FIXTURE = FIXTURES / "tb1" / "hello-world"
BASE_IMAGE = "bandpass/base:bookworm"


@pytest.fixture
def tb1(tmp_path: Path) -> Path:
    """A private copy of the fixture, so a test may edit it."""
    d = tmp_path / "src" / "hello-world"
    shutil.copytree(FIXTURE, d)
    return d


def test_fixture_converts_to_a_valid_harbor_task(tmp_path: Path) -> None:
    dst = tmp_path / "out" / "hello-world"
    spec = convert_tb1(FIXTURE, dst)
    assert validate_task(dst) == []
    rel = sorted(p.relative_to(dst).as_posix() for p in dst.rglob("*") if p.is_file())
    assert rel == [
        "environment/Dockerfile",
        "instruction.md",
        "solution/solve.sh",
        "task.toml",
        "tests/run-tests.sh",
        "tests/test.sh",
        "tests/test_outputs.py",
    ]
    assert spec.name == "hello-world"
    assert spec.instruction.startswith("Create a file called /app/hello.txt")
    assert (spec.agent_timeout_sec, spec.verifier_timeout_sec) == (120.0, 60.0)
    assert (spec.difficulty, spec.category, spec.tags) == (
        "easy",
        "file-operations",
        ["file-operations", "bash"],
    )
    assert spec.metadata["author_email"] == "tests@bandpass.invalid"
    assert spec.metadata["source"] == "terminal-bench-1"
    assert spec.workdir == "/app" and not spec.workdir_declared  # the image's WORKDIR, as TB1 ran it
    # TB1 gave every task a network; this one's scripts download nothing and run nothing it does not ship
    assert spec.network is False and spec.network_mode == "no-network"
    assert spec.warnings == [
        "network: Terminal-Bench gave every task a network; run-tests.sh and the solution (and every script "
        'they run) download nothing, so Bandpass runs it offline (network_mode = "public" gives it one)'
    ]
    assert spec.harbor_refusals == []
    assert (dst / "solution" / "solve.sh").read_text() == (FIXTURE / "solution.sh").read_text()
    assert (dst / "tests" / "run-tests.sh").read_text() == (FIXTURE / "run-tests.sh").read_text()
    assert not list(dst.parent.glob(".hello-world.*")), "staging directory left behind"


def test_generated_test_sh_writes_reward_from_pytest(tmp_path: Path) -> None:
    dst = tmp_path / "hello-world"
    convert_tb1(FIXTURE, dst)
    test_sh = (dst / "tests" / "test.sh").read_text()
    assert "export TEST_DIR=/tests" in test_sh
    assert 'bash "$TEST_DIR/run-tests.sh"' in test_sh
    assert "/logs/verifier/reward.txt" in test_sh
    assert "short test summary info" in test_sh
    assert (dst / "tests" / "test.sh").stat().st_mode & 0o111


def _run_test_sh(dst: Path, run_tests: str, tmp_path: Path) -> str:
    """Run the generated test.sh on this machine with paths redirected into tmp_path."""
    logs = tmp_path / "logs"
    tmp_path.mkdir(parents=True, exist_ok=True)
    script = (dst / "tests" / "test.sh").read_text()
    script = script.replace("/logs/verifier", str(logs)).replace(
        "export TEST_DIR=/tests", f"export TEST_DIR={dst / 'tests'}"
    )
    (dst / "tests" / "run-tests.sh").write_text(run_tests)
    subprocess.run(["bash", "-c", script], check=False, capture_output=True, timeout=60, cwd=tmp_path)
    return (logs / "reward.txt").read_text().strip()


@pytest.mark.parametrize(
    ("run_tests", "reward"),
    [
        # pytest -rA summary: all passed → 1
        ("echo '=== short test summary info ==='; echo 'PASSED t.py::a'; echo 'PASSED t.py::b'; exit 0", "1"),
        # a failure in the summary wins over a zero exit status (a script that ends in `echo done`)
        ("echo '=== short test summary info ==='; echo 'PASSED t.py::a'; echo 'FAILED t.py::b'; exit 0", "0"),
        ("echo '=== short test summary info ==='; echo 'ERROR t.py - ImportError'; exit 0", "0"),
        # Terminal-Bench's PytestTestStatus: SKIPPED and XFAIL count as passed, XPASS does not
        (
            "echo '=== short test summary info ==='; echo 'PASSED t.py::a'; "
            "echo 'SKIPPED [1] t.py:3: no GPU'; echo 'XFAIL t.py::c'; exit 0",
            "1",
        ),
        ("echo '=== short test summary info ==='; echo 'PASSED t.py::a'; echo 'XPASS t.py::b'; exit 0", "0"),
        # what its tmux pane showed carried no colour codes: a coloured summary reads the same
        (
            r"printf '\033[1m=== short test summary info ===\033[0m\n\033[32mPASSED\033[0m t.py::a\n'; "
            "exit 1",
            "1",
        ),
        # results are keyed by test name: a later line of the same name wins
        (
            "echo '=== short test summary info ==='; echo 'FAILED a.py::t - x'; echo 'PASSED b.py::t'; "
            "exit 1",
            "1",
        ),
        # without -rA an all-passing run prints no summary at all: Terminal-Bench scored it 0
        ("echo '==== 3 passed in 0.02s ===='; exit 0", "0"),
        # no summary is Terminal-Bench's parse failure: unsolved, whatever the exit status says
        ("echo ok; exit 0", "0"),
        ("echo broken; exit 3", "0"),
    ],
)
def test_reward_logic(tmp_path: Path, run_tests: str, reward: str) -> None:
    dst = tmp_path / "hello-world"
    convert_tb1(FIXTURE, dst)
    assert _run_test_sh(dst, run_tests, tmp_path) == reward


def test_older_descriptions_and_solution_yaml(tb1: Path, tmp_path: Path) -> None:
    (tb1 / "task.yaml").write_text(
        "descriptions:\n"
        "  - key: base\n    description: Say hello in /app/hello.txt\n"
        "  - key: hard\n    description: Say hello without echo\n"
        "author_email: a@b.c\ndifficulty: unknown\ntags: []\n"
    )
    (tb1 / "solution.sh").unlink()
    (tb1 / "solution.yaml").write_text(
        "- command: echo 'Hello, world!' > /app/hello.txt\n  min_timeout_sec: 0.1\n"
        "- command: vim /app/hello.txt\n  block: false\n"
    )
    spec = convert_tb1(tb1, tmp_path / "out")
    assert spec.instruction == "Say hello in /app/hello.txt\n"
    assert (spec.path / "solution" / "solve.sh").read_text().splitlines() == [
        "#!/bin/bash",
        "echo 'Hello, world!' > /app/hello.txt",
        "vim /app/hello.txt",
    ]
    assert spec.difficulty is None and spec.metadata["difficulty"] == "unknown"  # Harbor's own value: kept
    text = "\n".join(spec.warnings)
    assert "only the 'base' description was used; ignored hard" in text
    assert "difficulty" not in text
    assert "step 2 sends keystrokes" in text
    assert "max_agent_timeout_sec" not in text  # TB1's default, 360 s, as TB1 and Harbor's migrator use
    assert (spec.agent_timeout_sec, spec.verifier_timeout_sec) == (360.0, 60.0)
    # warnings persist in task.toml so a reload still shows them
    assert load_task(spec.path).metadata["conversion_warnings"] == spec.warnings


def test_compose_extras_become_warnings(tb1: Path, tmp_path: Path) -> None:
    (tb1 / "docker-compose.yaml").write_text(
        "services:\n"
        "  client:\n"
        "    build:\n      dockerfile: Dockerfile\n"
        "    image: ${T_BENCH_TASK_DOCKER_CLIENT_IMAGE_NAME}\n"
        "    environment:\n      - TEST_DIR=${T_BENCH_TEST_DIR}\n      - DB_HOST=db\n      - TOKEN=${TOKEN}\n"
        "    working_dir: /srv\n"
        "    deploy:\n      resources:\n        limits:\n          cpus: '2'\n          memory: 1G\n"
        "    ports:\n      - '8080:8080'\n"
        "    depends_on: [db]\n"
        "  db:\n    image: postgres:16\n"
        "networks:\n  default: {}\n"
    )
    spec = convert_tb1(tb1, tmp_path / "out")
    text = "\n".join(spec.warnings)
    # a service the tests may talk to cannot run here: the audit cannot judge such a task
    assert spec.unsupported == [
        "docker-compose.yaml: service db is not started: Bandpass runs a task in one container "
        "(tests that talk to them fail)"
    ]
    # carried as Harbor's own migrate carries them: ENV lines, the working directory, the limits
    assert 'ENV DB_HOST="db"' in (spec.path / "environment" / "Dockerfile").read_text()
    assert (spec.workdir, spec.workdir_declared, spec.cpus, spec.memory_mb) == ("/srv", True, 2.0, 1024)
    assert "environment variable TOKEN=${TOKEN} comes from the host; not carried over" in text
    assert "services.client.ports is not supported" in text
    assert "services.client.depends_on is not supported" in text
    assert "top-level 'networks' is not supported" in text


def test_downloads_in_run_tests_ask_for_network(tb1: Path, tmp_path: Path) -> None:
    (tb1 / "run-tests.sh").write_text(
        "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/0.7.13/install.sh | sh\nsource $HOME/.local/bin/env\n"
        "uv venv .tbench-testing\nuv pip install pytest==8.4.1\nuv run pytest $TEST_DIR/test_outputs.py -rA\n"
    )
    spec = convert_tb1(tb1, tmp_path / "out")
    # the network TB1 gave, as Harbor's migrator gives it: nothing differs, nothing to warn about
    assert (spec.network, spec.network_mode) == (True, "public")
    assert spec.warnings == []


DEVEVAL_RUN_TESTS = """#!/bin/bash
set -e
cd /app
source $TEST_DIR/setup-uv-pytest.sh
bash $TEST_DIR/run-uv-pytest.sh
"""
DEVEVAL_SETUP = """#!/bin/bash
apt-get update
apt-get install -y curl
curl -LsSf https://astral.sh/uv/install.sh | sh
source $HOME/.local/bin/env
uv init
uv add pytest
"""


def test_a_download_in_a_sourced_setup_script_gets_the_network(tb1: Path, tmp_path: Path) -> None:
    """1,000+ public TB1 tasks (deveval, ...) install pytest in tests/setup-uv-pytest.sh, which run-tests.sh
    sources: read alone, run-tests.sh downloads nothing, and the converted task used to run offline and
    score 0 on every episode."""
    (tb1 / "run-tests.sh").write_text(DEVEVAL_RUN_TESTS)
    (tb1 / "tests" / "setup-uv-pytest.sh").write_text(DEVEVAL_SETUP)
    (tb1 / "tests" / "run-uv-pytest.sh").write_text(
        "#!/bin/bash\nuv run pytest $TEST_DIR/test_outputs.py -rA\n"
    )
    spec = convert_tb1(tb1, tmp_path / "out")
    assert (spec.network, spec.network_mode, spec.warnings) == (True, "public", [])


def test_a_script_the_task_does_not_ship_keeps_tb1s_network(tb1: Path, tmp_path: Path) -> None:
    """Unsure is Terminal-Bench's default: a script from the image may download anything."""
    (tb1 / "run-tests.sh").write_text(
        "#!/bin/bash\nsource /opt/setup-tests.sh\npython3 -m pytest $TEST_DIR -rA\n"
    )
    spec = convert_tb1(tb1, tmp_path / "out")
    assert (spec.network, spec.warnings) == (True, [])


@pytest.mark.parametrize(
    ("run_uv_pytest", "warned"),
    [
        ("uv run pytest $TEST_DIR/test_outputs.py\n", True),
        ("python3 -m pytest -v -x tests/test_outputs.py\n", True),
        ("uv run pytest $TEST_DIR/test_outputs.py -rA\n", False),
        ("pytest -vrA $TEST_DIR\n", False),
        ("pytest -rp $TEST_DIR\n", False),
        ("pytest -ra $TEST_DIR  # -ra leaves passed tests out\n", True),
        ("pytest $PYTEST_FLAGS $TEST_DIR\n", False),  # unknown: its options come from a variable
    ],
)
def test_pytest_output_tb1s_parser_cannot_read_is_a_warning(
    tb1: Path, tmp_path: Path, run_uv_pytest: str, warned: bool
) -> None:
    """Without -rA a passing pytest run prints no short test summary: TB1 scored it 0 and so does the
    conversion (Harbor's migrator grades by exit status) — said at import, naming the script and command."""
    (tb1 / "run-tests.sh").write_text(DEVEVAL_RUN_TESTS)
    (tb1 / "tests" / "setup-uv-pytest.sh").write_text(DEVEVAL_SETUP)
    (tb1 / "tests" / "run-uv-pytest.sh").write_text("#!/bin/bash\n" + run_uv_pytest)
    spec = convert_tb1(tb1, tmp_path / "out")
    found = [w for w in spec.warnings if "pytest runs without -rA" in w]
    assert bool(found) is warned
    if warned:
        assert found[0].startswith("tests/run-uv-pytest.sh: pytest runs without -rA (")
        assert "Terminal-Bench scored every run 0" in found[0] and "exit status" in found[0]


def test_pytest_options_from_a_config_file_are_not_guessed(tb1: Path, tmp_path: Path) -> None:
    (tb1 / "run-tests.sh").write_text("#!/bin/bash\npython3 -m pytest $TEST_DIR/test_outputs.py\n")
    (tb1 / "tests" / "pytest.ini").write_text("[pytest]\naddopts = -rA\n")
    assert not any("-rA" in w for w in convert_tb1(tb1, tmp_path / "out").warnings)


def test_missing_run_tests_generates_one(tb1: Path, tmp_path: Path) -> None:
    (tb1 / "run-tests.sh").unlink()
    spec = convert_tb1(tb1, tmp_path / "out")
    assert "test_outputs.py" in (spec.path / "tests" / "run-tests.sh").read_text()
    assert any("run-tests.sh: missing" in w for w in spec.warnings)


def test_extra_context_files_go_to_environment(tb1: Path, tmp_path: Path) -> None:
    (tb1 / "data.csv").write_text("a,b\n")
    (tb1 / "Dockerfile").write_text("FROM debian:bookworm-slim\nWORKDIR /app\nCOPY data.csv /app/\n")
    spec = convert_tb1(tb1, tmp_path / "out")
    assert (spec.path / "environment" / "data.csv").read_text() == "a,b\n"
    assert not (spec.path / "environment" / "task.yaml").exists()
    assert not (spec.path / "environment" / "tests").exists()


def test_unusable_tb1_task_reports_all_problems(tb1: Path, tmp_path: Path) -> None:
    (tb1 / "task.yaml").write_text("instruction: ''\nmax_agent_timeout_sec: soon\nparser_name: go_test\n")
    (tb1 / "Dockerfile").unlink()
    dst = tmp_path / "out"
    with pytest.raises(TaskInvalid) as info:
        convert_tb1(tb1, dst)
    assert [str(p) for p in info.value.problems] == [
        "task.yaml: instruction: missing or empty",
        "task.yaml: max_agent_timeout_sec: expected a number > 0, got 'soon'",
        "task.yaml: parser_name: 'go_test' has no reward mapping in Bandpass (known: pytest, swebench); an "
        "exit status would pass unsolved work, so the task is not imported",
        "Dockerfile: missing (the task's image cannot be built)",
    ]
    assert not dst.exists()


def test_no_solution_imports_without_an_oracle(tb1: Path, tmp_path: Path) -> None:
    """Harbor's own migrate keeps such a task (40 of the 80 Terminal-Bench-DS tasks); the audit says what
    it means."""
    (tb1 / "solution.sh").unlink()
    spec = convert_tb1(tb1, tmp_path / "out")
    assert not spec.has_solution and not (spec.path / "solution").exists()
    assert any(w.startswith("solution/solve.sh: missing") for w in spec.warnings)


def test_build_context_is_the_task_root(tb1: Path, tmp_path: Path) -> None:
    """TB1 built from the task's root: what the Dockerfile copies from there must still be there."""
    (tb1 / "Dockerfile").write_text(
        "FROM debian:bookworm-slim AS gen\nCOPY tests/test_outputs.py /gen/\n"
        "FROM debian:bookworm-slim\nWORKDIR /app\nCOPY run-tests.sh /app/\n"
    )
    spec = convert_tb1(tb1, tmp_path / "out")
    env = spec.path / "environment"
    assert (env / "tests" / "test_outputs.py").is_file() and (env / "run-tests.sh").is_file()
    assert not (env / "solution.sh").exists() and not (env / "task.yaml").exists()
    assert any("copies run-tests.sh, tests from the task's root" in w for w in spec.warnings)


def test_compose_build_context_in_a_subfolder(tb1: Path, tmp_path: Path) -> None:
    """tasks-simple-web-scraper builds its client from client/: that folder is the build context."""
    (tb1 / "client").mkdir()
    (tb1 / "Dockerfile").rename(tb1 / "client" / "Dockerfile")
    (tb1 / "client" / "data.txt").write_text("x\n")
    (tb1 / "docker-compose.yaml").write_text("services:\n  client:\n    build:\n      context: client\n")
    spec = convert_tb1(tb1, tmp_path / "out")
    assert sorted(p.name for p in (spec.path / "environment").iterdir()) == ["Dockerfile", "data.txt"]


def test_swebench_parser_reads_the_result_block(tmp_path: Path) -> None:
    src = tmp_path / "src" / "sweb"
    shutil.copytree(FIXTURE, src)
    text = (src / "task.yaml").read_text().replace("parser_name: pytest", "parser_name: swebench")
    (src / "task.yaml").write_text(text)
    dst = tmp_path / "sweb"
    convert_tb1(src, dst)
    block = "echo 'SWEBench results starts here'; echo {}; echo 'SWEBench results ends here'; exit 0"
    assert _run_test_sh(dst, block.format("PASSED"), tmp_path / "a") == "1"
    assert _run_test_sh(dst, block.format("FAILED"), tmp_path / "b") == "0"
    # the block, stripped, must be exactly PASSED (its parser.py: block == "PASSED")
    assert _run_test_sh(dst, block.format("PASSED; echo 1 of 2 failed"), tmp_path / "d") == "0"
    # the adapter's parser.py exits 0 either way: without the block there is no solved run
    assert _run_test_sh(dst, "echo parser crashed; exit 0", tmp_path / "c") == "0"


def test_a_tests_run_tests_sh_of_its_own_is_kept(tb1: Path, tmp_path: Path) -> None:
    """livecodebenchpro ships tests/run-tests.sh beside the root one (599 tasks): the root one runs."""
    (tb1 / "tests" / "run-tests.sh").write_text("#!/bin/bash\necho mine\n")
    spec = convert_tb1(tb1, tmp_path / "out")
    assert (spec.path / "tests" / "run-tests.sh").read_text() == "#!/bin/bash\necho mine\n"
    assert (spec.path / "tests" / "tb1-run-tests.sh").read_text() == (FIXTURE / "run-tests.sh").read_text()
    assert 'bash "$TEST_DIR/tb1-run-tests.sh"' in (spec.path / "tests" / "test.sh").read_text()


def test_refuses_to_overwrite(tmp_path: Path) -> None:
    dst = tmp_path / "out"
    dst.mkdir()
    (dst / "keep.txt").write_text("x")
    with pytest.raises(FileExistsError):
        convert_tb1(FIXTURE, dst)
    assert (dst / "keep.txt").read_text() == "x"


def test_not_a_tb1_task(tmp_path: Path) -> None:
    with pytest.raises(TaskInvalid, match="task.yaml: missing"):
        convert_tb1(tmp_path, tmp_path / "out")


# --- in Docker ---------------------------------------------------------------------------------------


def _docker_ready() -> bool:
    if shutil.which("docker") is None:
        return False
    probe = subprocess.run(["docker", "image", "inspect", BASE_IMAGE], capture_output=True, check=False)
    return probe.returncode == 0


def _sh(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    return subprocess.run(list(args), capture_output=True, text=True, check=check, timeout=timeout)


@pytest.mark.docker
def test_converted_task_runs_in_docker(tmp_path: Path) -> None:
    """Oracle → reward 1, nothing done → reward 0, on the real image (FROM aliased by hand here)."""
    if not _docker_ready():
        pytest.fail(f"needs a Docker engine with {BASE_IMAGE} (scripts/test provides both)")
    dst = tmp_path / "hello-world"
    convert_tb1(FIXTURE, dst)
    ctx = tmp_path / "ctx"
    shutil.copytree(dst / "environment", ctx)
    df = (ctx / "Dockerfile").read_text().replace("FROM debian:bookworm-slim", f"FROM {BASE_IMAGE}")
    (ctx / "Dockerfile").write_text(df)
    tag = f"bandpass-test-tb1-{uuid.uuid4().hex[:10]}"
    containers: list[str] = []
    try:
        _sh("docker", "build", "-q", "--network", "host", "-t", tag, str(ctx), timeout=300)
        rewards = {}
        for mode in ("oracle", "nop"):
            cid = _sh("docker", "run", "-d", "--network", "none", tag, "sleep", "infinity").stdout.strip()
            containers.append(cid)
            if mode == "oracle":
                _sh("docker", "cp", str(dst / "solution"), f"{cid}:/solution")
                _sh("docker", "exec", "-w", "/app", cid, "bash", "/solution/solve.sh")
                _sh("docker", "exec", cid, "rm", "-rf", "/solution")
            _sh("docker", "exec", cid, "mkdir", "-p", "/logs/verifier")
            _sh("docker", "cp", str(dst / "tests"), f"{cid}:/tests")
            _sh("docker", "exec", cid, "bash", "/tests/test.sh", check=False)
            rewards[mode] = _sh("docker", "exec", cid, "cat", "/logs/verifier/reward.txt").stdout.strip()
        assert rewards == {"oracle": "1", "nop": "0"}
        with open(dst / "task.toml", "rb") as fh:
            assert tomllib.load(fh)["environment"]["network_mode"] == "no-network"
    finally:
        for cid in containers:
            _sh("docker", "rm", "-f", cid, check=False)
        _sh("docker", "rmi", "-f", tag, check=False)


_NEEDS_NETWORK_TEST = '''

def test_the_network_terminal_bench_gave():
    """Terminal-Bench ran every task on a network: this task's tests rely on it."""
    import os

    assert [n for n in os.listdir("/sys/class/net") if n != "lo"], "no network interface"
'''


@pytest.mark.docker
def test_tb1_conversions_grade_as_terminal_bench_did(workspace: Workspace, tmp_path: Path) -> None:
    """Imported and run for real (oracle and nop episodes, the clean room, real Docker):

    - ``sourced``: pytest comes from a setup script run-tests.sh sources (deveval's layout) and the tests
      rely on the network TB1 gave. Read alone, run-tests.sh downloads nothing: the task used to run
      offline and score 0 on every episode, the oracle's too. Now oracle 1, nop 0.
    - ``no-ra``: run-tests.sh runs pytest without -rA. Warned at import; every run scores 0, the oracle's
      too, exactly as Terminal-Bench scored it (its parser finds no summary in a passing run).
    """
    sourced = tmp_path / "src" / "sourced"
    shutil.copytree(FIXTURE, sourced)
    (sourced / "run-tests.sh").write_text(
        "#!/bin/bash\nsource $TEST_DIR/setup-pytest.sh\nbash $TEST_DIR/run-pytest.sh\n"
    )
    (sourced / "tests" / "setup-pytest.sh").write_text(
        "#!/bin/bash\n# the image has pytest already; else fetch uv, as deveval's setup does\n"
        "if ! python3 -m pytest --version >/dev/null 2>&1; then\n"
        "  curl -LsSf https://astral.sh/uv/install.sh | sh\nfi\n"
    )
    (sourced / "tests" / "run-pytest.sh").write_text(
        "#!/bin/bash\npython3 -m pytest $TEST_DIR/test_outputs.py -rA\n"
    )
    with (sourced / "tests" / "test_outputs.py").open("a") as fh:
        fh.write(_NEEDS_NETWORK_TEST)
    no_ra = tmp_path / "src" / "no-ra"
    shutil.copytree(FIXTURE, no_ra)
    (no_ra / "run-tests.sh").write_text("#!/bin/bash\npython3 -m pytest -v $TEST_DIR/test_outputs.py\n")

    report = import_paths(workspace, [sourced, no_ra])
    assert report.ok, [i.problems for i in report.items]
    items = {i.name: i for i in report.items}
    assert not any("-rA" in w for w in items["sourced"].warnings)
    assert [w for w in items["no-ra"].warnings if "pytest runs without -rA" in w] == [
        "run-tests.sh: pytest runs without -rA ('python3 -m pytest -v $TEST_DIR/test_outputs.py'): "
        "Terminal-Bench's parser reads passed tests from pytest's short test summary, which then lists none, "
        "so Terminal-Bench scored every run 0, even one where all tests pass; Bandpass grades it as "
        "Terminal-Bench did (Harbor's migrator grades run-tests.sh's exit status instead)"
    ]
    with session(workspace.engine) as s:
        versions = {r.name: r.version_id for r in queries.task_rows(s)}
    rewards = {
        (name, agent): run_episode(workspace, versions[name], builtin_agent(agent)).reward
        for name in ("sourced", "no-ra")
        for agent in ("oracle", "nop")
    }
    assert rewards == {
        ("sourced", "oracle"): 1.0,
        ("sourced", "nop"): 0.0,
        ("no-ra", "oracle"): 0.0,
        ("no-ra", "nop"): 0.0,
    }
