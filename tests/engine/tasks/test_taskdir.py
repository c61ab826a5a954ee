"""Loading, validating, hashing and discovering Harbor task directories (engine.tasks.taskdir)."""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path

import pytest

from bandpass.engine.tasks.taskdir import (
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
from tests.support.paths import EXAMPLES

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
network_mode = "no-network"
workdir = "/srv/app"
"""


def make_task(
    root: Path, name: str = "demo", toml: str = GOOD_TOML, files: Mapping[str, str | None] | None = None
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
    assert spec.network is False and spec.network_mode == "no-network"
    assert spec.workdir == "/srv/app" and spec.workdir_declared
    assert spec.warnings == [] and spec.unsupported == [] and spec.harbor_refusals == []
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
    # no workdir: the image's (Harbor's rule), read from the Dockerfile until the image is built
    assert spec.workdir == "/srv/app" and not spec.workdir_declared
    assert spec.network is False  # Bandpass: no network unless the task asks...
    assert spec.warnings == [
        "task.toml: [environment].network_mode: not set; Harbor would give it a public network, Bandpass "
        'runs it offline (set network_mode = "public" if it needs one)'
    ]
    assert spec.difficulty is None and spec.tags == []


def test_harbor_default_network_when_the_scripts_download(tmp_path: Path) -> None:
    """...and a task that says nothing but downloads in its own scripts relied on Harbor's public default."""
    test = (
        "#!/bin/bash\ncurl -LsSf https://astral.sh/uv/install.sh | sh\necho 1 > /logs/verifier/reward.txt\n"
    )
    spec = load_task(make_task(tmp_path, toml="", files={"tests/test.sh": test}))
    assert (spec.network, spec.network_mode) == (True, "public")
    assert spec.warnings == []  # Harbor runs it with a network too: nothing differs, nothing to say


def test_harbor_default_network_follows_the_scripts_test_sh_runs(tmp_path: Path) -> None:
    """The download may sit in a script test.sh sources or runs (tests/setup.sh): it is followed."""
    test = "#!/bin/bash\nsource /tests/setup.sh\nbash $TEST_DIR/run.sh\n"
    files = {
        "tests/test.sh": test,
        "tests/setup.sh": "#!/bin/bash\necho preparing\n",
        "tests/run.sh": "#!/bin/bash\npip install pytest\npytest /tests -rA\n",
    }
    spec = load_task(make_task(tmp_path, toml="", files=files))
    assert (spec.network, spec.network_mode, spec.warnings) == (True, "public", [])
    # a download only in a comment is no download
    files["tests/run.sh"] = "#!/bin/bash\n# pip install pytest (already in the image)\npytest /tests -rA\n"
    spec = load_task(make_task(tmp_path / "b", toml="", files=files))
    assert (spec.network, spec.network_mode) == (False, "no-network")


def test_task_name_from_toml_overrides_directory(tmp_path: Path) -> None:
    toml = '[task]\nname = "acme/log-report"\ndescription = "Aggregate logs"\n'
    spec = load_task(make_task(tmp_path, toml=toml))
    assert spec.name == "acme/log-report"
    assert spec.description == "Aggregate logs"


@pytest.mark.parametrize(
    ("env", "network", "mode"),
    [
        ('network_mode = "bridge"', True, "public"),  # Docker's spelling, read with a warning
        ('network_mode = "none"', False, "no-network"),
        ('network_mode = "public"', True, "public"),
        ('network_mode = "allowlist"', True, "allowlist"),
        ('network_mode = "no-network"', False, "no-network"),
        ("allow_internet = true", True, "public"),
        ("allow_internet = false", False, "no-network"),
    ],
)
def test_network_settings(tmp_path: Path, env: str, network: bool, mode: str) -> None:
    spec = load_task(make_task(tmp_path, toml=f"[environment]\n{env}\n"))
    assert (spec.network, spec.network_mode) == (network, mode)
    legacy = env.split('"')[1:2] in (["bridge"], ["none"])
    assert bool(spec.harbor_refusals) == legacy  # what Harbor's loader would refuse, Bandpass never writes
    if legacy:
        assert "Docker's spelling, which Harbor refuses" in spec.warnings[0]


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
    toml = (
        'network_mode = "x"\n[environment]\nnetwork_mode = "no-network"\nstorage = "10G"\ngpus = 0\n'
        'mcp_servers = []\n[verifier]\nuser = "tester"\ncollect = []\n[agent]\nallowed_hosts = ["a.io"]\n'
        'network_mode = "no-network"\n'
    )
    spec = load_task(make_task(tmp_path, toml=toml))
    assert spec.storage_mb == 10240
    # empty Harbor defaults (gpus = 0, mcp_servers = [], collect = []) ask for nothing, a deprecated
    # storage string is read as Harbor reads it, and the agent's network_mode equals the environment's:
    # no warning
    assert spec.warnings == [
        "task.toml: network_mode: not a Harbor key; kept, and ignored (Harbor ignores it too) "
        "(a key of [agent], [verifier], [environment])",
        "task.toml: [verifier].user: the verifier runs as the image's default user",
        "task.toml: [agent].allowed_hosts: no allowlist is enforced: the network is all or nothing",
    ]
    spec = load_task(make_task(tmp_path / "b", toml='[agent]\nnetwork_mode = "no-network"\n'))
    assert (
        "task.toml: [agent].network_mode: the agent gets the [environment] network setting" in spec.warnings
    )


def test_storage_mb_is_the_disk_limit(tmp_path: Path) -> None:
    assert load_task(make_task(tmp_path / "a")).storage_mb == 10240  # Harbor's default
    spec = load_task(
        make_task(tmp_path / "b", toml='[environment]\nstorage_mb = 64\nnetwork_mode = "public"\n')
    )
    assert spec.storage_mb == 64 and not spec.warnings


def test_legacy_memory_string(tmp_path: Path) -> None:
    """Read exactly as Harbor's loader reads it: "2GB" is refused there too, a non-string is dropped."""
    spec = load_task(make_task(tmp_path, toml='[environment]\nmemory = "1G"\n'))
    assert spec.memory_mb == 1024
    assert load_task(make_task(tmp_path / "b", toml="[environment]\nmemory = 512\n")).memory_mb == 2048
    assert problems_of(make_task(tmp_path / "c", toml='[environment]\nmemory = "2GB"\n')) == [
        'task.toml: [environment].memory: expected a size like "2G" or "512M", got "2GB"'
    ]
    assert problems_of(
        make_task(tmp_path / "d", toml='[environment]\nstorage = "1G"\nstorage_mb = 64\n')
    ) == ['task.toml: [environment].storage: "1G" (1024 MB) contradicts storage_mb = 64']


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


def test_missing_solution_is_a_warning(tmp_path: Path) -> None:
    """Harbor does not require a solution; the audit says what a task without one means."""
    spec = load_task(make_task(tmp_path, files={"solution/solve.sh": None}))
    assert not spec.has_solution
    assert spec.warnings == [
        "solution/solve.sh: missing: no reference solution, so the audit cannot prove the task solvable"
    ]


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
            '[environment]\nnetwork_mode = "wifi"\n',
            "task.toml: [environment].network_mode: expected one of "
            '"no-network", "public", "allowlist", got "wifi"',
        ),
        (
            '[verifier]\nenvironment_mode = "elsewhere"\n',
            'task.toml: [verifier].environment_mode: expected "shared" or "separate", got "elsewhere"',
        ),
        (
            '[task]\nname = "../../etc"\n',
            "task.toml: [task].name: \"../../etc\" is not 'org/name' "
            "(letters, digits, '.', '_', '-', one '/')",
        ),
        ("agent = 5\n", "task.toml: [agent]: expected a table, got 5"),
    ],
)
def test_wrong_types(tmp_path: Path, toml: str, expected: str) -> None:
    assert problems_of(make_task(tmp_path, toml=toml)) == [expected]


