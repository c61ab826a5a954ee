"""One episode, end to end: image → sandbox → agent in its terminal → verifier → exactly one outcome.

Environment, agent and verifier stay separate (Harbor's split): the runner owns the containers and the two
recordings, the agent only types into its terminal, the verifier runs after the agent in a pty of its own
— by default in a clean room (engine/run/cleanroom.py: a fresh container of the image with only the task's
artifacts carried over); for a service task in the same kind of fresh container joined to the agent
container's network namespace (``service``: the service answers on localhost, none of the policy's
processes or files beside the verifier); in place only when a task asks for it (the agent's container,
the tamper guard the gate).
Every try is recorded; retryable infra errors get a bounded number of fresh tries, and whatever happens the
containers are removed and the episode row ends ``done`` with one outcome.

A compose task's services (engine/sandbox/services.py) come up before the agent's container, which joins
their network as ``main``; the clean room joins it too, so the verifier reaches the services by name as the
agent did. A multi-step task (``[[steps]]``: engine/tasks/steps.py) runs its steps in order in the same
containers: per step the workdir upload and ``setup.sh``, the healthcheck, the agent phase with the step's
instruction, the capture, the verifier (in a clean room of its own by default) and the step's result;
:meth:`_Trial.run_steps` says what ends the steps early and how the task's reward is made from theirs.
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import json
import posixpath
import shutil
import tarfile
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import docker
import docker.errors

from ...store import queries
from ...store.db import session
from ...store.models import TaskVersion, pk
from ...store.queries import endstate as endstate_store
from ...store.queries import task_steps as task_steps_store
from ..core import outcomes, plural
from ..core.events import EpisodeFinished, EpisodeStarted, EventBus
from ..core.events import bus as default_bus
from ..core.workspace import Workspace
from ..sandbox import attribution, hostview
from ..sandbox import pool as sandbox_pool
from ..sandbox import services as services_mod
from ..sandbox.asciicast import CastWriter
from ..sandbox.container import Sandbox, SandboxError, SandboxSpec, classify_docker_error
from ..sandbox.docker_engine import DockerUnavailable, get_client
from ..sandbox.labels import episode_labels
from ..sandbox.terminal import TerminalSession
from ..tasks import allowances
from ..tasks import rewards as rewards_mod
from ..tasks import steps as steps_mod
from ..tasks.artifacts import CLEAN_ROOM, FRESH, IN_PLACE, SERVICE
from ..tasks.images import (
    DEFAULT_IMAGE_ALIASES,
    BuildResult,
    ServiceImages,
    build_service_images,
    build_task_image,
    resolve_workdir,
)
from ..tasks.taskdir import TaskSpec, load_task
from . import cleanroom, endstate, guard, hooks, observer, phases
from .agents.base import Agent, AgentContext, AgentResult, StepRecord
from .endstate import EndState, StoredEndState
from .guard import Finding
from .verifier import LOGS_DIR, TESTS_DIR, VerifierResult, observer_enabled, run_verifier

COLS, ROWS = 160, 40
CAPTURE_TIMEOUT_S = 60.0  # stopping agent processes and reading the end state
#: What the verify phase may take beyond the tests' own timeout (a container, the artifacts, a terminal).
VERIFY_SLACK_S = 90.0
#: A verifier timeout on the policy's artifacts is the policy's when the oracle's artifacts verified
#: within this fraction of the same timeout (well inside: a loaded machine does not slow a verify 3x).
ORACLE_MARGIN = 1 / 3
#: Which of an episode's containers this is: ``agent`` (in place, also the verifier's) or ``verifier``
#: (the clean room); ``docker ps --filter label=bandpass.role=verifier`` lists the clean rooms.
ROLE_LABEL = "bandpass.role"
#: How long the clean room's container may take to start (a cold start under load).
ROOM_START_S = 120.0
#: Infra codes of the capture or the verifier that the agent's end state can cause: each gets a control.
CONTROL_CODES = frozenset(
    {"reward_missing", "verifier_timeout", "container_died", "oom", "exec_failed", "env_start_timeout"}
)
#: Of those, the ones a loaded machine produces on its own (a verifier or an exec slow to start, memory
#: pressure): without a guard finding they get no control at all.
LOAD_SENSITIVE_CODES = frozenset({"verifier_timeout", "env_start_timeout", "oom"})
#: Where the harness itself works in the agent's container (the verifier's logs and tests): a change here
#: is evidence the agent broke the harness even when no guard rule names it (``/logs`` made a file).
HARNESS_DIRS = ("/logs", "/tests")


def sandbox_lifetime_s(spec: TaskSpec, verifier_reruns: int = 0) -> float:
    """The hard lifetime of an episode's container (engine/sandbox/lifeline.py): every phase's timeout
    twice over (a loaded machine stretches a phase before its timeout cuts it) plus ten minutes, so a
    live episode never meets it; it bounds only a container whose owner stopped looking after it. A
    multi-step task's phases are every step's (its setup and healthcheck included)."""
    if spec.step_specs:
        phases_s = sum(
            (st.agent_timeout_sec or spec.agent_timeout_sec)
            + CAPTURE_TIMEOUT_S
            + st.verifier_timeout_sec * (1 + verifier_reruns)
            + STEP_SETUP_TIMEOUT_S
            + _healthcheck_budget(st.healthcheck)
            for st in spec.step_specs
        )
    else:
        phases_s = (
            spec.agent_timeout_sec + CAPTURE_TIMEOUT_S + spec.verifier_timeout_sec * (1 + verifier_reruns)
        )
    return 2 * (phases_s + _healthcheck_budget(spec.healthcheck)) + 600.0


#: How long a step's ``setup.sh`` may run (Harbor gives it no timeout of its own; a hung one must not hold
#: the episode past its container's lifetime).
STEP_SETUP_TIMEOUT_S = 300.0
#: Where a step's verifier casts go: ``verifier.step<N>.cast`` beside the agent's cast.
TASK_STEP_MARKER = "task step"


def _healthcheck_budget(hc: steps_mod.Healthcheck | None) -> float:
    """The longest a healthcheck can take: its start period, then ``retries`` failures at ``interval``."""
    if hc is None:
        return 0.0
    return hc.start_period_sec + (hc.retries + 1) * (hc.interval_sec + hc.timeout_sec) + 5.0


# --- fault tolerance: recordings disk full ---------------------------------------------------------------
# A cast write that fails for lack of space must end the try as one clear infra error. Raised where it
# happens it would surface in the pty reader thread (seen as a dead terminal: container_died) or in the
# agent (agent_crashed), both wrong. So the writer stops recording and remembers why; the try checks it.
DISK_FULL_CODE = "disk_full"  # not retryable: the next try would hit the same full disk


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
            if not phases.disk_full(exc):
                raise
            self.disk_error = f"recordings disk full: {self.path}: {exc.strerror}"
            f, self._f = self._f, None
            with contextlib.suppress(OSError):
                if f is not None:
                    f.close()  # flushing the rest fails again; the descriptor is closed regardless


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
    phases: list[dict[str, Any]] = field(default_factory=list)  # the last try's PhaseRecords
    endstate: EndState | None = None  # what the policy left (the last try's capture)
    guard_findings: list[Finding] = field(default_factory=list)
    image: str = ""
    #: Who ended the sandbox, with the engine's events (engine/sandbox/attribution/); {} when nothing did.
    evidence: dict[str, Any] = field(default_factory=dict)
    verify_mode: str = ""  # clean_room | service | in_place
    #: What crossed into the clean room (or, in place, which processes were kept): carry_json
    carry: dict[str, Any] = field(default_factory=dict)
    #: Every key of the verifier's reward.json (Harbor's ``rewards``; ``{"reward": x}`` for reward.txt)
    rewards: dict[str, float] = field(default_factory=dict)
    #: How the reward was read and what the observer saw (engine/run/verifier.py ``judge``)
    verifier_evidence: dict[str, Any] = field(default_factory=dict)
    #: A multi-step task's steps, in order (store/task_steps.py rows): [] for a single-step task
    task_steps: list[dict[str, Any]] = field(default_factory=list)


def image_aliases(ws: Workspace) -> dict[str, str]:
    return {**DEFAULT_IMAGE_ALIASES, **ws.config.image_aliases}


def ensure_image(
    ws: Workspace, client: docker.DockerClient, version: TaskVersion, spec: TaskSpec, bus: EventBus | None
) -> BuildResult:
    """Builds (or finds cached) the version's image, recording the build and the aliases it used; a task
    that declares no workdir gets its image's (``images.resolve_workdir``)."""
    if spec.docker_image:
        resolve_workdir(client, spec, spec.docker_image)
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
                pk(version),
                tag=res.tag,
                ok=res.ok,
                log=res.log,
                duration_s=res.duration,
            )
        if res.aliases_used:  # a cached image reports them too (kept in an image label)
            queries.set_version_aliases(s, pk(version), res.aliases_used)
    if res.ok:
        resolve_workdir(client, spec, res.tag)
    return res


