"""A task's tamper-guard allowances: the Bandpass table in ``task.toml``.

They live under ``[metadata.bandpass.guard]`` because Harbor's ``TaskConfig`` keeps ``metadata`` as a
free-form table: Harbor loads, validates and writes such a task back unchanged, where an unknown top-level
table would be dropped on its next rewrite. ::

    [metadata.bandpass.guard]
    allow = ["/usr/local/bin/jq", "/etc/profile.d/*.sh"]   # fnmatch globs on absolute paths
    allow_rules = ["shell_startup"]                         # whole rules this task switches off

The rule names are here, with the task's data, so the task loader can check them without importing the
engine stage that runs the guard.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any

#: Every tamper-guard rule and what it protects (``engine/run/guard.py`` implements them).
RULES: dict[str, str] = {
    "system_file": "a file the image ships in a system location (PATH, shells, interpreters, libraries) "
    "was modified or deleted",
    "command_shadow": "a new file shadows an existing command (same name, earlier on PATH)",
    "python_startup": "a Python start-up hook (sitecustomize, usercustomize, a new .pth file)",
    "python_shadow": "a new module in a site directory shadows an installed one",
    "test_plugin": "a test-runner hook the verifier would load (conftest.py or pytest config above "
    "/tests, a pytest11 entry point)",
    "loader_hook": "a dynamic-loader hook (/etc/ld.so.preload, ld.so.conf, ld.so.cache)",
    "shell_startup": "a shell start-up file (profile, bashrc, BASH_ENV-style files, inputrc)",
    "git_hook": "a git hook or git configuration that runs commands",
    "special_file": "a FIFO or device node left outside /tmp and /run (a program the verifier starts may "
    "open it and block: a terminfo entry, a config file)",
    "dev_tamper": "/dev is not what Docker put there (a FIFO at /dev/null, a directory at /dev/fd)",
}

FIELD = "[metadata.bandpass.guard]"
#: The other keys of ``[metadata.bandpass]``: the task's reward declarations (engine/tasks/rewards.py).
BANDPASS_KEYS = ("verify_mode", "primary_reward", "reward_files")


@dataclass
class Allowances:
    paths: list[str] = field(default_factory=list)
    rules: list[str] = field(default_factory=list)

    def allows(self, rule: str, path: str) -> bool:
        return rule in self.rules or any(fnmatchcase(path, pat) for pat in self.paths)


def parse(metadata: dict[str, Any]) -> tuple[Allowances, list[tuple[str, str]]]:
    """Returns the allowances and (field, problem) pairs for anything malformed."""
    problems: list[tuple[str, str]] = []
    bp = metadata.get("bandpass", {})
    if not isinstance(bp, dict):
        return Allowances(), [("[metadata.bandpass]", f"expected a table, got {bp!r}")]
    unknown = sorted(set(bp) - {"guard", *BANDPASS_KEYS})
    for key in unknown:
        problems.append(
            (f"[metadata.bandpass].{key}", f"unknown key (known: {', '.join(['guard', *BANDPASS_KEYS])})")
        )
    guard = bp.get("guard", {})
    if not isinstance(guard, dict):
        return Allowances(), [*problems, (FIELD, f"expected a table, got {guard!r}")]
    for key in sorted(set(guard) - {"allow", "allow_rules"}):
        problems.append((f"{FIELD}.{key}", "unknown key (known: allow, allow_rules)"))
    out = Allowances()
    paths = guard.get("allow", [])
    if not isinstance(paths, list) or not all(isinstance(p, str) and p.startswith("/") for p in paths):
        problems.append((f"{FIELD}.allow", f"expected a list of absolute paths or globs, got {paths!r}"))
    else:
        out.paths = list(paths)
    rules = guard.get("allow_rules", [])
    if not isinstance(rules, list) or not all(isinstance(r, str) for r in rules):
        problems.append((f"{FIELD}.allow_rules", f"expected a list of rule names, got {rules!r}"))
    else:
        bad = [r for r in rules if r not in RULES]
        if bad:
            problems.append(
                (f"{FIELD}.allow_rules", f"unknown rule {bad[0]!r} (known: {', '.join(sorted(RULES))})")
            )
        else:
            out.rules = list(rules)
    return out, problems
