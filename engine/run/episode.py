"""One episode, end to end: image → sandbox → agent in its terminal → verifier → exactly one outcome.

Environment, agent and verifier stay separate (Harbor's split): the runner owns the container and the two
recordings, the agent only types into its terminal, the verifier runs after the agent in a pty of its own.
Every try is recorded; retryable infra errors get a bounded number of fresh tries, and whatever happens the
container is removed and the episode row ends ``done`` with one outcome.
"""

from __future__ import annotations

import contextlib
import errno
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker

from engine.core.events import EpisodeFinished, EpisodeStarted, EventBus
from engine.core.events import bus as default_bus
from engine.core.workspace import Workspace
from engine.review import outcomes
from engine.run.agents.base import Agent, AgentContext, AgentResult, StepRecord
from engine.run.verifier import run_verifier
from engine.sandbox import attribution
from engine.sandbox import pool as sandbox_pool
from engine.sandbox.asciicast import CastWriter
from engine.sandbox.container import Sandbox, SandboxError, SandboxSpec, classify_docker_error
from engine.sandbox.docker_engine import DockerUnavailable, get_client
from engine.sandbox.terminal import TerminalSession
from engine.tasks.images import DEFAULT_IMAGE_ALIASES, BuildResult, build_task_image
from engine.tasks.taskdir import TaskSpec, load_task
from store import queries
from store.db import session
from store.models import Task, TaskVersion

COLS, ROWS = 160, 40


# --- fault tolerance: recordings disk full ---------------------------------------------------------------
# A cast write that fails for lack of space must end the try as one clear infra error. Raised where it
# happens it would surface in the pty reader thread (seen as a dead terminal: container_died) or in the
# agent (agent_crashed), both wrong. So the writer stops recording and remembers why; the try checks it.
DISK_FULL_CODE = "disk_full"  # not retryable: the next try would hit the same full disk


def _disk_full(exc: BaseException) -> bool:
    return isinstance(exc, OSError) and exc.errno in (errno.ENOSPC, errno.EDQUOT)


class _GuardedCastWriter(CastWriter):
    """A CastWriter that turns ENOSPC/EDQUOT into ``disk_error`` instead of raising in whichever thread
    was writing; later events are dropped (the recording ends where the disk did)."""

    disk_error = ""

    def _write_line(self, line: str) -> None:
        if self.disk_error:
            return
        try:
            super()._write_line(line)
        except OSError as exc:
            if not _disk_full(exc):
                raise
            self.disk_error = f"recordings disk full: {self.path}: {exc.strerror}"
            f, self._f = self._f, None
            with contextlib.suppress(OSError):
                if f is not None:
                    f.close()  # flushing the rest fails again; the descriptor is closed regardless


def _disk_full_result(res: EpisodeResult, detail: str, *casts: tuple[str, Path]) -> EpisodeResult:
    """Ends the try as ``infra_error``; cast paths are kept only for files that got any bytes."""
    res.outcome, res.detail, res.reward = outcomes.infra_error(DISK_FULL_CODE), detail, None
    for attr, path in casts:
        try:
            empty = path.stat().st_size == 0
        except OSError:
            empty = True
        if empty:
            setattr(res, attr, "")
    return res


# --- end fault tolerance ------------------------------------------------------------------------------


@dataclass
class EpisodeResult:
    episode_id: int
    outcome: str
    reward: float | None
    detail: str = ""
    retries: int = 0
    agent_cast: str = ""
    verifier_cast: str = ""
    verifier_output: str = ""
    steps: int = 0
    rerun_rewards: list[float | None] = field(default_factory=list)
    try_errors: list[str] = field(default_factory=list)
    #: Who ended the sandbox, with the engine's events (engine/sandbox/attribution.py); {} when nothing did.
    evidence: dict[str, Any] = field(default_factory=dict)


def image_aliases(ws: Workspace) -> dict[str, str]:
    return {**DEFAULT_IMAGE_ALIASES, **ws.config.image_aliases}