def ensure_service_images(
    ws: Workspace, client: docker.DockerClient, version: TaskVersion, spec: TaskSpec, bus: EventBus | None
) -> ServiceImages:
    """Builds (or finds) a compose task's service images (engine/tasks/images.py), recording each build and
    adding the aliases they used to the version's (a validity risk the curator sees, as for the task's)."""
    res = build_service_images(
        client, spec, version.hash, aliases=image_aliases(ws), timeout_sec=spec.build_timeout_sec, bus=bus
    )
    with session(ws.engine) as s:
        for build in [*res.builds.values(), *res.failed.values()]:
            if not build.cached:
                queries.record_image_build(
                    s, pk(version), tag=build.tag, ok=build.ok, log=build.log, duration_s=build.duration
                )
        if res.aliases_used:
            tv = queries.get_version(s, pk(version))
            known = [tuple(a) for a in json.loads(tv.image_aliases_json or "[]")] if tv is not None else []
            merged = known + [a for a in res.aliases_used if a not in known]
            if merged != known:
                queries.set_version_aliases(s, pk(version), merged)
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
    replay: StoredEndState | None = None,
    verify_mode: str | None = None,
    oracle_verify_s: dict[str, float] | None = None,
) -> EpisodeResult:
    """Runs one episode to its outcome. ``agent`` may be a factory so each try gets a fresh agent.

    ``episode_id`` resumes a queued row (rollout batches); otherwise a row is created.
    ``verifier_reruns`` runs the verifier again on the final state that many times (the audit's
    "reruns agree" check); their rewards come back in ``rerun_rewards``.
    ``replay`` puts a stored end state into the container instead of running the agent (regrade).
    ``verify_mode`` (``clean_room``/``service``/``in_place``) overrides where the verifier runs (the
    audit's footprint check runs the oracle several ways); by default the version's own
    (:func:`verify_mode_of`).
    ``oracle_verify_s`` (mode -> seconds) is the oracle's verify time when this store does not hold the
    oracle's episodes (a Ray worker's scratch workspace: the head sends it).
    """
    bus = default_bus if bus is None else bus
    # A factory or an instance, told apart at run time (a class has a ``run`` attribute too).
    is_factory = isinstance(agent, type) or not hasattr(agent, "run")
    make_agent: Callable[[], Agent] = (
        agent if is_factory else (lambda: agent)  # type: ignore[assignment,return-value]  # told apart above
    )
    with session(ws.engine) as s:
        version = queries.get_version(s, version_id)
        if version is None:
            raise KeyError(f"task version {version_id} does not exist")
        if episode_id is None:
            episode_id = pk(
                queries.create_episode(s, version_id, make_agent().name, attempt=attempt, batch_id=batch_id)
            )
        task_row = queries.task_by_id(s, version.task_id)
        queries.mark_episode_running(s, episode_id)
    agent_name = make_agent().name
    bus.publish(
        EpisodeStarted(
            episode_id=episode_id,
            task_name=task_row.name if task_row else "",
            agent=agent_name,
            attempt=attempt,
            batch_id=batch_id,
        )
    )

    result = EpisodeResult(episode_id, "", None)
    try_errors: list[str] = []
    for try_no in range(max_infra_retries + 1):
        with session(ws.engine) as s:
            queries.delete_steps(s, episode_id)
        result = _one_try(
            ws,
            version,
            make_agent(),
            client,
            bus,
            episode_id,
            try_no,
            verifier_reruns,
            replay,
            batch_id,
            verify_mode,
            oracle_verify_s,
        )
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

    _store_result(ws, episode_id, result)
    hooks.episode_ended(ws, episode_id)  # what follows an end (the diagnosis), stored before anyone hears it
    bus.publish(EpisodeFinished(episode_id=episode_id, outcome=result.outcome, reward=result.reward))
    return result


def _store_result(ws: Workspace, episode_id: int, result: EpisodeResult) -> None:
    """The finished row, its phase timings and its end state (with the guard's findings), in one go."""
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
        queries.set_episode_rewards(s, episode_id, result.rewards, result.verifier_evidence)
        task_steps_store.record_task_steps(s, episode_id, result.task_steps)
        endstate_store.set_phases(s, episode_id, result.phases)
        endstate_store.set_verify_mode(s, episode_id, result.verify_mode)
        if result.endstate is not None:
            state = result.endstate
            endstate_store.record_endstate(
                s,
                episode_id,
                archive=ws.rel(state.archive) if state.archive else "",
                image=result.image,
                changes=state.change_dicts(),
                findings=[f.as_dict() for f in result.guard_findings],
                archived_bytes=state.archived_bytes,
                cap_bytes=state.cap_bytes,
                over_cap=state.over_cap,
                capture_s=state.duration_s,
                carry={**result.carry, "capture": state.figures()},  # what the capture read, left unread
            )


def _one_try(
    ws: Workspace,
    version: TaskVersion,
    agent: Agent,
    client: docker.DockerClient | None,
    bus: EventBus,
    episode_id: int,
    try_no: int,
    verifier_reruns: int,
    replay: StoredEndState | None = None,
    batch_id: str = "",
    verify_mode: str | None = None,
    oracle_verify_s: dict[str, float] | None = None,
) -> EpisodeResult:
    """One try as Harbor's trial: set up, run the agent, capture the end state, verify, finalise.

    Attribution (engine/sandbox/attribution/) watches the container from just before the agent runs:
    right after the agent it judges whether the container (or the agent's shell) ended and who ended it;
    such a try ends there (after capturing the end state while the container still runs), and after the
    verifier a death the agent's last command set off is judged too (``late_death``).

    Each phase raises a :class:`~engine.run.phases.PhaseError` carrying its outcome; this loop only
    runs the phases in order and turns the first error into the result. An infra error of the capture or
    the verifier after a clean agent phase gets a control first (``_Trial.control``): the verifier on a
    fresh container tells whether the agent's end state broke it.
    """
    trial = _Trial(ws, version, agent, bus, episode_id, try_no, verifier_reruns, batch_id, verify_mode)
    trial.yardstick = oracle_verify_s
    try:
        trial.setup(client, replaying=replay is not None)
        if trial.task is not None and trial.task.step_specs:
            trial.run_steps()
        else:
            agent_result = trial.run_agent() if replay is None else trial.apply_endstate(replay)
            trial.collect(main=True)  # Harbor's collect hooks in main, before its end state is read
            trial.capture()
            trial.collect(main=False)  # then the services' hooks and artifacts, main frozen
            trial.end_if_sandbox_ended()  # the policy ended its sandbox: its end state is kept, no verifier
            verdict = trial.verify()
            trial.judge_late_death()
            trial.finalise(agent_result, verdict)
    except Exception as exc:  # noqa: BLE001 - every failure ends in exactly one outcome
        err = phases.from_exception(exc, casts=("agent_cast", "verifier_cast"))
        # did the agent's end state break the harness's work? (a control that cannot run changes nothing)
        with contextlib.suppress(Exception):
            err = trial.control(err)
        trial.fail(err)
    finally:
        trial.release()
    trial.res.phases = trial.clock.as_list()
    if trial.collect_notes:  # Harbor's collect hooks and the services' artifacts: kept with the carry
        trial.res.carry = {**trial.res.carry, "collect": trial.collect_notes}
    return trial.res