def test_free_form_metadata_values_we_cannot_use_are_silent(tmp_path: Path) -> None:
    """Harbor's metadata is free-form and drives nothing (harbor init writes difficulty = "unknown",
    Harbor's own Difficulty value): never a problem nor a warning; shown as unset, kept in the file."""
    toml = '[environment]\nnetwork_mode = "no-network"\n[metadata]\ndifficulty = "unknown"\ntags = "python"\n'
    spec = load_task(make_task(tmp_path, toml=toml))
    assert (spec.difficulty, spec.tags, spec.warnings) == (None, [], [])
    assert spec.metadata["difficulty"] == "unknown"


def test_windows_imports_as_unsupported(tmp_path: Path) -> None:
    """Harbor accepts os = "windows"; Bandpass imports it and says it cannot run it."""
    spec = load_task(make_task(tmp_path, toml='[environment]\nos = "windows"\n'))
    assert spec.unsupported == [
        'task.toml: [environment].os = "windows": Bandpass runs Linux containers only'
    ]


def test_scripts_need_no_exec_bit(tmp_path: Path) -> None:
    """Harbor and Bandpass run solve.sh and test.sh through bash."""
    d = make_task(tmp_path)
    (d / "tests" / "test.sh").chmod(0o644)
    (d / "solution" / "solve.sh").chmod(0o644)
    assert problems_of(d) == []