def ensure_image(
    ws: Workspace, client: docker.DockerClient, version: TaskVersion, spec: TaskSpec, bus: EventBus | None
) -> BuildResult:
    """Builds (or finds cached) the version's image, recording the build and the aliases it used."""
    if spec.docker_image:
        return BuildResult(tag=spec.docker_image, ok=True, log="", cached=True)
    res = build_task_image(
        client,
        spec.path,
        version.hash,
        aliases=image_aliases(ws),
        timeout_sec=spec.build_timeout_sec,
        bus=bus,
    )
    with session(ws.engine) as s:
        if not res.cached:
            queries.record_image_build(
                s,
                version.id,  # type: ignore[arg-type]
                tag=res.tag,
                ok=res.ok,
                log=res.log,
                duration_s=res.duration,
            )
        if res.aliases_used:  # a cached image reports them too (kept in an image label)
            queries.set_version_aliases(s, version.id, res.aliases_used)  # type: ignore[arg-type]
    return res


def run_episode(
    ws: Workspace,
    version_id: int,
    agent: Agent | Callable[[], Agent],
    *,
    client: docker.DockerClient | None = None,
    bus: EventBus | None = None,
    episode_id: int | None = None,
    attempt: int = 0,
    batch_id: str = "",
    max_infra_retries: int = 2,
    verifier_reruns: int = 0,
    retry_backoff_s: float = 1.0,
) -> EpisodeResult:
    """Runs one episode to its outcome. ``agent`` may be a factory so each try gets a fresh agent.

    ``episode_id`` resumes a queued row (rollout batches); otherwise a row is created.
    ``verifier_reruns`` runs the verifier again on the final state that many times (the audit's
    "reruns agree" check); their rewards come back in ``rerun_rewards``.
    """
    bus = default_bus if bus is None else bus
    is_factory = isinstance(agent, type) or not hasattr(agent, "run")
    make_agent: Callable[[], Agent] = agent if is_factory else (lambda: agent)  # type: ignore[assignment,return-value]
    with session(ws.engine) as s:
        version = queries.get_version(s, version_id)
        if version is None:
            raise KeyError(f"task version {version_id} does not exist")
        if episode_id is None:
            episode_id = queries.create_episode(
                s, version_id, make_agent().name, attempt=attempt, batch_id=batch_id
            ).id
        task_row = s.get(Task, version.task_id)
        queries.mark_episode_running(s, episode_id)  # type: ignore[arg-type]
    assert episode_id is not None
    agent_name = make_agent().name
    bus.publish(
        EpisodeStarted(
            episode_id=episode_id,
            task_name=task_row.name if task_row else "",
            agent=agent_name,
            attempt=attempt,
        )
    )

    result = EpisodeResult(episode_id, "", None)
    try_errors: list[str] = []
    for try_no in range(max_infra_retries + 1):
        with session(ws.engine) as s:
            queries.delete_steps(s, episode_id)
        result = _one_try(ws, version, make_agent(), client, bus, episode_id, try_no, verifier_reruns)
        result.retries = try_no
        retryable = (
            outcomes.is_infra(result.outcome) and outcomes.code_of(result.outcome) in outcomes.RETRYABLE_INFRA
        )
        if not retryable:
            break
        try_errors.append(f"try {try_no}: {result.outcome}: {result.detail}")
        if try_no < max_infra_retries:
            time.sleep(retry_backoff_s * (2**try_no))
            client = None  # a dead daemon may have come back: reconnect
    result.try_errors = try_errors

    errors = [*result.try_errors]
    if result.detail and result.outcome != outcomes.PASSED:
        errors.append(result.detail)
    with session(ws.engine) as s:
        queries.finish_episode(
            s,
            episode_id,
            outcome=result.outcome,
            reward=result.reward,
            error="\n".join(dict.fromkeys(errors)),
            agent_cast=result.agent_cast,
            verifier_cast=result.verifier_cast,
            verifier_output=result.verifier_output,
            retries=result.retries,
        )
        queries.set_episode_evidence(s, episode_id, result.evidence)
    bus.publish(EpisodeFinished(episode_id=episode_id, outcome=result.outcome, reward=result.reward))
    return result