class _Trial:
    """The state one try's phases share: the task, the container, the recordings, the result."""

    def __init__(
        self,
        ws: Workspace,
        version: TaskVersion,
        agent: Agent,
        bus: EventBus,
        episode_id: int,
        try_no: int,
        verifier_reruns: int,
        batch_id: str = "",
        verify_mode: str | None = None,
    ) -> None:
        self.ws, self.version, self.agent, self.bus = ws, version, agent, bus
        self.mode_asked = verify_mode
        self.mode = CLEAN_ROOM  # resolved in setup (verify_mode_of)
        self.verifier_spec: SandboxSpec | None = None
        self.verifier_sandbox: Sandbox | None = None  # the clean room (or the service's verifier)
        self._room_restarts = 0  # the agent container's restarts when the service verifier joined it
        self.carry: cleanroom.Carry | None = None
        self.found_dead = False  # the capture found the agent's container already stopped
        self._room: _Prestart | None = None  # the clean room, started during the agent phase
        self.prepared = False  # the clean room got /tests and /logs/verifier with the artifacts
        self.kit: observer.Kit | None = None  # the verifier's wrapper and observer, carried in with them
        self.yardstick: dict[str, float] | None = None  # the oracle's verify seconds, when sent along
        self.live_fetch = True  # over-cap artifacts can still be read from the agent's container
        self.batch_id = batch_id  # labels the container, so gc --batch and node cleanup find it
        self.episode_id, self.try_no, self.verifier_reruns = episode_id, try_no, verifier_reruns
        self.res = EpisodeResult(episode_id, "", None)
        self.clock = phases.PhaseClock()
        self.client: docker.DockerClient | None = None
        self.spec: TaskSpec | None = None
        self.sandbox: Sandbox | None = None
        self.ended: phases.SandboxEnded | None = None  # the attribution's verdict after the agent phase
        self.watch: attribution.ContainerWatch | None = None  # who ends the sandbox (agent phase on)
        self.sandbox_spec: SandboxSpec | None = None
        self.agent_done = False  # the agent phase (or a regrade's replay) finished without an error
        self.image = ""
        self.rec_dir = ws.recordings_dir / f"episode-{episode_id}"
        suffix = f".try{try_no}" if try_no else ""
        self.agent_path = self.rec_dir / f"agent{suffix}.cast"
        self.verifier_path = self.rec_dir / f"verifier{suffix}.cast"
        self.title = ""
        #: the task as imported; ``spec`` is the one the current phase runs (a step's, for a multi-step task)
        self.task: TaskSpec | None = None
        self.services: services_mod.Services | None = None  # a compose task's other services
        self._shared_cast: _GuardedCastWriter | None = None  # a multi-step task's one agent cast
        self.step_offset = 0  # policy steps of earlier task steps (their indices continue)
        self._service_files = b""  # a tar of the services' artifacts, for the clean room
        self.collect_notes: list[
            dict[str, Any]
        ] = []  # what the collect hooks and artifacts gave (carry_json)

    # --- phase 1: the environment -------------------------------------------------------------------

    def setup(self, client: docker.DockerClient | None, replaying: bool = False) -> None:
        try:
            self.task = self.spec = spec = with_adopted(
                self.version, load_task(self.ws.abs(self.version.path))
            )
        except Exception as exc:  # a stored version that no longer loads is infra
            raise phases.TaskUnusable(f"task files unusable: {exc}") from exc
        if spec.step_specs and replaying:
            raise phases.TaskUnsupported(
                f"a multi-step task ([[steps]]: {', '.join(spec.steps)}): regrade replays one end state, and "
                "each step's verifier judged its own"
            )
        first = spec
        if spec.step_specs:  # the first step's verifier decides where the first clean room is needed
            first = dataclasses.replace(spec, verify_mode=spec.step_specs[0].verify_mode or spec.verify_mode)
        self.mode = self.mode_asked or verify_mode_of(self.version, first)
        self.res.verify_mode = self.mode
        self.title = f"{spec.name} · {self.agent.name} · episode {self.episode_id}"
        with self.clock.phase(phases.SETUP, spec.build_timeout_sec):
            try:
                self.client = client = client or get_client()
            except DockerUnavailable as exc:
                raise phases.DaemonUnavailable(str(exc)) from exc
            build = ensure_image(self.ws, client, self.version, spec, self.bus)
            if not build.ok:
                tail = "\n".join(build.log.splitlines()[-15:])
                raise phases.ImageBuildFailed(f"image build failed ({build.error}):\n{tail}")
            self.image = build.tag
            try:
                self.rec_dir.mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # a full or broken recordings disk is infra, one line
                if phases.disk_full(exc):
                    raise phases.DiskFull(f"recordings disk full: {self.rec_dir}: {exc.strerror}") from exc
                raise phases.PhaseError(str(exc), DISK_FULL_CODE) from exc
            self.res.agent_cast = self.ws.rel(self.agent_path)
            self.res.verifier_cast = self.ws.rel(self.verifier_path)
            if spec.compose is not None:
                self._start_services(client, build.tag)
            services = self.services
            any_in_place = self.mode == IN_PLACE or any(
                (self.mode_asked or st.verify_mode or spec.verify_mode) == IN_PLACE for st in spec.step_specs
            )
            sandbox_spec = SandboxSpec(
                image=build.tag,
                cpus=spec.cpus,
                memory_mb=spec.memory_mb,
                pids_limit=spec.pids_limit or 512,
                network=spec.network,
                workdir=spec.workdir,
                episode=self.episode_id,
                labels={**episode_labels(self.ws.root, self.batch_id), ROLE_LABEL: "agent"},
                max_lifetime_s=sandbox_lifetime_s(spec, self.verifier_reruns),
                # in place the verifier runs here: it gets what a verifier needs (cleanroom.py)
                default_caps=any_in_place,
                # a compose task: on the services' network, as Harbor's ``main``, with main's environment
                network_name=services.network_name if services is not None else "",
                aliases=("main",) if services is not None else (),
                env=dict(services.main_environment) if services is not None else {},
            )
            self.sandbox_spec = sandbox_spec
            # the clean room: the same image, limits and labels, Docker's default capabilities (apt-get in
            # test.sh) and the verifier's own network (Harbor: [verifier] network_mode, else the task's)
            self.verifier_spec = dataclasses.replace(
                sandbox_spec,
                default_caps=True,
                network=spec.verifier_network,
                labels={**sandbox_spec.labels, ROLE_LABEL: "verifier"},
                aliases=(),  # on a compose task's network the clean room reaches the services, as main did
            )
            if self.mode == CLEAN_ROOM:  # started while the agent works: the verify phase finds it ready
                self._room = _Prestart(client, self.verifier_spec)
            if replaying and self.mode == CLEAN_ROOM:
                return  # regrade in a clean room: the stored end state needs no agent container
            try:  # a pre-started spare when the warm pool has one (engine/sandbox/pool.py), else cold
                self.sandbox = sandbox_pool.acquire(client, sandbox_spec)
            except Exception as exc:
                raise phases.EnvironmentFailed(str(exc), classify_docker_error(exc)) from exc
            if self.mode == SERVICE:  # joined to the agent's network namespace, so started once that runs
                self._room = _Prestart(client, self._service_spec())
            if spec.healthcheck is not None:  # Harbor's [environment.healthcheck]: before any agent acts
                failed = self._healthcheck(spec.healthcheck)
                if failed:
                    raise phases.EnvironmentFailed(
                        f"[environment.healthcheck]: {failed}", "env_start_timeout"
                    )

    def _start_services(self, client: docker.DockerClient, main_image: str) -> None:
        """A compose task's other services: their images (built offline), then ``docker compose up
        --wait`` on the episode's own network (engine/sandbox/services.py)."""
        assert self.spec is not None
        images = ensure_service_images(self.ws, client, self.version, self.spec, self.bus)
        failure = images.failure()
        if failure is not None:
            name, build = failure
            tail = "\n".join(build.log.splitlines()[-15:])
            raise phases.ImageBuildFailed(f"service {name}: image build failed ({build.error}):\n{tail}")
        self.services = services_mod.Services(
            client,
            self.spec,
            images.tags,
            main_image=main_image,
            project=services_mod.project_name(self.episode_id, self.try_no),
            labels={**episode_labels(self.ws.root, self.batch_id), "bandpass.episode": str(self.episode_id)},
            lifetime_s=sandbox_lifetime_s(self.spec, self.verifier_reruns),
        )
        try:
            self.services.up()
        except services_mod.ComposeMissing as exc:
            raise phases.TaskUnsupported(str(exc)) from exc
        except services_mod.ServicesError as exc:
            raise phases.EnvironmentFailed(str(exc), "env_start_timeout") from exc

    def _healthcheck(self, hc: steps_mod.Healthcheck) -> str:
        """Harbor's healthcheck (Docker HEALTHCHECK semantics): the command is polled in the agent's
        container; failures during the start period do not count, then ``retries`` consecutive ones fail
        it. '' when it passed, else why not."""
        assert self.sandbox is not None
        end_of_start = time.monotonic() + hc.start_period_sec
        failures, out = 0, ""
        while True:
            try:
                code, out = self.sandbox.exec(["bash", "-c", hc.command], timeout=max(1.0, hc.timeout_sec))
            except Exception as exc:  # noqa: BLE001 - a failing exec is a failing check
                code, out = -1, str(exc)
            if code == 0:
                return ""
            if time.monotonic() < end_of_start:
                time.sleep(hc.start_interval_sec)
                continue
            failures += 1
            if failures >= hc.retries:
                tail = " | ".join(out.strip().splitlines()[-3:])
                return f"failed {plural.counted(hc.retries, 'time')} in a row: {hc.command}" + (
                    f" ({tail})" if tail else ""
                )
            time.sleep(hc.interval_sec)

    # --- phase 2: the agent -------------------------------------------------------------------------

    def _service_spec(self) -> SandboxSpec:
        """The service verifier's container: the clean room's, in the agent container's network namespace
        (the agent's network, whatever ``[verifier] network_mode`` says: it is the service's)."""
        assert self.verifier_spec is not None and self.sandbox is not None
        self._room_restarts = self.sandbox.restarts
        return dataclasses.replace(self.verifier_spec, network=False, network_of=self.sandbox.id)

    def run_agent(self) -> AgentResult:
        assert self.spec is not None and self.sandbox is not None and self.client is not None
        with self.clock.phase(phases.AGENT, self.spec.agent_timeout_sec):
            # attribution: the engine's events for this container, from before the agent's terminal starts
            self.watch = watch = attribution.ContainerWatch(
                self.client,
                self.sandbox,
                memory_limit_mb=self.spec.memory_mb,
                pids_limit=self.sandbox.spec.pids_limit,
                storage_mb=self.spec.storage_mb,
            ).start()
            with self._agent_cast() as cast:
                result, terminal_alive = _run_agent(
                    self.client,
                    self.sandbox,
                    self.spec,
                    self.agent,
                    cast,
                    self.bus,
                    self.episode_id,
                    self._persist_step,
                    watch,
                    step_offset=self.step_offset,
                )
            # who ended the container or the agent's shell, if anything did; this replaces the plain
            # "container not running: infra" rule (phases.container_stopped) for the agent phase
            blame = watch.judge(terminal_alive=terminal_alive, reported_code=result.infra_code)
            self.res.evidence = watch.evidence.as_dict()
            over_allowance = blame is not None and blame.outcome == outcomes.agent_error("disk_full")
            if cast.disk_error and not over_allowance:  # the recording is the sample; without it, none
                # (a host disk the policy filled by going over its own allowance is still the policy's)
                raise phases.DiskFull(cast.disk_error, ("agent_cast", "verifier_cast"))
            if blame is not None:
                ended = phases.SandboxEnded(blame.outcome, f"{blame.why}; {result.detail}".strip("; "))
                if not ended.keeps_reward:  # infrastructure: no sample, nothing of the policy's to keep
                    raise ended
                self.ended = ended  # the policy's doing: its end state is captured before the try ends
            elif result.infra_code:
                raise phases.AgentInfra(result.detail, result.infra_code)
        self.agent_done = self.ended is None
        return result

    @contextlib.contextmanager
    def _agent_cast(self) -> Iterator[_GuardedCastWriter]:
        """The agent's recording: a multi-step task's steps all write the one cast (closed after the last)."""
        if self._shared_cast is not None:
            yield self._shared_cast
            return
        with _GuardedCastWriter(
            self.agent_path, COLS, ROWS, title=self.title, env={"TERM": "xterm-256color"}
        ) as cast:
            yield cast

    def apply_endstate(self, replay: StoredEndState) -> AgentResult:
        """Regrade's agent phase: the source episode's end state instead of a policy. In place it is put
        back into a fresh container of the image (and captured again); in a clean room it is already the
        captured end state, and only its artifacts will cross, as in the episode."""
        with self.clock.phase(phases.AGENT, CAPTURE_TIMEOUT_S):
            if self.sandbox is not None:
                endstate.apply(self.sandbox, replay)
            else:
                self.res.endstate = endstate.stored_state(replay)
                self.res.image = self.image
                self.live_fetch = False
        self.agent_done = True
        self.res.agent_cast = replay.agent_cast
        return AgentResult(error_code=replay.error_code, detail=replay.detail)

    def _persist_step(self, step: StepRecord) -> None:
        self.res.steps += 1
        with session(self.ws.engine) as s:
            queries.add_step(
                s,
                self.episode_id,
                step.index,
                prompt_tokens=step.prompt_tokens,
                completion_tokens=step.completion_tokens,
                latency_s=step.latency_s,
                action=step.action,
                raw_reply=step.raw_reply,
                observation=step.observation,
                cuts=step.cuts,
                marker_time=step.marker_time,
                attempts=step.attempts,
            )

    # --- phase 3: the end state ---------------------------------------------------------------------

    def capture(self) -> None:
        """Stops the agent, records what the policy changed and what the tamper guard makes of it (before
        ``tests/`` exists anywhere, so the evidence is the policy's alone), and plans the clean room's
        carry. Read from the host: nothing runs in the agent's container for it."""
        assert self.spec is not None and self.client is not None
        if self.sandbox is None:  # regrade in a clean room: the stored end state is the capture
            with self.clock.phase(phases.CAPTURE, CAPTURE_TIMEOUT_S):
                self._guard_stored()
            return
        if self.ended is not None:
            if not self.sandbox.is_running():
                return  # the policy ended the container: nothing runs to read (restarting it would be ours)
            try:
                self._capture()
            except Exception as exc:  # noqa: BLE001 - the policy's outcome stands; the capture is evidence
                self.ended.detail = f"{self.ended.detail}; end state not captured: {exc}"
            return
        self._capture()

    def _capture(self) -> None:
        assert self.spec is not None and self.sandbox is not None and self.client is not None
        sandbox, client = self.sandbox, self.client
        body = {CLEAN_ROOM: self._capture_clean_room, SERVICE: self._capture_service}.get(
            self.mode, self._capture_in_place
        )
        with self.clock.phase(phases.CAPTURE, CAPTURE_TIMEOUT_S):
            # enforced: past its budget the agent's container is removed (whatever blocked goes with it)
            phases.bounded(
                body,
                CAPTURE_TIMEOUT_S,
                what="the capture",
                code="orchestrator_failure",
                on_timeout=lambda: client.api.remove_container(sandbox.id, force=True),
            )

    def _capture_clean_room(self) -> None:
        """The agent's container is frozen (the engine's cgroup freezer: every process stops at once, a
        fork loop included) and read from the host; nothing of the policy's runs again."""
        assert self.spec is not None and self.sandbox is not None and self.client is not None
        if not hostview.freeze(self.client, self.sandbox.id):
            self.found_dead = not self.sandbox.is_running()  # ended after the agent returned: late_death
        state = self._capture_and_guard()
        self.carry = cleanroom.plan(state.changes, self.spec.artifact_roots, self.spec.workdir)
        self.res.carry = self.carry.as_dict()

    def _keep_listeners(self) -> tuple[list[hostview.Listener], int, bool]:
        """A service must keep answering: the processes holding a listening TCP socket stay, every other
        one is SIGKILLed from the host with the container frozen, and it is left frozen so the caller
        reads a still end state (a file the service keeps growing is read as it was), then thaws it.
        Returns (kept, how many were killed or -1 when unknown, frozen). A container that is not running
        (the agent's last act stopped it: restarted here, late_death reads that) or a remote engine (the
        host cannot see its processes): every process goes, a service too."""
        assert self.sandbox is not None and self.client is not None
        client, sandbox = self.client, self.sandbox
        if not sandbox.is_running() or not hostview.local(client):
            sandbox.kill_all_processes_except_init()
            return [], -1, False
        frozen = hostview.freeze(client, sandbox.id)
        try:
            kept = hostview.listeners(client, sandbox.id)
            killed = len(hostview.kill_except(client, sandbox.id, {k.pid for k in kept}))
        except BaseException:
            if frozen:
                hostview.thaw(client, sandbox.id)
            raise
        return kept, killed, frozen

    def _capture_service(self) -> None:
        """A service task: the service (the listening processes) keeps running in the agent's container,
        everything else there is killed, the end state is read while it is frozen; the verifier then runs
        in a fresh container joined to that container's network (``_verifier_container``), with the
        artifacts carried as into the clean room. The guard's findings are evidence, as in the clean room:
        nothing of the policy's filesystem reaches the verifier."""
        assert self.spec is not None and self.sandbox is not None and self.client is not None
        kept, killed, frozen = self._keep_listeners()
        try:
            state = self._capture_and_guard()
        finally:
            if frozen:
                hostview.thaw(self.client, self.sandbox.id)
        self.carry = cleanroom.plan(state.changes, self.spec.artifact_roots, self.spec.workdir)
        self.res.carry = {**self.carry.as_dict(), "kept": [k.as_dict() for k in kept], "killed": killed}

    def _capture_in_place(self) -> None:
        """In place (a task that asks for it): the verifier runs here, so the processes holding a listening
        socket (the service) stay alive and every other one is killed from the host, the container frozen
        meanwhile (``_keep_listeners``); ``/dev`` is checked from the host (a FIFO at ``/dev/null`` would
        block the harness's own shell); FIFOs, sockets and devices under the artifacts are removed, as the
        clean room drops them."""
        assert self.spec is not None and self.sandbox is not None and self.client is not None
        client, sandbox = self.client, self.sandbox
        local = hostview.local(client)
        kept, killed, frozen = self._keep_listeners()
        try:
            state = self._capture_and_guard()
            pid = hostview.init_pid(client, sandbox.id) if local else None
            dev = hostview.dev_findings(pid) if pid else None
        finally:
            if frozen:
                hostview.thaw(client, sandbox.id)
        allow, _problems = allowances.parse(self.spec.metadata)
        self.res.guard_findings += guard.dev_findings(dev or [], allow)
        self.carry = cleanroom.plan(state.changes, self.spec.artifact_roots, self.spec.workdir)
        # a FIFO, socket or device among the artifacts is removed (below), as the clean room drops it; links
        # stay as they are (nothing crosses anywhere in place)
        special = {c.path for c in state.changes if c.type == "other"}
        self.carry.dropped = [f for f in self.carry.dropped if f.path in special]
        dropped = {f.path for f in self.carry.dropped}
        self.res.guard_findings = [
            f for f in self.res.guard_findings if not (f.rule == "special_file" and f.path in dropped)
        ]
        self.res.carry = {
            **self.carry.as_dict(),
            "kept": [k.as_dict() for k in kept],
            "killed": killed,
            "dev_checked": dev is not None,
        }
        if self._blocked():
            return  # nothing more runs in there: the outcome is the guard's
        drop = [f.path for f in self.carry.dropped]
        stale = guard.bytecode_to_drop(state.changes)  # caches only: Python rebuilds them from the sources
        if drop or stale:
            sandbox.exec(["/bin/rm", "-f", "--", *drop, *stale], timeout=30)

    def _blocked(self) -> bool:
        """In place, a tripped rule that makes anything the harness starts there block (/dev tampered,
        a FIFO where a program reads)."""
        return any(f.rule in guard.BLOCKING_RULES for f in guard.tripped(self.res.guard_findings))

    def _guard_stored(self) -> None:
        """Regrade in a clean room: the stored end state judged by this version's guard (evidence) and
        planned for the carry."""
        assert self.spec is not None and self.client is not None and self.res.endstate is not None
        state = self.res.endstate
        in_image = _ImagePaths(self.client, self.image)
        state.exists_in_image = in_image
        allow, _problems = allowances.parse(self.spec.metadata)
        try:
            self.res.guard_findings = guard.check(
                state.changes, exists_in_image=state.exists_in_image, contents=state.contents, allow=allow
            )
        finally:
            in_image.cleanup()
        self.carry = cleanroom.plan(state.changes, self.spec.artifact_roots, self.spec.workdir)
        self.res.carry = self.carry.as_dict()

    def end_if_sandbox_ended(self) -> None:
        """The attribution put the container's (or the agent shell's) end on the policy: a valid sample,
        reward 0, never retried; the verifier does not run."""
        if self.ended is not None:
            self.res.reward = 0.0
            raise self.ended

    # --- Harbor's collect hooks and the services' artifacts -----------------------------------------

    def collect(self, *, main: bool) -> None:
        """Harbor's ``[[verifier.collect]]`` hooks (best effort: a failing hook is noted, never fatal) and,
        after the capture, the artifacts declared from compose services. ``main``: the hooks that run in
        the agent's container, before its end state is read (what they write is part of it); else the
        services' hooks, then their artifacts: fetched from the service's container through the engine,
        kept with the recordings (``artifacts.<service>.tar``) and, in the clean room, carried in at their
        source paths (Harbor's separate verifier gets them there). A policy ending its sandbox skips them."""
        spec = self.spec
        if spec is None or self.client is None or self.ended is not None or self.sandbox is None:
            return
        hooks = [h for h in spec.collect if (h.service == "main") == main]
        notes: list[dict[str, Any]] = []
        for hook in hooks:
            notes.append(self._run_hook(hook))
        if not main:
            self._fetch_service_artifacts(notes)
        step = {"step": spec.current_step} if spec.current_step else {}
        self.collect_notes += [{**step, **n} for n in notes]

    def _run_hook(self, hook: steps_mod.CollectHook) -> dict[str, Any]:
        assert self.client is not None and self.sandbox is not None
        note: dict[str, Any] = {"service": hook.service, "command": hook.command}
        try:
            if hook.service == "main":
                code, out = self.sandbox.exec(["sh", "-c", hook.command], timeout=hook.timeout_sec)
            else:
                cid = self.services.container_of(hook.service) if self.services is not None else None
                if cid is None:
                    return {**note, "error": f"no running service {hook.service!r}"}
                code, out = _service_exec(self.client, cid, hook.command, hook.timeout_sec)
            note.update(exit_code=code, output=out[-500:])
        except Exception as exc:  # noqa: BLE001 - Harbor: a failing hook never aborts the trial
            note["error"] = f"{type(exc).__name__}: {exc}"
        return note

    def _fetch_service_artifacts(self, notes: list[dict[str, Any]]) -> None:
        assert self.spec is not None and self.client is not None
        self._service_files = b""
        if not self.spec.service_artifacts:
            return
        buf = io.BytesIO()
        with tarfile.open(fileobj=buf, mode="w") as out:
            for service, path in self.spec.service_artifacts:
                note: dict[str, Any] = {"service": service, "artifact": path}
                cid = self.services.container_of(service) if self.services is not None else None
                if cid is None:
                    notes.append({**note, "error": f"no service {service!r}"})
                    continue
                try:
                    stream, _stat = self.client.api.get_archive(cid, path)
                    note["files"] = _copy_safe(io.BytesIO(b"".join(stream)), out, path)
                except docker.errors.NotFound:
                    note["error"] = "not there"
                except Exception as exc:  # noqa: BLE001 - an artifact that cannot be read is noted, not fatal
                    note["error"] = f"{type(exc).__name__}: {exc}"
                notes.append(note)
        data = buf.getvalue()
        if any(n.get("files") for n in notes):
            self._service_files = data
            suffix = f".try{self.try_no}" if self.try_no else ""
            step = f".{self.spec.current_step}" if self.spec.current_step else ""
            with contextlib.suppress(OSError):
                (self.rec_dir / f"artifacts{step}{suffix}.services.tar").write_bytes(data)

    # --- phase 4: the verifier ----------------------------------------------------------------------

    def verify(self) -> VerifierResult:
        """The verifier in the clean room (a fresh container, the artifacts carried in) or in place. The
        phase's timeout is enforced; a verifier that cannot run on what the policy left is not run."""
        assert self.spec is not None and self.client is not None
        spec = self.spec
        if self.carry is not None and self.carry.workdir_replaced:
            return VerifierResult(None, None, "", f"not verified: {self.carry.workdir_replaced}")
        if self._truncated():
            return VerifierResult(None, None, "", "not verified: the end state capture was cut short")
        if self.mode == IN_PLACE and self._blocked():
            return VerifierResult(None, None, "", "not verified: " + guard.summary(self.res.guard_findings))
        budget = spec.verifier_timeout_sec * (1 + self.verifier_reruns) + VERIFY_SLACK_S
        with self.clock.phase(phases.VERIFY, budget):
            try:
                verdict = phases.bounded(
                    self._verify_body,
                    budget,
                    what="the verify phase",
                    code="verifier_timeout",
                    on_timeout=self._abandon_verifier,
                )
            except phases.PhaseTimeout as exc:
                verdict = VerifierResult(None, "verifier_timeout", "", exc.detail)
            self.res.verifier_output = verdict.output
            self.res.reward = verdict.reward
            self.res.rewards, self.res.verifier_evidence = verdict.components, verdict.evidence
        return verdict

    def _verifier_container(self) -> Sandbox:
        """The clean room: a fresh container of the image (a pre-started spare when the warm pool has one)
        with the carry applied; for a service task the same, joined to the agent container's network (a
        new one when that container was restarted since: its network namespace is then another)."""
        assert self.client is not None and self.spec is not None and self.verifier_spec is not None
        assert self.carry is not None
        try:
            room, self._room = self._room, None
            fresh = room.take() if room is not None else None
            rejoin = self.mode == SERVICE and (
                self.sandbox is None or self.sandbox.restarts != self._room_restarts
            )
            if fresh is None or rejoin or not fresh.is_running():
                if fresh is not None:
                    sandbox_pool.release(fresh)
                spec = self._service_spec() if self.mode == SERVICE else self.verifier_spec
                fresh = sandbox_pool.acquire(self.client, spec)
            self.verifier_sandbox = fresh
        except Exception as exc:
            raise phases.VerifierInfra(
                f"clean room did not start: {exc}", classify_docker_error(exc)
            ) from exc
        state = self.res.endstate
        agent = self.sandbox.id if self.sandbox is not None and self.live_fetch else ""
        # the tests and an empty /logs/verifier ride with the artifacts (one round trip), unless the
        # image itself ships one of them (then the verifier resets them as in place)
        self.prepared = not any(
            endstate.path_stat(self.client, fresh.id, p) is not None for p in (TESTS_DIR, LOGS_DIR)
        )
        self.kit = observer.Kit(observer.new_nonce()) if self.prepared and observer_enabled() else None
        data = cleanroom.build(
            self.carry,
            state.archive if state is not None else None,
            cleanroom.fetcher(self.client, agent) if agent else None,
            tests=self.spec.tests_dir if self.prepared else None,
            logs_dir=LOGS_DIR if self.prepared else "",
            extra=self.kit.add_to if self.kit is not None else None,
        )
        try:
            cleanroom.apply(fresh, self.carry, data)
            if self._service_files:  # a compose service's artifacts, at their source paths (Harbor's)
                fresh.container.put_archive("/", self._service_files)
        except Exception as exc:  # the engine, not the policy: the artifacts are files
            raise phases.VerifierInfra(f"artifacts not carried: {exc}", classify_docker_error(exc)) from exc
        # build() may have dropped what it could not read (a service's kept processes stay on record)
        self.res.carry = {**self.res.carry, **self.carry.as_dict()}
        return fresh

    def _verify_body(self) -> VerifierResult:
        assert self.spec is not None and self.client is not None
        spec = self.spec
        target = self._verifier_container() if self.mode in FRESH else self.sandbox
        assert target is not None
        with _GuardedCastWriter(
            self.verifier_path,
            COLS,
            ROWS,
            title=f"{self.title} · verifier",
            env={"TERM": "xterm-256color"},
        ) as vc:
            prepared = self.mode in FRESH and self.prepared
            verdict = run_verifier(
                self.client,
                target,
                spec,
                recorder=vc,
                bus=self.bus,
                episode_id=self.episode_id,
                cols=COLS,
                rows=ROWS,
                agent_stopped=True,
                prepared=prepared,
                kit=self.kit if prepared else None,
                resume=self.verifier_reruns > 0,
                primary=self.primary,
            )
            for n in range(self.verifier_reruns):
                vc.marker("rerun")
                # nothing of the agent's runs any more (in place: only the service it left, which the
                # verifier needs): only the logs and tests are reset between runs
                again = run_verifier(
                    self.client,
                    target,
                    spec,
                    recorder=vc,
                    bus=self.bus,
                    episode_id=self.episode_id,
                    agent_stopped=True,
                    resume=n < self.verifier_reruns - 1,
                    primary=self.primary,
                )
                self.res.rerun_rewards.append(again.reward)
        if vc.disk_error:  # as above, for the verifier's recording
            raise phases.DiskFull(vc.disk_error, ("verifier_cast",))
        return verdict

    def _abandon_verifier(self) -> None:
        """The verify phase ran past its budget: its container goes (the clean room) or is restarted (in
        place), which ends whatever the verifier's exec was blocked on."""
        if self.mode in FRESH and self.verifier_sandbox is not None:
            self.verifier_sandbox.remove()
        elif self.sandbox is not None and self.client is not None:
            self.sandbox.stopped_by_harness.append("restarted: the verify phase ran past its timeout")
            self.client.api.restart(self.sandbox.id, timeout=0)

    def judge_late_death(self) -> None:
        """A death the agent set off as its last act lands after it returned: the capture phase found the
        container dead (in place it restarted it); that is still the policy's doing, whatever the
        verifier said."""
        if self.watch is None:
            return
        late = self.watch.late_death(found_dead=self.found_dead)
        self.res.evidence = (
            self.watch.evidence.as_dict() if late or self.watch.evidence.actions("oom") else {}
        )
        if late is not None:
            self.res.reward = 0.0
            raise phases.SandboxEnded(late.outcome, late.why)

    # --- phase 5: the outcome -----------------------------------------------------------------------

    def finalise(self, agent_result: AgentResult, verdict: VerifierResult) -> None:
        """Precedence: tampering (in place only: in the clean room the guard is evidence), a workdir the
        policy replaced, the policy's own error, the verifier's infra error (a timeout on the policy's
        artifacts is the policy's when the oracle's verify well inside it), artifacts that had to be
        dropped from a failing answer, then the reward."""
        with self.clock.phase(phases.FINALISE, 0):
            if self.mode == IN_PLACE and guard.tripped(self.res.guard_findings):
                self.res.reward = self.res.reward if self.res.reward is not None else 0.0
                raise phases.VerifierTamper(guard.summary(self.res.guard_findings))
            if self.carry is not None and self.carry.workdir_replaced:
                self.res.reward = 0.0
                raise phases.WorkdirReplaced(f"the task's working directory: {self.carry.workdir_replaced}")
            if why := self._truncated():
                self.res.reward = 0.0
                raise phases.EndstateTooLarge(
                    f"the end state was not fully captured ({why}): what the policy changed cannot be told, "
                    "so it was not verified"
                )
            dropped = self.carry.drop_summary() if self.carry is not None else ""
            if agent_result.error_code:
                self.res.outcome = phases.agent_outcome(agent_result.error_code)
                self.res.detail = agent_result.detail
            elif verdict.agent_code:  # the policy's code left the reward, not the verifier: void, counts 0
                raise phases.PolicyReward(verdict.detail, verdict.agent_code)
            elif verdict.infra_code:
                if verdict.infra_code == "verifier_timeout":
                    baseline = self._oracle_verify_s()
                    if baseline is not None and baseline <= self.spec_timeout() * ORACLE_MARGIN:
                        self.res.reward = 0.0
                        raise phases.PolicyVerifierTimeout(
                            f"{verdict.detail}; the oracle's artifacts verify in {baseline:.1f} s (of "
                            f"{self.spec_timeout():g} s): the policy's artifacts made the verifier hang"
                            + (f"; {dropped}" if dropped else "")
                        )
                raise phases.VerifierInfra(verdict.detail, verdict.infra_code)
            elif (verdict.reward or 0.0) < 1.0 and dropped:
                raise phases.ArtifactInvalid(f"{dropped}; the verifier gave reward {verdict.reward:g}")
            else:
                self.res.outcome = outcomes.from_reward(verdict.reward or 0.0)
                self.res.detail = verdict.detail + (f"; {dropped}" if dropped else "")

    def _truncated(self) -> str:
        """Why the end-state capture's listing was cut short ('' when it is complete)."""
        return self.res.endstate.truncated if self.res.endstate is not None else ""

    @property
    def primary(self) -> str:
        """The reward key the curator declared for this task (``[rewards.primary]`` in bandpass.toml)."""
        return self.ws.config.rewards.primary.get(self.spec.name, "") if self.spec is not None else ""

    # --- a multi-step task: its steps in order ---------------------------------------------------------

    def run_steps(self) -> None:
        """Harbor's multi-step trial (``MultiStepTrial``) in Bandpass's phases. Per step, in the containers
        set up once: the step's marker in the agent's one cast (``task step N/M: name``, beside the
        policy's ``step K`` markers), its ``workdir/`` copied into the workdir and its ``setup.sh`` run
        there, its healthcheck, the agent phase with its instruction and timeout, the capture, its verifier
        (by default in a clean room of its own, on the tests of the task merged with the step's and the
        step's verifier env) and its outcome, decided as a single-step episode's is. Then:

        - below the step's ``min_reward``: the remaining steps are ``skipped`` (Harbor's early stop);
        - an agent or infra error, or the policy ending its sandbox, in any step: the episode ends with it
          (an agent error counts 0 whatever later steps would say, as in a single-step episode; Harbor
          would go on when the step's verifier still ran);
        - a step whose ``setup.sh`` or healthcheck fails: on the first step that is the environment's
          (infra, as Harbor's trial fails there); on a later one it fails on what the policy left, and the
          step counts 0 in the task's reward (Harbor leaves it out of its mean, which would let a policy
          that breaks the next step's setup keep full marks).

        Each step's reward is read as any verifier's (engine/tasks/rewards.py: every key kept, which its
        ``min_reward`` reads). The task's keys are the steps' by ``multi_step_reward_strategy``
        (``steps.aggregate``), its scalar Harbor's primary reward of them (``rewards.scalar_of``), else the
        steps' scalars by the same strategy; the episode passes when it is 1. Each step's result is kept
        (``episode_task_step``)."""
        task = self.task
        assert task is not None and self.sandbox is not None
        n = len(task.step_specs)
        rows = self.res.task_steps
        counted: list[dict[str, float] | None] = []  # each counted step's reward keys
        scalars: list[dict[str, float] | None] = []  # each counted step's scalar, as {"reward": x}
        self._shared_cast = _GuardedCastWriter(
            self.agent_path, COLS, ROWS, title=self.title, env={"TERM": "xterm-256color"}
        )
        try:
            for i, step in enumerate(task.step_specs):
                row: dict[str, Any] = {"position": i, "name": step.name}
                rows.append(row)
                row["marker_time"] = self._shared_cast.marker(f"{TASK_STEP_MARKER} {i + 1}/{n}: {step.name}")
                started = time.monotonic()
                tests = task.merge_step_tests(step)
                try:
                    self._begin_step(i, step, tests)
                    failed = self._prepare_step(step)
                    if failed and i == 0:
                        raise phases.EnvironmentFailed(f"step {step.name}: {failed}", "env_setup_failed")
                    if failed:
                        row.update(
                            outcome="not_run",
                            detail=failed,
                            reward=0.0,
                            rewards={"reward": 0.0},
                            counted=True,
                        )
                        counted.append({"reward": 0.0})
                        scalars.append({"reward": 0.0})
                        self._skip_rest(task, i, f"step {step.name} did not run: {failed}")
                        break
                    agent_result = self.run_agent()
                    self.collect(main=True)
                    self.capture()
                    self.collect(main=False)
                    self.end_if_sandbox_ended()
                    verdict = self.verify()
                    self.judge_late_death()
                    self.finalise(agent_result, verdict)
                except phases.PhaseError as err:
                    row.update(
                        outcome=err.outcome,
                        detail=err.detail,
                        reward=self.res.reward if err.keeps_reward else None,
                        rewards=self.res.rewards,
                        verifier_output=self.res.verifier_output,
                        verifier_evidence=self.res.verifier_evidence,
                    )
                    self._skip_rest(task, i, f"the episode ended at step {step.name}: {err.outcome}")
                    raise
                finally:
                    shutil.rmtree(tests, ignore_errors=True)
                    row.setdefault("verifier_cast", self.res.verifier_cast if self.prepared_step else "")
                    row["verify_mode"] = self.mode
                    row["duration_s"] = round(time.monotonic() - started, 3)
                # Harbor's step rewards: every key the verifier wrote (engine/tasks/rewards.py), which its
                # min_reward and the task's aggregate read
                rewards = dict(self.res.rewards) or {
                    "reward": self.res.reward if self.res.reward is not None else 0.0
                }
                scalars.append({"reward": self.res.reward if self.res.reward is not None else 0.0})
                row.update(
                    outcome=self.res.outcome,
                    reward=self.res.reward,
                    rewards=rewards,
                    verifier_evidence=self.res.verifier_evidence,
                    detail=self.res.detail,
                    verifier_output=self.res.verifier_output,
                    counted=True,
                    carry=self.res.carry,  # what crossed into this step's clean room (or stayed, in place)
                )
                counted.append(rewards)
                why = steps_mod.below_min_reward(rewards, step.min_reward)
                if why:
                    self._skip_rest(task, i, f"step {step.name}: {why} (Harbor's early stop)")
                    break
                if i + 1 < n:
                    self._between_steps()
        finally:
            self._shared_cast.close()
            self.spec = task
        self.res.verifier_cast = next(
            (r["verifier_cast"] for r in reversed(rows) if r.get("verifier_cast")), ""
        )
        total = steps_mod.aggregate(task.reward_strategy, counted)
        # the task's scalar is Harbor's primary reward of the aggregate ("reward", a single key, or the
        # declared primary: engine/tasks/rewards.py); when no rule picks one, the steps' own scalars by the
        # same strategy (each is what Bandpass counted for its step)
        declared, _problems = rewards_mod.declared(task.metadata)
        reward, _source, _why = rewards_mod.scalar_of(total or {}, None, declared.primary or self.primary)
        if reward is None:
            reward = (steps_mod.aggregate(task.reward_strategy, scalars) or {}).get("reward")
        if reward is None:
            raise phases.VerifierInfra("no step's verifier gave a reward", "reward_missing")
        self.res.reward = reward
        self.res.rewards = total or {}
        self.res.outcome = outcomes.from_reward(reward)
        ran = [r for r in rows if r.get("counted")]
        self.res.detail = (
            f"{task.reward_strategy} of {plural.counted(len(ran), 'step')}: "
            + ", ".join(f"{r['name']} {r.get('reward') if r.get('reward') is not None else '-'}" for r in ran)
            + f" = {reward:g}"
        )

    def _skip_rest(self, task: TaskSpec, i: int, why: str) -> None:
        for j, later in enumerate(task.step_specs[i + 1 :], start=i + 1):
            self.res.task_steps.append(
                {"position": j, "name": later.name, "outcome": "skipped", "detail": why}
            )

    def _begin_step(self, i: int, step: steps_mod.StepSpec, tests: Path) -> None:
        """The spec, verifier mode and recordings of step ``i``, and a fresh per-step state."""
        assert self.task is not None and self.client is not None
        self.spec = self.task.for_step(step, tests)
        self.mode = self.mode_asked or verify_mode_of(self.version, self.spec)
        self.res.verify_mode = self.mode
        suffix = f".try{self.try_no}" if self.try_no else ""
        self.verifier_path = self.rec_dir / f"verifier.step{i + 1}{suffix}.cast"
        self.res.verifier_cast = self.ws.rel(self.verifier_path)
        self.carry, self.found_dead, self.prepared, self.ended = None, False, False, None
        self.res.rerun_rewards, self.res.guard_findings, self.res.carry = [], [], {}
        self.res.reward, self.res.outcome, self.res.detail, self.res.verifier_output = None, "", "", ""
        self.res.rewards, self.res.verifier_evidence, self.kit = {}, {}, None
        self.agent_done = False
        self.step_offset = self.res.steps
        if i > 0 and self._room is None and self.verifier_spec is not None:
            if self.mode == CLEAN_ROOM:  # started while the step's agent works, as for the first step
                self._room = _Prestart(self.client, self.verifier_spec)
            elif self.mode == SERVICE:  # a fresh verifier per step, joined to the agent's network again
                self._room = _Prestart(self.client, self._service_spec())

    def _step_suffix(self) -> str:
        """``.step<N>`` in a multi-step task's per-step files (each step's end state is kept), else ''."""
        if self.spec is None or not self.spec.current_step or self.task is None:
            return ""
        return f".step{self.task.steps.index(self.spec.current_step) + 1}"

    @property
    def prepared_step(self) -> bool:
        """The current step's verifier recording exists (its verifier ran)."""
        return self.verifier_path.exists()

    def _prepare_step(self, step: steps_mod.StepSpec) -> str:
        """Harbor's per-step preparation, before the step's agent: ``steps/<name>/workdir/`` copied into the
        workdir, its ``setup.sh`` run from there, then the step's healthcheck. '' when all went well, else
        what failed."""
        assert self.task is not None and self.sandbox is not None and self.spec is not None
        src = step.dir(self.task.path) / "workdir"
        budget = STEP_SETUP_TIMEOUT_S + _healthcheck_budget(step.healthcheck)
        with self.clock.phase(phases.SETUP, budget):
            workdir = self.spec.workdir
            try:
                if src.is_dir():
                    self.sandbox.put_dir(src, workdir)
                if (src / "setup.sh").is_file():
                    script = f"{workdir.rstrip('/')}/setup.sh"
                    code, out = self.sandbox.exec(
                        ["bash", script], timeout=STEP_SETUP_TIMEOUT_S, workdir=workdir
                    )
                    if code != 0:
                        tail = " | ".join(out.strip().splitlines()[-3:])
                        return f"steps/{step.name}/workdir/setup.sh exited {code}" + (
                            f": {tail}" if tail else ""
                        )
            except (SandboxError, docker.errors.APIError) as exc:
                if not self.sandbox.is_running():  # the container, not the step: attribution's to judge
                    raise phases.ContainerStopped(
                        f"container stopped before step {step.name}: {exc}"
                    ) from exc
                return f"steps/{step.name}/workdir could not be put in place: {exc}"
            if step.healthcheck is not None:
                failed = self._healthcheck(step.healthcheck)
                if failed:
                    return f"the step's healthcheck {failed}"
        return ""

    def _between_steps(self) -> None:
        """After a step's verifier, before the next step: the agent's container goes on (thawed, in the
        clean room, where the capture froze it; a service's capture thawed it already; in place the
        verifier's /tests and /logs/verifier are emptied, as Harbor resets them, its observer's kit goes —
        the next step's capture would read the harness's files as the policy's — and the processes its
        wrapper stopped at test.sh's exit run again), the step's verifier
        container goes and its attribution watch closes."""
        assert self.client is not None and self.sandbox is not None
        if self.watch is not None:
            with contextlib.suppress(Exception):
                self.watch.close()
            self.watch = None
        if self.verifier_sandbox is not None:
            with contextlib.suppress(Exception):
                sandbox_pool.release(self.verifier_sandbox)
            self.verifier_sandbox = None
        if self.mode == CLEAN_ROOM:
            hostview.thaw(self.client, self.sandbox.id)
        elif self.mode == IN_PLACE:
            with contextlib.suppress(Exception):
                kits = f"{observer.KIT_PARENT}/bandpass-*"  # engine/run/observer.py
                # the verifier's wrapper stopped every process at test.sh's exit (the service the capture
                # kept included): the next step's agent finds them running, as in Harbor
                self.sandbox.exec(
                    f"kill -CONT -1 2>/dev/null; rm -rf {LOGS_DIR} {TESTS_DIR} {kits}", timeout=30
                )

    def spec_timeout(self) -> float:
        return self.spec.verifier_timeout_sec if self.spec is not None else 0.0

    def _oracle_verify_s(self) -> float | None:
        """The slowest verify of this version's passing oracle episodes verified the same way (the audit
        runs them), or None without one."""
        if self.yardstick is not None:
            return self.yardstick.get(self.mode)
        with session(self.ws.engine) as s:
            times = endstate_store.oracle_verify_seconds(s, pk(self.version), self.mode)
        return max(times) if times else None

    # --- the control: did the agent's end state break the harness's work? ----------------------------------

    def control(self, err: phases.PhaseError) -> phases.PhaseError:
        """After a clean agent phase, the capture or the verifier failed as infrastructure (no reward, the
        verifier timed out, the container would not restart after the kill...). The policy was root in
        that container: ``rm -rf /usr/bin`` or a file where ``/logs`` belongs makes the harness's own
        work fail, and an infra outcome would take the episode out of pass@k. So the verifier runs once
        more, on a fresh container from the same image (nothing of the agent's in it). A reward there
        (any reward: the fresh container has none of the agent's work) means the environment and the
        verifier work, and if the end state the agent left touches what the verifier relies on (a guard
        finding, a change under :data:`HARNESS_DIRS`) that change is what broke them:
        ``agent_error:verifier_tamper`` (reward 0, never retried), the evidence named.

        The end-state evidence is required, not the control alone: on a loaded machine the verifier's
        terminal can fail to start or its exec can fail after an honest agent (16 oracle episodes on 2
        cores once had two ``bash did not start`` failures whose controls passed), and a passing control
        then proves nothing about the agent. Without evidence the control is still recorded, and the
        infra outcome stands (retried). A load-sensitive failure (a timeout, memory) without evidence gets
        no control at all."""
        if not (
            self.mode == IN_PLACE  # in the clean room nothing of the agent's container reaches the harness
            and self.agent_done
            and err.kind == "infra_error"
            and err.code in CONTROL_CODES
            and self.client is not None
            and self.spec is not None
            and self.sandbox_spec is not None
            and not self._killed_from_outside()
        ):
            return err
        if self.res.endstate is None:
            self._capture_stopped()  # the capture never ran (the kill's restart failed): read the layer
        findings = guard.tripped(self.res.guard_findings)
        touched = self._harness_changes()
        if err.code in LOAD_SENSITIVE_CODES and not (findings or touched):
            self.res.evidence = {
                **self.res.evidence,
                "control": {
                    "skipped": f"{err.outcome} can come from the machine's load and the end state shows no "
                    "change to what the verifier relies on: the infra outcome stands",
                    "failed_with": err.outcome,
                },
            }
            return err
        client, spec, sandbox_spec = self.client, self.spec, self.sandbox_spec
        held: list[Sandbox] = []

        def run_control() -> VerifierResult:
            held.append(sandbox_pool.acquire(client, sandbox_spec))
            return run_verifier(client, held[0], spec, agent_stopped=True)

        def remove_held() -> None:
            if held:
                held[0].remove()

        budget = spec.verifier_timeout_sec + CAPTURE_TIMEOUT_S
        try:
            with self.clock.phase(phases.CONTROL, budget):
                ctl = phases.bounded(  # enforced like the capture's and the verifier's
                    run_control,
                    budget,
                    what="the control",
                    code=err.code,
                    on_timeout=remove_held,
                )
        except Exception as exc:  # noqa: BLE001 - no control, no change: the infra outcome stands
            self.res.evidence = {**self.res.evidence, "control": {"error": f"{type(exc).__name__}: {exc}"}}
            return err
        finally:
            for fresh in held:
                with contextlib.suppress(Exception):
                    sandbox_pool.release(fresh)
        record = {
            "reward": ctl.reward,
            "infra_code": ctl.infra_code,
            "detail": ctl.detail,
            "output": ctl.output[-2000:],
            "failed_with": err.outcome,
            "failed_detail": err.detail[:500],
        }
        if ctl.reward is None:
            self.res.evidence = {**self.res.evidence, "control": record}
            return err
        if not (findings or touched):
            record["verdict"] = (
                f"the verifier works on a fresh container, but the agent's end state shows no change to what "
                f"it relies on (no guard finding, nothing under {', '.join(HARNESS_DIRS)}): the infra "
                "outcome stands"
            )
            self.res.evidence = {**self.res.evidence, "control": record}
            return err
        why = (
            f"the harness's work failed on the agent's end state ({err.outcome}: {err.detail[:160]}), but "
            f"the verifier gave reward {ctl.reward:g} on a fresh container from the same image: the agent's "
            "changes broke the verifier"
        )
        if findings:
            why += f" ({guard.summary(findings)})"
        elif touched:
            why += f" (changed: {', '.join(touched[:3])}{' ...' if len(touched) > 3 else ''})"
        tamper = phases.VerifierTamper(why)
        self.res.evidence = {
            **self.res.evidence,
            "control": record,
            "verdict": {"outcome": tamper.outcome, "by": "policy", "why": why},
        }
        self.res.reward = 0.0
        return tamper

    def _harness_changes(self) -> list[str]:
        """The end state's changes where the harness works (the verifier's logs and tests)."""
        if self.res.endstate is None:
            return []
        return [
            c.path
            for c in self.res.endstate.changes
            if any(c.path == d or c.path.startswith(d + "/") for d in HARNESS_DIRS)
        ]

    def _killed_from_outside(self) -> bool:
        """The engine reported a ``kill`` for the container that none of Bandpass's own restarts sent:
        someone outside signalled it (during the verifier, say), which no control can pin on the agent."""
        if self.watch is None or self.sandbox is None:
            return False
        if not self.sandbox.is_running():  # the engine's events arrive on their own thread: let them
            self.watch.wait_for_death()
        return bool(self.watch.outside_kills())

    def _capture_stopped(self) -> None:
        """The end state of a container the harness could not restart (its filesystem is still there)."""
        assert self.spec is not None and self.client is not None
        if self.sandbox is None or self.sandbox.container is None:
            return
        with contextlib.suppress(Exception):
            self._capture_and_guard()

    def _capture_and_guard(self) -> endstate.EndState:
        """Records what the policy changed (the end state) and what the tamper guard makes of it."""
        assert self.spec is not None and self.client is not None and self.sandbox is not None
        suffix = f".try{self.try_no}" if self.try_no else ""
        state = endstate.capture(
            self.client,
            self.sandbox.container,
            self.rec_dir / f"endstate{self._step_suffix()}{suffix}.tar",
            cap_bytes=self.ws.config.endstate.cap_bytes,
        )
        allow, _problems = allowances.parse(self.spec.metadata)  # the loader reported problems
        self.res.endstate, self.res.image = state, self.image
        self.res.guard_findings = guard.check(
            state.changes, exists_in_image=state.exists_in_image, contents=state.contents, allow=allow
        )
        return state

    def fail(self, err: phases.PhaseError) -> None:
        self.res.outcome, self.res.detail = err.outcome, err.detail
        if not err.keeps_reward:
            self.res.reward = None
        if isinstance(err, phases.DiskFull):  # cast paths are kept only for files that got any bytes
            for attr in err.casts:
                path = self.agent_path if attr == "agent_cast" else self.verifier_path
                try:
                    empty = path.stat().st_size == 0
                except OSError:
                    empty = True
                if empty:
                    setattr(self.res, attr, "")

    def release(self) -> None:
        if self.watch is not None:
            with contextlib.suppress(Exception):
                self.watch.close()
        if self._shared_cast is not None:
            with contextlib.suppress(Exception):
                self._shared_cast.close()
        if self._room is not None:  # the try ended before its verifier: the clean room goes unused
            with contextlib.suppress(Exception):
                self._room.release()
        if self.verifier_sandbox is not None:
            with contextlib.suppress(Exception):
                sandbox_pool.release(self.verifier_sandbox)
        if self.sandbox is not None:  # removed in the background: the outcome no longer depends on it
            with contextlib.suppress(Exception):
                sandbox_pool.release(self.sandbox)
        if self.services is not None:  # after every container on its network (released at once above)
            with contextlib.suppress(Exception):
                self.services.down()


