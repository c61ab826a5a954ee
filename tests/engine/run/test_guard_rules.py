"""The tamper guard's rules on change lists: what honest work leaves must not trip (no Docker needed;
tests/engine/run/test_guard.py runs every rule in real containers)."""

from __future__ import annotations

from bandpass.engine.run import guard
from bandpass.engine.run.endstate import Change
from bandpass.engine.run.guard import Finding
from bandpass.engine.tasks.allowances import Allowances

EP = "/usr/local/lib/python3.11/dist-packages/evil-1.0.dist-info/entry_points.txt"
IMAGE = {"/usr/bin/cat", "/usr/bin/python3", "/usr/lib/python3/dist-packages/pytest"}


def _check(
    *changes: Change, contents: dict[str, bytes] | None = None, allow: Allowances | None = None
) -> list[Finding]:
    return guard.check(changes, exists_in_image=IMAGE.__contains__, contents=contents, allow=allow)


def test_honest_leftovers_do_not_trip() -> None:
    findings = _check(
        Change("/app/.git/config", "added", "file", archived=True),
        Change("/app/.git/hooks/pre-commit.sample", "added", "file"),
        Change("/usr/lib/python3.11/__pycache__/json.cpython-311.pyc", "modified", "file"),
        Change("/usr/local/lib/python3.11/dist-packages/__pycache__", "added", "dir"),
        Change("/usr/local/lib/python3.11/dist-packages/requests", "added", "dir"),
        Change("/usr/local/lib/python3.11/dist-packages/requests-2.0.dist-info", "added", "dir"),
        Change("/usr/local/bin/newtool", "added", "file"),
        Change("/usr/bin", "modified", "dir"),
        Change("/app/old.txt", "deleted"),
        contents={"/app/.git/config": b"[core]\n\trepositoryformatversion = 0\n\tbare = false\n"},
    )
    assert findings == []


def test_subtle_hooks_trip() -> None:
    findings = _check(
        Change("/app/.git/config", "modified", "file", archived=True),
        Change(
            "/usr/local/lib/python3.11/dist-packages/evil-1.0.dist-info/entry_points.txt", "added", "file"
        ),
        Change("/usr/local/lib/python3.11/dist-packages/pytest", "added", "dir"),
        Change("/usr/local/bin/cat", "added", "symlink", link="/tmp/x"),
        Change("/etc/ld.so.cache", "modified", "file"),
        contents={
            "/app/.git/config": b"[core]\n\tfsmonitor = /tmp/run-me\n",
            EP: b"[pytest11]\nx = x\n",
        },
    )
    assert {(f.rule, f.path) for f in findings} == {
        ("git_hook", "/app/.git/config"),
        ("test_plugin", EP),
        ("python_shadow", "/usr/local/lib/python3.11/dist-packages/pytest"),
        ("command_shadow", "/usr/local/bin/cat"),
        ("loader_hook", "/etc/ld.so.cache"),
    }
    assert "fsmonitor" not in guard.summary(findings)  # the summary names rules and paths, not contents
    assert guard.summary(findings).startswith("tamper guard: ")


def test_allowances_mark_findings_without_hiding_them() -> None:
    allow = Allowances(paths=["/usr/local/bin/*"], rules=["git_hook"])
    findings = _check(
        Change("/usr/local/bin/cat", "added", "file"),
        Change("/root/.gitconfig", "added", "file", archived=True),
        Change("/usr/bin/python3", "modified", "file"),
        contents={"/root/.gitconfig": b"[alias]\n\tst = !sh -c x\n"},
        allow=allow,
    )
    state = {f.path: f.allowed for f in findings}
    assert state == {"/usr/local/bin/cat": True, "/root/.gitconfig": True, "/usr/bin/python3": False}
    assert [f.path for f in guard.tripped(findings)] == ["/usr/bin/python3"]