def _one_try(
    ws: Workspace,
    version: TaskVersion,
    agent: Agent,
    client: docker.DockerClient | None,
    bus: EventBus,
    episode_id: int,
    try_no: int,
    verifier_reruns: int,
) -> EpisodeResult:
    res = EpisodeResult(episode_id, "", None)
    try:
        spec = load_task(ws.abs(version.path))
    except Exception as exc:  # noqa: BLE001 - a stored version that no longer loads is infra, not policy
        res.outcome, res.detail = outcomes.infra_error("orchestrator_failure"), f"task files unusable: {exc}"
        return res
    try:
        client = client or get_client()
    except DockerUnavailable as exc:
        res.outcome, res.detail = outcomes.infra_error("daemon_unavailable"), str(exc)
        return res
    try:
        build = ensure_image(ws, client, version, spec, bus)
    except Exception as exc:  # noqa: BLE001
        res.outcome, res.detail = outcomes.infra_error(classify_docker_error(exc)), str(exc)
        return res
    if not build.ok:
        tail = "\n".join(build.log.splitlines()[-15:])
        res.outcome = outcomes.infra_error("image_build_failed")
        res.detail = f"image build failed ({build.error}):\n{tail}"
        return res

    rec_dir = ws.recordings_dir / f"episode-{episode_id}"
    try:
        rec_dir.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # fault tolerance: a full or broken recordings disk is infra, one line
        detail = f"recordings disk full: {rec_dir}: {exc.strerror}" if _disk_full(exc) else str(exc)
        res.outcome, res.detail = outcomes.infra_error(DISK_FULL_CODE), detail
        return res
    suffix = f".try{try_no}" if try_no else ""
    agent_path, verifier_path = rec_dir / f"agent{suffix}.cast", rec_dir / f"verifier{suffix}.cast"
    res.agent_cast, res.verifier_cast = ws.rel(agent_path), ws.rel(verifier_path)
    step_count = 0

    def persist_step(step: StepRecord) -> None:
        nonlocal step_count
        step_count += 1
        with session(ws.engine) as s:
            queries.add_step(
                s,
                episode_id,
                step.index,
                prompt_tokens=step.prompt_tokens,
                completion_tokens=step.completion_tokens,
                latency_s=step.latency_s,
                action=step.action,
                raw_reply=step.raw_reply,
                observation=step.observation,
                cuts=step.cuts,
                marker_time=step.marker_time,
            )

    sandbox: Sandbox | None = None
    watch: attribution.ContainerWatch | None = None
    sandbox_spec = SandboxSpec(
        image=build.tag,
        cpus=spec.cpus,
        memory_mb=spec.memory_mb,
        pids_limit=spec.pids_limit or 512,
        network=spec.network,
        workdir=spec.workdir,
        episode=episode_id,
        labels={"bandpass.workspace": str(ws.root)},
    )
    try:
        try:  # a pre-started spare when the warm pool has one (engine/sandbox/pool.py), else a cold start
            sandbox = sandbox_pool.acquire(client, sandbox_spec)
        except Exception as exc:  # noqa: BLE001
            res.outcome, res.detail = outcomes.infra_error(classify_docker_error(exc)), str(exc)
            return res
        title = f"{spec.name} · {agent.name} · episode {episode_id}"
        # attribution: the engine's events for this container, from before the agent's terminal starts
        watch = attribution.ContainerWatch(
            client, sandbox, memory_limit_mb=spec.memory_mb, pids_limit=sandbox_spec.pids_limit
        ).start()
        with _GuardedCastWriter(
            agent_path, COLS, ROWS, title=title, env={"TERM": "xterm-256color"}
        ) as agent_cast:
            agent_result, terminal_alive = _run_agent(
                client, sandbox, spec, agent, agent_cast, bus, episode_id, persist_step, watch
            )
        blame = watch.judge(terminal_alive=terminal_alive, reported_code=agent_result.infra_code)
        res.evidence = watch.evidence.as_dict()
        res.steps = step_count
        if agent_cast.disk_error:  # fault tolerance: the recording is the sample; without it, no sample
            return _disk_full_result(
                res, agent_cast.disk_error, ("agent_cast", agent_path), ("verifier_cast", verifier_path)
            )
        if blame is not None:  # the container or the agent's shell ended: who did it decides the outcome
            res.outcome, res.detail = blame.outcome, f"{blame.why}; {agent_result.detail}".strip("; ")
            res.reward = None if outcomes.is_infra(blame.outcome) else 0.0
            return res
        if agent_result.infra_code:
            res.outcome, res.detail = outcomes.infra_error(agent_result.infra_code), agent_result.detail
            return res
        with _GuardedCastWriter(
            verifier_path, COLS, ROWS, title=f"{title} · verifier", env={"TERM": "xterm-256color"}
        ) as vc:
            verdict = run_verifier(
                client, sandbox, spec, recorder=vc, bus=bus, episode_id=episode_id, cols=COLS, rows=ROWS
            )
            for _ in range(verifier_reruns):
                vc.marker("rerun")
                again = run_verifier(client, sandbox, spec, recorder=vc, bus=bus, episode_id=episode_id)
                res.rerun_rewards.append(again.reward)
        res.verifier_output = verdict.output
        res.reward = verdict.reward
        if vc.disk_error:  # fault tolerance: as above, for the verifier's recording
            return _disk_full_result(res, vc.disk_error, ("verifier_cast", verifier_path))
        # a death the agent set off as its last act lands after it returned: the verifier found the
        # container already dead (and restarted it); that is still the policy's doing
        late = watch.late_death()
        res.evidence = watch.evidence.as_dict() if late or watch.evidence.actions("oom") else {}
        if late is not None:
            res.outcome, res.detail, res.reward = late.outcome, late.why, 0.0
            return res
        if agent_result.error_code:
            res.outcome, res.detail = outcomes.agent_error(agent_result.error_code), agent_result.detail
        elif verdict.infra_code:
            res.outcome, res.detail = outcomes.infra_error(verdict.infra_code), verdict.detail
        else:
            res.outcome, res.detail = outcomes.from_reward(verdict.reward or 0.0), verdict.detail
        return res
    except (DockerUnavailable, docker.errors.DockerException, SandboxError, OSError) as exc:
        if _disk_full(exc):  # fault tolerance: e.g. the cast file could not even be created
            return _disk_full_result(
                res,
                f"recordings disk full: {exc}",
                ("agent_cast", agent_path),
                ("verifier_cast", verifier_path),
            )
        res.outcome, res.detail = outcomes.infra_error(classify_docker_error(exc)), str(exc)
        return res
    finally:
        if watch is not None:
            watch.close()
        if sandbox is not None:  # removed in the background: the outcome no longer depends on it
            with contextlib.suppress(Exception):
                sandbox_pool.release(sandbox)