class _Prestart:
    """The clean room's container, acquired on a thread of its own while the agent works (a warm-pool
    spare is claimed at once; a cold start, or the pool's refill behind it, overlaps the agent phase
    instead of the verify phase)."""

    def __init__(self, client: docker.DockerClient, spec: SandboxSpec) -> None:
        self._box: dict[str, Any] = {}
        self._thread = threading.Thread(
            target=self._run, args=(client, spec), name="bandpass-clean-room", daemon=True
        )
        self._thread.start()

    def _run(self, client: docker.DockerClient, spec: SandboxSpec) -> None:
        try:
            self._box["sandbox"] = sandbox_pool.acquire(client, spec)
        except Exception as exc:  # noqa: BLE001 - the verify phase acquires again, and reports that one
            self._box["error"] = exc

    def take(self) -> Sandbox | None:
        self._thread.join(ROOM_START_S)
        if self._thread.is_alive():
            raise TimeoutError(f"the clean room did not start in {ROOM_START_S:g} s")
        return self._box.get("sandbox")

    def release(self) -> None:
        self._thread.join(ROOM_START_S)
        sb = self._box.pop("sandbox", None)
        if sb is not None:
            sandbox_pool.release(sb)


def verify_mode_of(version: TaskVersion, spec: TaskSpec) -> str:
    """Where a version's verifier runs: what the audit settled (``task_version.verify_mode``: in place
    for a task whose oracle leaves a listening service), else the task's own ``[verifier]
    environment_mode``, else the clean room."""
    return getattr(version, "verify_mode", "") or spec.verify_mode or CLEAN_ROOM


