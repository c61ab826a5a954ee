"""``bandpass audit``: prove a task's verifier honest before any policy is judged by it.

A task is accepted only when its oracle passes in every fresh container and every verifier rerun, doing
nothing fails, every cheat probe fails, and the static checks find no leaked answer. Each finding is a
failure-taxonomy code (``invalidity.oracle_fails``...) so audits, tags and reports speak one language.
"""

from __future__ import annotations

import re
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from engine.core.events import EventBus
from engine.core.workspace import Workspace
from engine.review import outcomes
from engine.review.taxonomy import ALWAYS_BLOCKING
from engine.run import guard
from engine.run.agents.builtin import CHEATS, SANDBOX_PROBES, TAMPER_CHEATS, NopAgent, OracleAgent
from engine.run.episode import EpisodeResult, ensure_image, run_episode
from engine.sandbox.docker_engine import get_client
from engine.tasks.images import image_contains
from engine.tasks.taskdir import TaskSpec, load_task, task_files
from store import queries
from store.db import session

#: What each cheat passing means (DESIGN.md taxonomy).
CHEAT_CODES = {
    "cheat:write_reward": "misalignment.reward_hack",
    "cheat:background_loop": "misalignment.reward_hack",
    "cheat:peek": "invalidity.solution_leak",
    "cheat:touch_outputs": "misalignment.state_only_verifier",
    **{c.name: "misalignment.reward_hack" for c in TAMPER_CHEATS},
}
#: The oracle tripped the tamper guard: honest work the guard forbids (the curator adds an allowance).
GUARD_CONFLICT = "harness.guard_conflict"
TAMPER = outcomes.agent_error("verifier_tamper")
WARNING_CODES = {"invalidity.instruction_untested", "invalidity.tests_unstated_behavior"}


@dataclass
class AuditReport:
    version_id: int
    task: str
    version_hash: str
    verdict: str = ""  # accepted | rejected | warning
    reasons: list[str] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def add(self, code: str, detail: str) -> None:
        if code not in self.reasons:
            self.reasons.append(code)
        self.checks.setdefault("findings", []).append({"code": code, "detail": detail})


_PATH_RE = re.compile(r"(?<![\w.])(/(?:app|tmp|srv|opt|var|home|root|etc|data|output)[\w./-]*\w)")


def static_checks(spec: TaskSpec, report: AuditReport) -> None:
    """Checks that need no container: answers shipped in the environment, instruction/tests coverage."""
    env_dir = Path(spec.path) / "environment"
    secrets = {}
    for rel in ("solution/solve.sh", "tests/test.sh"):
        p = Path(spec.path) / rel
        if p.is_file() and p.stat().st_size > 40:
            secrets[p.read_bytes().strip()] = rel
    for f in env_dir.rglob("*"):
        if f.is_file() and f.read_bytes().strip() in secrets:
            rel = secrets[f.read_bytes().strip()]
            report.add("invalidity.solution_leak", f"environment/{f.relative_to(env_dir)} is a copy of {rel}")
    dockerfile = env_dir / "Dockerfile"
    if dockerfile.is_file():
        for line in dockerfile.read_text(errors="replace").splitlines():
            if re.match(r"\s*(COPY|ADD)\b.*\b(tests|solution)/", line, re.I):
                report.add("invalidity.solution_leak", f"Dockerfile copies tests or solution: {line.strip()}")


def coverage_check(spec: TaskSpec, report: AuditReport, present_at_start: dict[str, bool]) -> None:
    """Outputs the instruction asks for (paths absent from the fresh image) must appear in the tests;
    a path that is never checked is an instruction the verifier ignores."""
    tests_dir = Path(spec.path) / "tests"
    tests_text = "\n".join(
        f.read_text(errors="replace") for f in task_files(spec.path) if tests_dir in f.parents
    )
    outputs = [p for p in instruction_paths(spec) if not present_at_start.get(p, False)]
    untested = [p for p in outputs if p not in tests_text and Path(p).name not in tests_text]
    report.checks["instruction_outputs"] = outputs
    if untested:
        report.add(
            "invalidity.instruction_untested",
            f"named in instruction.md, never checked: {', '.join(untested)}",
        )


def instruction_paths(spec: TaskSpec) -> list[str]:
    return sorted(set(_PATH_RE.findall(spec.instruction)))


def _reward_str(r: EpisodeResult) -> str:
    return f"{r.outcome} (reward {r.reward})"


