"""What a task's own scripts run, followed through the scripts they source or call: the evidence for the
network a task needs and for what its test output looks like.

A verifier is rarely one file. Terminal-Bench 1's ``run-tests.sh`` often ends ``source $TEST_DIR/setup-uv-
pytest.sh; bash $TEST_DIR/run-uv-pytest.sh``, and the download (``curl … uv/install.sh``) and the pytest
invocation live in those files. Reading ``run-tests.sh`` alone found neither: the task ran offline and
scored 0 on every episode. :func:`follow` reads the entry scripts, then every script they reference by a
path that maps into the task (``$TEST_DIR/x.sh`` and ``/tests/x.sh`` are ``tests/x.sh``, ``/solution/…``
is ``solution/…``, a relative path is tried next to the referring script), transitively, and lists the
references it could not read: a script the task does not ship (from the image, or written at run time) is
something the caller cannot vouch for.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

__all__ = ["DOWNLOADS_RE", "ScriptScan", "code_of", "follow"]

#: Commands that fetch from the internet — or may: a build tool that resolves dependencies at run time
#: (gradle, maven, cargo, go) fetches whatever its cache lacks. A task whose oracle or verifier runs one
#: relies on a network.
DOWNLOADS_RE = re.compile(
    r"\b(curl|wget|pip3?\s+install|python3?\s+-m\s+pip\s+install|uv\s+(?:pip\s+install|add|sync|tool\s+install"
    r"|run\s+--with)|uvx|pipx\s+install|apt(?:-get)?\s+(?:update|install)|apk\s+add|npm\s+(?:install|ci)"
    r"|npx|yarn\s+(?:install|add)|pnpm\s+(?:install|add)|git\s+clone|cargo\s+(?:install|build|test|run|fetch)"
    r"|go\s+(?:get|install|test|build|run|mod\s+download)|gradlew|gradle|mvn|dotnet\s+(?:restore|build|test)"
    r"|(?:conda|mamba)\s+install|gem\s+install|bundle\s+install|composer\s+install|poetry\s+install)\b"
)

#: ``source X``, ``. X``, ``bash X``/``sh X`` (options allowed), ``exec X``, or a script run by its path.
_REF_RE = re.compile(
    r"(?:^|[;&|(]|\bthen\b|\bdo\b|\belse\b)\s*(?:source|\.|(?:ba)?sh(?:\s+-\w+)*|exec)\s+([\"']?)([^\s;&|)\"']+)\1"
    r"|(?:^|[;&|(]|\bthen\b|\bdo\b)\s*([\"']?)((?:\.{0,2}/|\$\{?TEST_DIR\}?/)[^\s;&|)\"']+\.(?:sh|bash))\3",
    re.MULTILINE,
)
#: Files other tools create at run time, never part of a task: an installer's PATH snippet, a venv's
#: activate script. Sourcing one says nothing the scan needs (the installer that wrote it is itself read).
_RUNTIME_FILES = re.compile(r"(?:^|/)(?:bin/(?:env|activate)|\.cargo/env|\.bashrc|\.profile|conda\.sh)$")


@dataclass
class ScriptScan:
    """Every script read (task-relative path -> text) and the references that could not be read."""

    texts: dict[str, str] = field(default_factory=dict)
    unresolved: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        return "\n".join(self.texts.values())

    def first_download(self) -> tuple[str, str] | None:
        """(script, command) of the first download found, in reading order."""
        for rel, text in self.texts.items():
            m = DOWNLOADS_RE.search(code_of(text))
            if m:
                return rel, m.group(0)
        return None


def code_of(text: str) -> str:
    """The script without comment lines (a ``# curl …`` note is not a download)."""
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))


def _resolve(ref: str, referrer: str, root: Path, mounts: Mapping[str, str]) -> str | None:
    """The task-relative path ``ref`` names, when the task ships it."""
    ref = re.sub(r"\$\{?TEST_DIR\}?", mounts.get("$TEST_DIR", "/tests"), ref)
    if "$" in ref:
        return None
    candidates: list[str] = []
    if ref.startswith("/"):
        for prefix, folder in mounts.items():
            if prefix.startswith("/") and (ref == prefix or ref.startswith(prefix.rstrip("/") + "/")):
                candidates.append(str(PurePosixPath(folder) / PurePosixPath(ref).relative_to(prefix)))
    else:
        candidates.append(str(PurePosixPath(referrer).parent / ref))
        candidates.append(ref)
    for cand in candidates:
        norm = PurePosixPath(cand)
        if ".." in norm.parts:
            continue
        if (root / norm).is_file():
            return norm.as_posix()
    return None


def follow(root: Path, entries: Iterable[str], mounts: Mapping[str, str]) -> ScriptScan:
    """Reads ``entries`` (task-relative script paths) and every script they reference that the task
    ships, transitively. ``mounts`` maps container paths to task folders (``{"/tests": "tests"}``); its
    ``"$TEST_DIR"`` entry is what ``$TEST_DIR`` expands to (default ``/tests``)."""
    scan = ScriptScan()
    queue = [e for e in entries if (root / e).is_file()]
    while queue:
        rel = queue.pop(0)
        if rel in scan.texts:
            continue
        try:
            text = (root / rel).read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue
        scan.texts[rel] = text
        for m in _REF_RE.finditer(code_of(text)):
            ref = m.group(2) or m.group(4)
            if not ref or _RUNTIME_FILES.search(ref) or ref.startswith("-"):
                continue
            if m.group(2) and not re.search(r"[/.]", ref):
                continue  # `bash -c`, `sh script` without a path: a command, not a file
            found = _resolve(ref, rel, root, mounts)
            if found is None:
                if ref not in scan.unresolved:
                    scan.unresolved.append(ref)
            elif found not in scan.texts:
                queue.append(found)
    return scan