def with_adopted(version: TaskVersion, spec: TaskSpec) -> TaskSpec:
    """The task as this version is verified: its declared artifacts plus those it adopted from its
    oracle's footprint (``task_version.adopted_artifacts_json``, engine/audit/footprint.py), so a clean
    room carries what the oracle showed the verifier reads — Bandpass's choice of where to verify never
    costs honest work its reward."""
    adopted = [a for a in endstate_store.adopted_artifacts(version) if a not in spec.artifacts]
    if adopted:
        spec.artifacts = [*spec.artifacts, *adopted]
    return spec


class _ImagePaths:
    """``exists_in_image`` for a stored end state: asked of a created, never started container of the
    image (the first call creates it; ``cleanup`` removes it when the episode's guard is done with it)."""

    def __init__(self, client: docker.DockerClient, image: str) -> None:
        self.client = client
        self.image = image
        self.holder: dict[str, Any] = {}

    def __call__(self, path: str) -> bool:
        if "c" not in self.holder:
            created = self.client.api.create_container(self.image, command=["true"], labels={"bandpass": "1"})
            self.holder["c"] = created["Id"]
        return endstate.path_stat(self.client, self.holder["c"], path) is not None

    def cleanup(self) -> None:
        if "c" in self.holder:
            with contextlib.suppress(Exception):
                self.client.api.remove_container(self.holder["c"], force=True)


