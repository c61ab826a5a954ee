"""The meta-agent's tools, executed against one generation's scratch folder.

Every tool returns text for a ``tool_result`` block. Anything wrong with a call (bad JSON, missing or
mistyped fields, a path outside the folder, an unknown tool, a task that does not load) raises
:class:`ToolError`, which the loop turns into an ``is_error: true`` tool_result: the model gets the
message and can correct itself; the generation never crashes on what the model typed.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import Any

import docker

from ...store import queries
from ...store.db import session
from ..audit.task_audit import AuditReport
from ..core.events import EventBus
from ..core.plural import listed
from ..core.workspace import Workspace
from ..sandbox.container import Sandbox, SandboxError, SandboxSpec
from ..tasks.images import BuildResult
from ..tasks.taskdir import IGNORED_NAMES, TaskInvalid, load_task, version_hash
from .dedup import DUPLICATE_CODE, most_similar
from .stage import Staged, StageError, StageWorkspace

MAX_FILE_BYTES = 512 * 1024
MAX_FILES = 300
MAX_READ_CHARS = 40_000
MAX_OUTPUT_CHARS = 8_000
RUN_TIMEOUT_DEFAULT = 60.0
RUN_TIMEOUT_MAX = 300.0

#: Serialises the final duplicate/name check and the import, so two concurrent generations cannot both
#: accept near-identical tasks or claim the same task name.
ACCEPT_LOCK = threading.Lock()


class ToolError(Exception):
    """A tool call the model must fix; the message is what the model reads."""


@dataclass
class Accepted:
    version_id: int
    version_hash: str
    name: str
    report: AuditReport


class FinalRejection(Exception):
    """Submit refused for a reason revising cannot fix within this generation's rules (a duplicate)."""

    def __init__(self, code: str, detail: str) -> None:
        self.code = code
        self.detail = detail
        super().__init__(f"{code}: {detail}")


def validate_input(schema: dict[str, Any], value: Any) -> dict[str, Any]:
    """Checks a tool input against the (small) JSON-schema subset our tools.json uses."""
    if not isinstance(value, dict):
        raise ToolError(f"input must be a JSON object, got {type(value).__name__}")
    props: dict[str, Any] = schema.get("properties", {})
    problems = [f"missing required field {r!r}" for r in schema.get("required", []) if r not in value]
    unknown = sorted(set(value) - set(props))
    if unknown:
        problems.append(
            f"unknown {listed('field', map(repr, unknown))} (expected {', '.join(props) or 'none'})"
        )
    for key, spec in props.items():
        if key not in value:
            continue
        v, t = value[key], spec.get("type")
        ok = {
            "string": isinstance(v, str),
            "number": isinstance(v, (int, float)) and not isinstance(v, bool),
            "integer": isinstance(v, int) and not isinstance(v, bool),
            "boolean": isinstance(v, bool),
            "array": isinstance(v, list),
            "object": isinstance(v, dict),
        }.get(t, True)
        if not ok:
            problems.append(f"field {key!r} must be a {t}, got {type(v).__name__}")
            continue
        if t == "array" and "enum" in spec.get("items", {}):
            bad = [x for x in v if x not in spec["items"]["enum"]]
            if bad:
                problems.append(f"field {key!r}: {bad} not in {spec['items']['enum']}")
    if problems:
        raise ToolError("invalid input: " + "; ".join(problems))
    return value


def _tail(text: str, limit: int = MAX_OUTPUT_CHARS) -> str:
    return text if len(text) <= limit else f"[... {len(text) - limit} chars cut ...]\n" + text[-limit:]