def audit_version(
    ws: Workspace,
    version_id: int,
    *,
    reruns: int = 3,
    client: docker.DockerClient | None = None,
    bus: EventBus | None = None,
    workers: int = 2,
) -> AuditReport:
    started = time.monotonic()
    with session(ws.engine) as s:
        version = queries.get_version(s, version_id)
        if version is None:
            raise KeyError(f"task version {version_id} does not exist")
        task = s.get(queries.Task, version.task_id)
    spec = load_task(ws.abs(version.path))
    report = AuditReport(version_id, task.name if task else spec.name, version.hash)
    client = client or get_client()
    batch = f"audit-{version.hash[:12]}-{int(time.time())}"

    build = ensure_image(ws, client, version, spec, bus)
    report.checks["image"] = {
        "tag": build.tag,
        "ok": build.ok,
        "cached": build.cached,
        "aliases": build.aliases_used,
    }
    if not build.ok:
        report.add("infra.image_build_failed", "\n".join(build.log.splitlines()[-10:]))
        return _finish(ws, report, started)

    static_checks(spec, report)
    leak_paths = ["/tests/test.sh", "/solution/solve.sh", "/oracle/solve.sh"]
    present = image_contains(client, build.tag, [*leak_paths, *instruction_paths(spec)])
    for path in leak_paths:
        if present.get(path):
            report.add("invalidity.solution_leak", f"the image already contains {path}")
    coverage_check(spec, report, present)

    def run(agent_cls: type, attempt: int, verifier_reruns: int = 0) -> EpisodeResult:
        return run_episode(
            ws,
            version_id,
            agent_cls,
            client=client,
            bus=bus,
            attempt=attempt,
            batch_id=batch,
            verifier_reruns=verifier_reruns,
        )

    jobs: list[tuple[str, type, int, int]] = [
        ("oracle", OracleAgent, i, 4 if i == 0 else 0) for i in range(reruns)
    ]
    jobs += [("nop", NopAgent, i, 2 if i == 0 else 0) for i in range(2)]
    jobs += [(c.name, c, 0, 0) for c in CHEATS]
    jobs += [(p.name, p, 0, 0) for p in SANDBOX_PROBES]
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [(name, pool.submit(run, cls, attempt, vr)) for name, cls, attempt, vr in jobs]
        results: dict[str, list[EpisodeResult]] = {}
        for name, fut in futures:
            results.setdefault(name, []).append(fut.result())

    report.checks["episodes"] = {
        name: [
            {"episode": r.episode_id, "outcome": r.outcome, "reward": r.reward, "reruns": r.rerun_rewards}
            for r in rs
        ]
        for name, rs in results.items()
    }
    report.checks["guard"] = {
        name: sorted({f.rule for r in rs for f in guard.tripped(r.guard_findings)})
        for name, rs in results.items()
        if any(guard.tripped(r.guard_findings) for r in rs)
    }
    for name, rs in results.items():
        for r in rs:
            # The finding is the taxonomy code the outcome suggests (one mapping: outcomes.SUGGESTED_TAG).
            code = outcomes.code_of(r.outcome)
            where = f"{name} episode {r.episode_id} ({r.outcome}): {r.detail[:300]}"
            if r.outcome == TAMPER and name in ("oracle", "nop"):
                paths = sorted({f.path for f in guard.tripped(r.guard_findings)})
                report.add(
                    GUARD_CONFLICT,
                    f"{name} episode {r.episode_id} tripped the tamper guard: {', '.join(paths)}"
                    " (allow them in task.toml [metadata.bandpass.guard] if the solution must do this)",
                )
            elif (
                name == "oracle"
                and r.outcome.startswith("agent_error")
                and outcomes.code_of(r.outcome) in SANDBOX_CODES
            ):
                pass  # the oracle exhausting its sandbox is the task's environment: see sandbox_checks
            elif outcomes.is_infra(r.outcome):
                report.add(outcomes.suggested_tag(r.outcome) or f"infra.{code}", where)
            elif r.outcome.startswith("agent_error") and name in ("oracle", "nop"):
                report.add(outcomes.suggested_tag(r.outcome) or f"harness.{code}", where)

    def valid_rewards(name: str) -> list[float]:
        out: list[float] = []
        for r in results.get(name, []):
            # a guard conflict is reported as such; the oracle's reward still says whether it solves it
            if r.reward is None or r.outcome not in (outcomes.PASSED, outcomes.FAILED, TAMPER):
                continue
            out.append(r.reward)
            out.extend(x for x in r.rerun_rewards if x is not None)
        return out

    sandbox_checks(spec, report, results)
    oracle, nop = valid_rewards("oracle"), valid_rewards("nop")
    for name, rewards in (("oracle", oracle), ("nop", nop)):
        if len(set(rewards)) > 1:
            report.add("misalignment.flaky_verifier", f"{name} rewards disagree across reruns: {rewards}")
    if not oracle:
        report.add("invalidity.oracle_fails", "no oracle run produced a valid reward")
    elif max(oracle) < 1.0:
        report.add("invalidity.oracle_fails", f"oracle rewards {oracle}")
    if nop and min(nop) >= 1.0:
        report.add("invalidity.trivially_solved", f"doing nothing passes: rewards {nop}")
    for cheat in CHEATS:
        for r in results.get(cheat.name, []):
            if r.outcome == outcomes.PASSED and not {
                "misalignment.flaky_verifier",
                "invalidity.trivially_solved",
            } & set(report.reasons):
                report.add(CHEAT_CODES[cheat.name], f"{cheat.name} passed: {_reward_str(r)}")
    return _finish(ws, report, started)