def _service_exec(
    client: docker.DockerClient, container_id: str, command: str, timeout: float
) -> tuple[int, str]:
    """Runs ``command`` in a compose service's container (a collect hook), bounded by ``timeout`` (the
    image's ``timeout``; without one, unbounded as in an image Harbor runs the same way)."""
    bounded = ["timeout", "-s", "KILL", str(max(1, int(timeout))), "sh", "-c", command]
    for argv in (bounded, ["sh", "-c", command]):
        exec_id = client.api.exec_create(container_id, argv)["Id"]
        out = client.api.exec_start(exec_id).decode("utf-8", "replace")
        code = client.api.exec_inspect(exec_id).get("ExitCode")
        if argv is bounded and code in (126, 127) and "OCI runtime exec failed" in out:
            continue  # no timeout(1) in the service's image
        return int(code if code is not None else -1), out
    return -1, ""


def _copy_safe(src: io.BytesIO, out: tarfile.TarFile, source: str) -> int:
    """Copies an artifact's archive (the engine's: its members named from the path's last component) into
    ``out`` at its source path: regular files and directories only, set-uid/gid bits cleared (as the
    clean room's carry and Harbor's ``data`` filter do). Returns how many files crossed."""
    parent = posixpath.dirname(source.rstrip("/")).lstrip("/")
    n = 0
    with tarfile.open(fileobj=src, mode="r") as tar:
        for member in tar:
            if not (member.isreg() or member.isdir()) or ".." in member.name.split("/"):
                continue
            member.name = posixpath.join(parent, member.name) if parent else member.name
            member.mode &= 0o777
            if member.isreg():
                out.addfile(member, tar.extractfile(member))
                n += 1
            else:
                out.addfile(member)
    return n


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
    step_offset: int = 0,
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
        except Exception as exc:  # noqa: BLE001 - any start failure is classified by terminal_start_failed
            failed = phases.terminal_start_failed(sandbox, exc)
            return AgentResult(infra_code=failed.code, detail=failed.detail), True
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
            step_offset=step_offset,
        )
        try:
            result = agent.run(ctx)
        except Exception as exc:  # noqa: BLE001 - an agent bug must still end in one outcome
            if not term.alive:  # the terminal went with the container or the shell: attribution decides
                return AgentResult(infra_code="container_died", detail=f"container stopped: {exc}"), False
            if not sandbox.is_running():
                err = phases.container_stopped(sandbox, f"container stopped: {exc}")
                return AgentResult(infra_code=err.code, detail=err.detail), term.alive
            return AgentResult(error_code="agent_crashed", detail=f"{type(exc).__name__}: {exc}"), True
        return result, term.alive
    finally:
        term.close()