def _run_agent(
    client: docker.DockerClient,
    sandbox: Sandbox,
    spec: TaskSpec,
    agent: Agent,
    cast: CastWriter,
    bus: EventBus,
    episode_id: int,
    persist_step: Callable[[StepRecord], None],
    watch: attribution.ContainerWatch | None = None,
) -> tuple[AgentResult, bool]:
    """Runs the agent in its terminal; returns its result and whether the terminal was still alive."""
    term = TerminalSession(
        client,
        sandbox.container,
        cols=COLS,
        rows=ROWS,
        recorder=cast,
        bus=bus,
        episode_id=episode_id,
        stream="agent",
        workdir=spec.workdir,
    )
    try:
        try:
            term.start()
        except Exception as exc:  # noqa: BLE001
            code = (
                "oom"
                if sandbox.oom_killed()
                else ("container_died" if not sandbox.is_running() else "env_start_timeout")
            )
            return AgentResult(infra_code=code, detail=f"agent terminal did not start: {exc}"), True
        if watch is not None:
            watch.mark_agent_started(getattr(term, "_exec_id", "") or "")
        ctx = AgentContext(
            task=spec,
            terminal=term,
            episode_id=episode_id,
            deadline=time.monotonic() + spec.agent_timeout_sec,
            recorder=cast,
            bus=bus,
            on_step=persist_step,
        )
        try:
            result = agent.run(ctx)
        except Exception as exc:  # noqa: BLE001 - an agent bug must still end in one outcome
            if not term.alive:  # the terminal went with the container or the shell: attribution decides
                return AgentResult(infra_code="container_died", detail=f"container stopped: {exc}"), False
            if not sandbox.is_running():
                code = "oom" if sandbox.oom_killed() else "container_died"
                return AgentResult(infra_code=code, detail=f"container stopped: {exc}"), term.alive
            return AgentResult(error_code="agent_crashed", detail=f"{type(exc).__name__}: {exc}"), True
        return result, term.alive
    finally:
        term.close()