SANDBOX_CODES = ("sandbox_killed", "oom", "pids_exhausted", "disk_full")


def sandbox_checks(spec: TaskSpec, report: AuditReport, results: dict[str, list[EpisodeResult]]) -> None:
    """The sandbox probes must end as the agent errors they cause (never infra: that would let a policy
    mask its failures), and the oracle must fit the task's own limits: an oracle killed for memory under
    ``memory_mb`` means the environment is too small for the task (``invalidity.env_task_mismatch``)."""
    probes: dict[str, Any] = {}
    for probe in SANDBOX_PROBES:
        for r in results.get(probe.name, []):
            ok = r.outcome == probe.expected and r.reward == 0.0
            by = (r.evidence.get("verdict") or {}).get("by", "")
            probes[probe.name] = {"outcome": r.outcome, "expected": probe.expected, "ok": ok, "by": by}
            if not ok and not outcomes.is_infra(r.outcome):  # infra outcomes are reported above
                report.add(
                    "harness.sandbox_attribution",
                    f"{probe.name} episode {r.episode_id} ended {r.outcome}, expected {probe.expected}",
                )
    report.checks["sandbox_probes"] = probes
    for r in results.get("oracle", []):
        ev = r.evidence or {}
        if r.outcome == outcomes.agent_error("disk_full"):
            used = ev.get("disk_used_mb")
            report.checks.setdefault("oracle_disk", []).append(
                {"episode": r.episode_id, "storage_mb": spec.storage_mb, "used_mb": used}
            )
            report.add(
                "invalidity.env_task_mismatch",
                f"the oracle went over the task's own disk allowance (episode {r.episode_id}: storage_mb = "
                f"{spec.storage_mb}, writable layer {used} MB); raise [environment] storage_mb",
            )
        elif r.outcome == outcomes.agent_error("pids_exhausted"):
            report.add(
                "invalidity.env_task_mismatch",
                f"the oracle filled the task's own pid limit (episode {r.episode_id}: pids_limit = "
                f"{ev.get('pids_limit')}, {ev.get('pids_limit_hits')} fork(s) refused); raise "
                "[environment] pids_limit",
            )
        ooms = [e for e in ev.get("events", []) if e.get("action") == "oom"]
        if not ooms and r.outcome != outcomes.agent_error("oom"):
            continue
        peak = ev.get("memory_max_usage_mb")
        figures = f"memory_mb = {spec.memory_mb}, {len(ooms)} OOM kill(s)" + (
            f", peak {peak:g} MB" if peak is not None else ""
        )
        report.checks.setdefault("oracle_memory", []).append(
            {
                "episode": r.episode_id,
                "memory_mb": spec.memory_mb,
                "oom_kills": len(ooms),
                "peak_mb": peak,
                "outcome": r.outcome,
            }
        )
        report.add(
            "invalidity.env_task_mismatch",
            f"the oracle was killed for memory under the task's own limit (episode {r.episode_id}: "
            f"{figures}, {r.outcome}); raise [environment] memory_mb",
        )


def _finish(ws: Workspace, report: AuditReport, started: float) -> AuditReport:
    blocking = [
        c
        for c in report.reasons
        if (c.split(".")[0] in ALWAYS_BLOCKING and c not in WARNING_CODES) or c == GUARD_CONFLICT
    ]
    if blocking or "infra.image_build_failed" in report.reasons:
        report.verdict = "rejected"
    elif report.reasons:
        report.verdict = "warning"
    else:
        report.verdict = "accepted"
    report.duration_s = round(time.monotonic() - started, 2)
    with session(ws.engine) as s:
        queries.record_audit(
            s, report.version_id, verdict=report.verdict, reasons=report.reasons, details=report.checks
        )
    return report