def test_unknown_section_is_a_warning_with_a_suggestion(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml='[verfier]\ntimeout_sec = 60\n[environment]\nnetwork_mode = "no-network"\n')
    assert load_task(d).warnings == [
        "task.toml: [verfier]: not a Harbor key; kept, and ignored (Harbor ignores it too) "
        "(did you mean verifier?)"
    ]


def test_unknown_key_in_known_section_is_a_warning(tmp_path: Path) -> None:
    """Harbor drops unknown keys silently; Bandpass keeps the task and says which key it means."""
    d = make_task(tmp_path, toml='[agent]\ntimeout_secs = 60\n[environment]\nnetwork_mode = "no-network"\n')
    spec = load_task(d)
    assert spec.agent_timeout_sec == 900.0  # the typo is not read, exactly as in Harbor
    assert spec.warnings == [
        "task.toml: [agent].timeout_secs: not a Harbor key; kept, and ignored (Harbor ignores it too) "
        "(did you mean timeout_sec?)"
    ]


def test_metadata_is_free_form(tmp_path: Path) -> None:
    spec = load_task(make_task(tmp_path, toml='[metadata]\nexpert_time_estimate_min = 5\nsource = "x"\n'))
    assert spec.metadata == {"expert_time_estimate_min": 5, "source": "x"}


def test_empty_instruction_is_a_warning(tmp_path: Path) -> None:
    spec = load_task(make_task(tmp_path, files={"instruction.md": "  \n\n"}))
    assert "instruction.md: is empty: the agent is given no prompt" in spec.warnings


def test_multiple_problems_reported_together(tmp_path: Path) -> None:
    d = make_task(
        tmp_path,
        toml='[agent]\ntimeout_sec = -1\n[environment]\ncpus = "two"\nworkdir = "app"\n[extra]\nx = 1\n',
    )
    (d / "environment" / "Dockerfile").unlink()
    (d / "tests" / "test.sh").unlink()
    with pytest.raises(TaskInvalid) as info:
        load_task(d)
    got = [str(p) for p in info.value.problems]
    assert got == [
        "task.toml: [agent].timeout_sec: expected a number > 0, got -1",
        'task.toml: [environment].cpus: expected a number > 0, got "two"',
        'task.toml: [environment].workdir: expected an absolute path, got "app"',
        "environment/Dockerfile: missing (and [environment].docker_image is not set)",
        "tests/test.sh: missing (the verifier that writes /logs/verifier/reward.txt)",
    ]
    text = str(info.value)
    assert "5 problems" in text and all(g in text for g in got)


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
        assert spec.warnings == [] and spec.harbor_refusals == [], (d, spec.warnings)
        assert spec.difficulty in ("easy", "medium", "hard")
        assert spec.network is False and spec.network_mode == "no-network"
        assert spec.workdir == "/app"
        df = (d / "environment" / "Dockerfile").read_text()
        assert df.startswith("FROM debian:bookworm-slim\n"), d
        for line in (d / "solution" / "solve.sh").read_text().splitlines():
            assert len(line) < 4000 and "\t" not in line, (d, line[:60])


def test_example_hashes_are_distinct() -> None:
    hashes = [version_hash(d) for d in find_task_dirs(EXAMPLES)]
    assert len(set(hashes)) == len(hashes)


def test_unknown_top_level_key(tmp_path: Path) -> None:
    d = make_task(tmp_path, toml='timeout_sec = 5\n[environment]\nnetwork_mode = "no-network"\n')
    assert problems_of(d) == []
    assert load_task(d).warnings == [
        "task.toml: timeout_sec: not a Harbor key; kept, and ignored (Harbor ignores it too) "
        "(a key of [agent], [verifier])"
    ]


def test_a_tasks_own_extension_keys_are_silent(tmp_path: Path) -> None:
    """107 of 122 public Harbor tasks carry [task] format/workstream: Harbor ignores them and so does
    Bandpass, so nothing differs and nothing is said. A key that looks like a Harbor key gone wrong is still
    said: the author's setting is lost in Harbor too."""
    toml = (
        '[task]\nname = "acme/x"\nformat = "harbor"\nworkstream = "ops"\n[environment]\n'
        'network_mode = "public"\nflavour = "x"\n[extra]\nnote = 1\n'
    )
    assert load_task(make_task(tmp_path / "a", toml=toml)).warnings == []
    typo = load_task(make_task(tmp_path / "b", toml='[environment]\nnetwork_mode = "public"\ncpu = 2\n'))
    assert typo.warnings == [
        "task.toml: [environment].cpu: not a Harbor key; kept, and ignored (Harbor ignores it too) "
        "(did you mean cpus?)"
    ]