@dataclass
class Workbench:
    """Scratch folder + staging workspace + Docker for one generation."""

    ws: Workspace
    scratch: Path
    stage_root: Path
    generation_id: int
    audit_reruns: int = 2
    accept_warnings: bool = False
    bus: EventBus | None = None
    client_factory: Callable[[], docker.DockerClient] | None = None
    last_audit: tuple[str, AuditReport] | None = None
    audits: int = 0
    _client: docker.DockerClient | None = field(default=None, repr=False)
    _stage: StageWorkspace | None = field(default=None, repr=False)

    def __post_init__(self) -> None:
        self.scratch.mkdir(parents=True, exist_ok=True)

    # infrastructure ------------------------------------------------------------------------------------

    @property
    def client(self) -> docker.DockerClient:
        if self._client is None:
            from ..sandbox.docker_engine import get_client

            self._client = (self.client_factory or get_client)()
        return self._client

    @property
    def stage(self) -> StageWorkspace:
        if self._stage is None:
            self._stage = StageWorkspace(self.ws, self.stage_root)
        return self._stage

    def close(self) -> None:
        if self._stage is not None:
            self._stage.remove()
            self._stage = None

    def execute(self, name: str, args: dict[str, Any]) -> str | Accepted:
        handler = getattr(self, f"tool_{name}", None)
        if handler is None:
            raise ToolError(f"unknown tool {name!r}")
        reply: str | Accepted = handler(**args)
        return reply

    # files ---------------------------------------------------------------------------------------------

    def _resolve(self, rel: str) -> Path:
        if not rel or not rel.strip():
            raise ToolError("path is empty")
        p = PurePosixPath(rel.replace("\\", "/"))
        if p.is_absolute() or ".." in p.parts:
            raise ToolError(f"path {rel!r} must be relative to the task folder and must not contain '..'")
        if any(part in IGNORED_NAMES or part.startswith(".") for part in p.parts):
            raise ToolError(f"path {rel!r}: hidden or ignored names are not part of a task")
        full = (self.scratch / Path(*p.parts)).resolve()
        root = self.scratch.resolve()
        if root not in full.parents:
            raise ToolError(f"path {rel!r} leaves the task folder")
        return full

    def files(self) -> list[Path]:
        return sorted(p for p in self.scratch.rglob("*") if p.is_file())

    def tool_write_file(self, path: str, content: str) -> str:
        target = self._resolve(path)
        data = content.encode("utf-8")
        if len(data) > MAX_FILE_BYTES:
            raise ToolError(f"{path}: {len(data)} bytes is over the {MAX_FILE_BYTES}-byte limit per file")
        if not target.exists() and len(self.files()) >= MAX_FILES:
            raise ToolError(f"the task already has {MAX_FILES} files")
        if target.is_dir():
            raise ToolError(f"{path} is a folder")
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
        rel = target.relative_to(self.scratch.resolve()).as_posix()
        if rel.endswith(".sh") or rel.split("/")[0] in ("solution", "tests") and data.startswith(b"#!"):
            target.chmod(0o755)
        return f"wrote {len(data)} bytes to {rel}"

    def tool_read_file(self, path: str) -> str:
        target = self._resolve(path)
        if not target.is_file():
            raise ToolError(f"{path}: no such file (list_files shows what exists)")
        text = target.read_text(encoding="utf-8", errors="replace")
        if len(text) > MAX_READ_CHARS:
            return text[:MAX_READ_CHARS] + f"\n[... {len(text) - MAX_READ_CHARS} more chars not shown ...]"
        return text

    def tool_list_files(self) -> str:
        root = self.scratch.resolve()
        rows = [f"{p.relative_to(root).as_posix()}  ({p.stat().st_size} bytes)" for p in self.files()]
        return "\n".join(rows) if rows else "(the task folder is empty)"

    # build / run ---------------------------------------------------------------------------------------

    def _build(self) -> tuple[Staged, BuildResult]:
        try:
            staged = self.stage.stage(self.scratch)  # validate before touching Docker
        except StageError as exc:
            raise ToolError(f"{exc}:\n" + "\n".join(f"- {p}" for p in exc.problems)) from exc
        return staged, self.stage.build(staged, self.client, self.bus)

    def tool_build(self) -> str:
        staged, build = self._build()
        log = "\n".join(build.log.splitlines()[-40:])
        if not build.ok:
            raise ToolError(f"image build failed ({build.error or 'see log'}):\n{log}")
        note = " (cached)" if build.cached else ""
        warn = "".join(f"\nwarning: {w}" for w in staged.spec.warnings)
        return f"built {build.tag}{note}{warn}\n{log}"

    def tool_run(
        self, command: str, timeout_sec: float = RUN_TIMEOUT_DEFAULT, include: list[str] | None = None
    ) -> str:
        if not command.strip():
            raise ToolError("command is empty")
        timeout = min(max(1.0, float(timeout_sec)), RUN_TIMEOUT_MAX)
        staged, build = self._build()
        if not build.ok:
            raise ToolError("image build failed; call build to see the log")
        spec = staged.spec
        sb = Sandbox(
            self.client,
            SandboxSpec(
                image=build.tag,
                cpus=spec.cpus,
                memory_mb=spec.memory_mb,
                network=False,
                workdir=spec.workdir,
                labels={"bandpass.generation": str(self.generation_id)},
            ),
        )
        try:
            with sb:
                for folder in include or []:
                    src = self.scratch / folder
                    if src.is_dir():
                        sb.put_dir(src, f"/{folder}")
                code, output = sb.exec(command, timeout=timeout, workdir=spec.workdir)
        except SandboxError as exc:
            raise ToolError(f"sandbox error: {exc}") from exc
        timed = " (timed out)" if code == 124 else ""
        return f"exit code {code}{timed}\n{_tail(output)}"

    # audit / submit ------------------------------------------------------------------------------------

    def _instruction(self) -> tuple[str, str]:
        try:
            spec = load_task(self.scratch)
        except TaskInvalid as exc:
            raise ToolError(
                "the task folder is not a valid Harbor task:\n" + "\n".join(f"- {p}" for p in exc.problems)
            ) from exc
        if spec.harbor_refusals:  # Bandpass writes only what Harbor's own loader accepts
            raise ToolError(
                "Harbor's task loader would refuse this task (write what Harbor accepts):\n"
                + "\n".join(f"- {r}" for r in spec.harbor_refusals)
            )
        return spec.name, spec.instruction

    def duplicate_of(self, instruction: str) -> tuple[str, float] | None:
        with session(self.ws.engine) as s:
            existing = [(r.name, r.instruction) for r in queries.latest_instructions(s)]
        return most_similar(instruction, existing)

    def name_taken(self, name: str) -> bool:
        with session(self.ws.engine) as s:
            return queries.get_task(s, name) is not None

    def _checks_before_audit(self) -> list[str]:
        name, instruction = self._instruction()
        problems = []
        dup = self.duplicate_of(instruction)
        if dup is not None:
            problems.append(
                f"{DUPLICATE_CODE}: instruction.md is {dup[1]:.0%} similar to the existing task "
                f"{dup[0]!r}; write a task about something else"
            )
        if self.name_taken(name):
            problems.append(f"the workspace already has a task named {name!r}: set another [task] name")
        return problems

    def run_audit(self) -> AuditReport:
        try:
            staged, report = self.stage.audit(
                self.scratch, reruns=self.audit_reruns, client=self.client, bus=self.bus
            )
        except StageError as exc:
            raise ToolError(f"{exc}:\n" + "\n".join(f"- {p}" for p in exc.problems)) from exc
        self.audits += 1
        self.last_audit = (staged.version_hash, report)
        return report

    def accepted(self, report: AuditReport) -> bool:
        return report.verdict == "accepted" or (self.accept_warnings and report.verdict == "warning")

    def tool_audit(self) -> str:
        problems = self._checks_before_audit()
        if problems:
            raise ToolError("not audited:\n" + "\n".join(f"- {p}" for p in problems))
        return describe_audit(self.run_audit())

    def tool_submit(self, summary: str = "") -> str | Accepted:
        name, instruction = self._instruction()
        dup = self.duplicate_of(instruction)
        if dup is not None:
            raise FinalRejection(DUPLICATE_CODE, f"{dup[1]:.0%} similar to existing task {dup[0]!r}")
        if self.name_taken(name):
            raise ToolError(f"the workspace already has a task named {name!r}: set another [task] name")
        current = version_hash(self.scratch)
        if self.last_audit is None or self.last_audit[0] != current:
            report = self.run_audit()
        else:
            report = self.last_audit[1]
        if not self.accepted(report):
            raise ToolError(
                "submit refused: the audit does not accept these files.\n" + describe_audit(report)
            )
        return self._accept(report)

    def _accept(self, report: AuditReport) -> Accepted:
        from ..tasks.importer import import_one

        with ACCEPT_LOCK:
            name, instruction = self._instruction()
            dup = self.duplicate_of(instruction)  # again: a concurrent generation may just have accepted one
            if dup is not None:
                raise FinalRejection(DUPLICATE_CODE, f"{dup[1]:.0%} similar to existing task {dup[0]!r}")
            if self.name_taken(name):
                raise ToolError(f"the workspace already has a task named {name!r}: set another [task] name")
            item = import_one(self.ws, self.scratch, origin="generated")
            if item.status not in ("new", "new_version"):
                raise ToolError(f"import failed ({item.status}): {'; '.join(item.problems)}")
            with session(self.ws.engine) as s:
                version = queries.version_by_hash(s, item.version_hash)
                assert version is not None and version.id is not None
                # The staging audit is this exact content (same hash): record it rather than re-run it.
                queries.record_audit(
                    s, version.id, verdict=report.verdict, reasons=report.reasons, details=report.checks
                )
                aliases = (report.checks.get("image") or {}).get("aliases") or []
                if aliases:
                    queries.set_version_aliases(s, version.id, [tuple(a) for a in aliases])
                vid = version.id
        return Accepted(vid, item.version_hash, name, report)


def describe_audit(report: AuditReport) -> str:
    """The audit as the model reads it: verdict, every finding with its detail, episode rewards."""
    lines = [f"audit verdict: {report.verdict}"]
    if report.reasons:
        lines.append("reasons: " + ", ".join(report.reasons))
    for f in report.checks.get("findings", []):
        lines.append(f"- {f['code']}: {str(f['detail'])[:600]}")
    eps = report.checks.get("episodes") or {}
    for name, runs in eps.items():
        rewards = ", ".join(f"{r['outcome']} reward={r['reward']}" for r in runs)
        lines.append(f"  {name}: {rewards}")
    if report.verdict == "accepted":
        lines.append("The task is accepted by the audit: call submit.")
    return "\n".join(lines)
