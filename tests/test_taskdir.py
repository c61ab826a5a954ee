"""Loading, validating, hashing and discovering Harbor task directories (engine.tasks.taskdir)."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest

from engine.tasks.taskdir import (
    TaskInvalid,
    TaskProblem,
    find_task_dirs,
    is_harbor_dir,
    is_tb1_dir,
    load_task,
    task_files,
    validate_task,
    version_hash,
)

EXAMPLES = Path(__file__).resolve().parent.parent / "examples" / "tasks"

GOOD_TOML = """\
version = "1.0"

[metadata]
difficulty = "medium"
category = "debugging"
tags = ["python", "bugfix"]
author_name = "Someone"

[agent]
timeout_sec = 300

[verifier]
timeout_sec = 90.5

[environment]
build_timeout_sec = 120
cpus = 0.5
memory_mb = 512
pids_limit = 256
network_mode = "none"
workdir = "/srv/app"
"""


def make_task(
    root: Path, name: str = "demo", toml: str = GOOD_TOML, files: dict[str, str | None] | None = None
) -> Path:
    """A minimal valid task; ``files`` overrides contents by relative path, None leaves a file out."""
    d = root / name
    content: dict[str, str | None] = {
        "instruction.md": "Fix the thing in /srv/app.\n",
        "task.toml": toml,
        "environment/Dockerfile": "FROM debian:bookworm-slim\nWORKDIR /srv/app\n",
        "solution/solve.sh": "#!/bin/bash\necho fixed > /srv/app/out\n",
        "tests/test.sh": "#!/bin/bash\necho 1 > /logs/verifier/reward.txt\n",
    }
    content.update(files or {})
    for rel, text in content.items():
        if text is None:
            continue
        p = d / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if rel.endswith(".sh"):
            p.chmod(0o755)
    return d


def problems_of(path: Path) -> list[str]:
    return [str(p) for p in validate_task(path)]


# --- a valid task ------------------------------------------------------------------------------------


def test_valid_task_loads_with_typed_fields(tmp_path: Path) -> None:
    spec = load_task(make_task(tmp_path))
    assert spec.name == "demo"
    assert spec.instruction.startswith("Fix the thing")
    assert spec.agent_timeout_sec == 300.0
    assert spec.verifier_timeout_sec == 90.5
    assert spec.build_timeout_sec == 120.0
    assert spec.cpus == 0.5
    assert spec.memory_mb == 512
    assert spec.pids_limit == 256
    assert spec.network is False and spec.network_mode == "none"
    assert spec.workdir == "/srv/app"
    assert spec.docker_image is None
    assert spec.difficulty == "medium"
    assert spec.category == "debugging"
    assert spec.tags == ["python", "bugfix"]
    assert spec.metadata["author_name"] == "Someone"
    assert spec.raw["environment"]["memory_mb"] == 512
    assert spec.schema_version == "1.0"
    assert validate_task(spec.path) == []


def test_defaults_follow_harbor_except_network(tmp_path: Path) -> None:
    spec = load_task(make_task(tmp_path, toml=""))
    assert spec.verifier_timeout_sec == 600.0
    assert spec.build_timeout_sec == 600.0
    assert spec.cpus == 1.0
    assert spec.memory_mb == 2048
    assert spec.workdir == "/app"
    assert spec.network is False  # Bandpass: no network unless the task asks
    assert spec.difficulty is None and spec.tags == []


def test_task_name_from_toml_overrides_directory(tmp_path: Path) -> None:
    toml = '[task]\nname = "acme/log-report"\ndescription = "Aggregate logs"\n'
    spec = load_task(make_task(tmp_path, toml=toml))
    assert spec.name == "acme/log-report"
    assert spec.description == "Aggregate logs"


@pytest.mark.parametrize(
    ("env", "network", "mode"),
    [
        ('network_mode = "bridge"', True, "bridge"),
        ('network_mode = "public"', True, "bridge"),
        ('network_mode = "no-network"', False, "none"),
        ("allow_internet = true", True, "bridge"),
        ("allow_internet = false", False, "none"),
    ],
)
def test_network_settings(tmp_path: Path, env: str, network: bool, mode: str) -> None:
    spec = load_task(make_task(tmp_path, toml=f"[environment]\n{env}\n"))
    assert (spec.network, spec.network_mode) == (network, mode)


def test_host_network_is_refused(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml='[environment]\nnetwork_mode = "host"\n')
    assert any("[environment].network_mode" in p and "not allowed" in p for p in problems_of(d))


def test_contradicting_network_settings(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml='[environment]\nnetwork_mode = "none"\nallow_internet = true\n')
    assert problems_of(d) == [
        'task.toml: [environment].network_mode: "none" contradicts allow_internet = true'
    ]


def test_docker_image_makes_dockerfile_optional(tmp_path: Path) -> None:
    d = make_task(
        tmp_path,
        toml='[environment]\ndocker_image = "ghcr.io/acme/img:1"\n',
        files={"environment/Dockerfile": None},
    )
    spec = load_task(d)
    assert spec.docker_image == "ghcr.io/acme/img:1"
    assert spec.dockerfile is None


def test_harbor_keys_we_ignore_are_warnings_not_problems(tmp_path: Path) -> None:
    toml = '[environment]\nstorage = "10G"\ngpus = 0\n[verifier]\nuser = "root"\n'
    spec = load_task(make_task(tmp_path, toml=toml))
    assert "task.toml: [environment].storage is a Harbor setting Bandpass ignores" in spec.warnings
    assert len(spec.warnings) == 3


def test_storage_mb_is_the_disk_limit(tmp_path: Path) -> None:
    assert load_task(make_task(tmp_path / "a")).storage_mb == 10240  # Harbor's default
    spec = load_task(make_task(tmp_path / "b", toml="[environment]\nstorage_mb = 64\n"))
    assert spec.storage_mb == 64 and not spec.warnings


def test_legacy_memory_string(tmp_path: Path) -> None:
    spec = load_task(make_task(tmp_path, toml='[environment]\nmemory = "1G"\n'))
    assert spec.memory_mb == 1024


# --- malformed tasks: one test per case, asserting the message ----------------------------------------


def test_missing_files_each_reported(tmp_path: Path) -> None:
    d = make_task(tmp_path, files={"instruction.md": None, "tests/test.sh": None})
    assert problems_of(d) == [
        "instruction.md: missing (the prompt the agent is given)",
        "tests/test.sh: missing (the verifier that writes /logs/verifier/reward.txt)",
    ]


def test_missing_dockerfile(tmp_path: Path) -> None:
    d = make_task(tmp_path, files={"environment/Dockerfile": None})
    assert problems_of(d) == ["environment/Dockerfile: missing (and [environment].docker_image is not set)"]


def test_missing_solution(tmp_path: Path) -> None:
    d = make_task(tmp_path, files={"solution/solve.sh": None})
    assert problems_of(d) == ["solution/solve.sh: missing (the oracle solution the audit runs)"]


def test_missing_task_toml(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    (d / "task.toml").unlink()
    assert problems_of(d) == ["task.toml: missing"]


def test_bad_toml_reports_line(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml="[agent]\ntimeout_sec = 300\n\n[verifier\ntimeout_sec = 60\n")
    (msg,) = problems_of(d)
    assert msg.startswith("task.toml: invalid TOML: ")
    assert "line 4" in msg


def test_wrong_type(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml='[agent]\ntimeout_sec = "fast"\n')
    assert problems_of(d) == ['task.toml: [agent].timeout_sec: expected a number > 0, got "fast"']
    with pytest.raises(TaskInvalid) as info:
        load_task(d)
    assert info.value.problems == [
        TaskProblem("task.toml", "[agent].timeout_sec", 'expected a number > 0, got "fast"')
    ]


@pytest.mark.parametrize(
    ("toml", "expected"),
    [
        ("[verifier]\ntimeout_sec = 0\n", "task.toml: [verifier].timeout_sec: expected a number > 0, got 0"),
        (
            "[environment]\nmemory_mb = 512.5\n",
            "task.toml: [environment].memory_mb: expected an integer > 0, got 512.5",
        ),
        ("[environment]\ncpus = true\n", "task.toml: [environment].cpus: expected a number > 0, got true"),
        (
            '[environment]\nworkdir = "app"\n',
            'task.toml: [environment].workdir: expected an absolute path, got "app"',
        ),
        (
            '[metadata]\ntags = "python"\n',
            'task.toml: [metadata].tags: expected an array of strings, got "python"',
        ),
        (
            "[metadata]\ntags = [1, 2]\n",
            "task.toml: [metadata].tags: expected an array of strings, got an array [1, 2]",
        ),
        (
            '[environment]\nnetwork_mode = "wifi"\n',
            "task.toml: [environment].network_mode: expected one of "
            '"none", "no-network", "bridge", "public", "allowlist", got "wifi"',
        ),
        ("agent = 5\n", "task.toml: [agent]: expected a table, got 5"),
    ],
)
def test_wrong_types(tmp_path: Path, toml: str, expected: str) -> None:
    assert problems_of(make_task(tmp_path, toml=toml)) == [expected]


def test_bad_difficulty(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml='[metadata]\ndifficulty = "insane"\n')
    assert problems_of(d) == [
        'task.toml: [metadata].difficulty: expected one of "easy", "medium", "hard", got "insane"'
    ]


def test_non_executable_script(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    (d / "tests" / "test.sh").chmod(0o644)
    assert problems_of(d) == ["tests/test.sh: not executable (chmod +x)"]


def test_unknown_section(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml="[verfier]\ntimeout_sec = 60\n")
    known = "agent, environment, metadata, solution, task, verifier"
    assert problems_of(d) == [f"task.toml: [verfier]: unknown section (known: {known})"]


def test_unknown_key_in_known_section(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml="[agent]\ntimeout_secs = 60\n")
    assert problems_of(d) == [
        "task.toml: [agent].timeout_secs: unknown key (known: allowed_hosts, timeout_sec, user)"
    ]


def test_metadata_is_free_form(tmp_path: Path) -> None:
    spec = load_task(make_task(tmp_path, toml='[metadata]\nexpert_time_estimate_min = 5\nsource = "x"\n'))
    assert spec.metadata == {"expert_time_estimate_min": 5, "source": "x"}


def test_empty_instruction(tmp_path: Path) -> None:
    d = make_task(tmp_path, files={"instruction.md": "  \n\n"})
    assert problems_of(d) == ["instruction.md: is empty"]


def test_multiple_problems_reported_together(tmp_path: Path) -> None:
    d = make_task(
        tmp_path, toml='[agent]\ntimeout_sec = -1\n[metadata]\ndifficulty = "trivial"\n[extra]\nx = 1\n'
    )
    (d / "solution" / "solve.sh").chmod(0o644)
    (d / "environment" / "Dockerfile").unlink()
    (d / "instruction.md").write_text("")
    with pytest.raises(TaskInvalid) as info:
        load_task(d)
    got = [str(p) for p in info.value.problems]
    assert got == [
        "instruction.md: is empty",
        "task.toml: [extra]: unknown section (known: agent, environment, metadata, solution, task, verifier)",
        'task.toml: [metadata].difficulty: expected one of "easy", "medium", "hard", got "trivial"',
        "task.toml: [agent].timeout_sec: expected a number > 0, got -1",
        "environment/Dockerfile: missing (and [environment].docker_image is not set)",
        "solution/solve.sh: not executable (chmod +x)",
    ]
    text = str(info.value)
    assert "6 problems" in text and all(g in text for g in got)


def test_not_a_directory(tmp_path: Path) -> None:
    assert [p.message for p in validate_task(tmp_path / "nope")] == ["task directory does not exist"]


# --- version hash ------------------------------------------------------------------------------------


def test_hash_stable_across_copy_and_rename(tmp_path: Path) -> None:
    d = make_task(tmp_path / "a")
    h = version_hash(d)
    assert len(h) == 64
    copy = tmp_path / "b" / "renamed"
    shutil.copytree(d, copy)
    os.utime(copy / "instruction.md", (0, 0))
    assert version_hash(copy) == h


def test_hash_ignores_vcs_and_caches(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    h = version_hash(d)
    (d / ".git").mkdir()
    (d / ".git" / "HEAD").write_text("ref: refs/heads/main\n")
    (d / "tests" / "__pycache__").mkdir()
    (d / "tests" / "__pycache__" / "x.pyc").write_bytes(b"\0")
    (d / ".DS_Store").write_bytes(b"junk")
    assert version_hash(d) == h
    assert all(".git" not in p.parts and "__pycache__" not in p.parts for p in task_files(d))


def test_hash_changes_with_one_byte(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    h = version_hash(d)
    p = d / "tests" / "test.sh"
    data = bytearray(p.read_bytes())
    data[-2] ^= 1
    p.write_bytes(bytes(data))
    assert version_hash(d) != h


def test_hash_changes_with_exec_bit(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    h = version_hash(d)
    (d / "instruction.md").chmod(0o755)
    assert version_hash(d) != h


def test_hash_changes_when_file_moves(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    h = version_hash(d)
    (d / "tests" / "data.txt").write_text("x")
    h2 = version_hash(d)
    (d / "tests" / "data.txt").rename(d / "environment" / "data.txt")
    assert len({h, h2, version_hash(d)}) == 3


def test_task_files_sorted_relative_order(tmp_path: Path) -> None:
    d = make_task(tmp_path)
    rel = [p.relative_to(d).as_posix() for p in task_files(d)]
    assert rel == sorted(rel)
    assert rel == [
        "environment/Dockerfile",
        "instruction.md",
        "solution/solve.sh",
        "task.toml",
        "tests/test.sh",
    ]


# --- discovery ---------------------------------------------------------------------------------------


def test_find_task_dirs_does_not_descend_into_tasks(tmp_path: Path) -> None:
    a = make_task(tmp_path / "suite", "a")
    b = make_task(tmp_path / "suite" / "nested", "b")
    # a task-marker file inside a task (test fixture of a task-linting task) is not a separate task
    (a / "tests" / "fixture").mkdir()
    (a / "tests" / "fixture" / "task.toml").write_text("")
    tb1 = tmp_path / "suite" / "old" / "c"
    tb1.mkdir(parents=True)
    (tb1 / "task.yaml").write_text("instruction: hi\n")
    (tmp_path / "suite" / ".hidden" / "x").mkdir(parents=True)
    assert find_task_dirs(tmp_path) == sorted([a, b, tb1])
    assert find_task_dirs(a) == [a]
    assert is_harbor_dir(a) and not is_tb1_dir(a)
    assert is_tb1_dir(tb1) and not is_harbor_dir(tb1)


# --- examples ----------------------------------------------------------------------------------------


def test_all_examples_load() -> None:
    dirs = find_task_dirs(EXAMPLES)
    assert len(dirs) >= 8
    for d in dirs:
        spec = load_task(d)
        assert spec.warnings == [], (d, spec.warnings)
        assert spec.difficulty in ("easy", "medium", "hard")
        assert spec.network is False
        assert spec.workdir == "/app"
        df = (d / "environment" / "Dockerfile").read_text()
        assert df.startswith("FROM debian:bookworm-slim\n"), d
        for line in (d / "solution" / "solve.sh").read_text().splitlines():
            assert len(line) < 4000 and "\t" not in line, (d, line[:60])


def test_example_hashes_are_distinct() -> None:
    hashes = [version_hash(d) for d in find_task_dirs(EXAMPLES)]
    assert len(set(hashes)) == len(hashes)


def test_unknown_top_level_key(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml="timeout_sec = 5\n")
    assert problems_of(d) == [
        "task.toml: timeout_sec: unknown top-level key "
        "(known: artifacts, schema_version, source, version; settings belong in a section)"
    ]
