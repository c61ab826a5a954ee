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
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import docker

from bandpass.engine.core import outcomes
from bandpass.engine.core.events import EpisodeFinished, EpisodeStarted, EventBus
from bandpass.engine.core.events import bus as default_bus
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.run import cleanroom, endstate, guard, hooks, phases
from bandpass.engine.run.agents.base import Agent, AgentContext, AgentResult, StepRecord
from bandpass.engine.run.endstate import EndState, StoredEndState
from bandpass.engine.run.guard import Finding
from bandpass.engine.run.verifier import LOGS_DIR, TESTS_DIR, VerifierResult, run_verifier
from bandpass.engine.sandbox import attribution, hostview
from bandpass.engine.sandbox import pool as sandbox_pool
from bandpass.engine.sandbox.asciicast import CastWriter
from bandpass.engine.sandbox.container import Sandbox, SandboxSpec, classify_docker_error
from bandpass.engine.sandbox.docker_engine import DockerUnavailable, get_client
from bandpass.engine.sandbox.labels import episode_labels
from bandpass.engine.sandbox.terminal import TerminalSession
from bandpass.engine.tasks import allowances
from bandpass.engine.tasks.artifacts import CLEAN_ROOM, FRESH, IN_PLACE, SERVICE
from bandpass.engine.tasks.images import DEFAULT_IMAGE_ALIASES, BuildResult, build_task_image, resolve_workdir
from bandpass.engine.tasks.taskdir import TaskSpec, load_task
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.models import TaskVersion, pk
from bandpass.store.queries import endstate as endstate_store

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
    live episode never meets it; it bounds only a container whose owner stopped looking after it."""
    phases_s = spec.agent_timeout_sec + CAPTURE_TIMEOUT_S + spec.verifier_timeout_sec * (1 + verifier_reruns)
    return 2 * phases_s + 600.0


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
        agent_result = trial.run_agent() if replay is None else trial.apply_endstate(replay)
        trial.capture()
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

    # --- phase 1: the environment -------------------------------------------------------------------

    def setup(self, client: docker.DockerClient | None, replaying: bool = False) -> None:
        try:
            self.spec = spec = load_task(self.ws.abs(self.version.path))
        except Exception as exc:  # a stored version that no longer loads is infra
            raise phases.TaskUnusable(f"task files unusable: {exc}") from exc
        if spec.steps:
            raise phases.TaskUnsupported(
                f"a multi-step task ([[steps]]: {', '.join(spec.steps)}): "
                "Bandpass does not run multi-step tasks"
            )
        self.mode = self.mode_asked or verify_mode_of(self.version, spec)
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
                default_caps=self.mode == IN_PLACE,
            )
            self.sandbox_spec = sandbox_spec
            # the clean room: the same image, limits and labels, Docker's default capabilities (apt-get in
            # test.sh) and the verifier's own network (Harbor: [verifier] network_mode, else the task's)
            self.verifier_spec = dataclasses.replace(
                sandbox_spec,
                default_caps=True,
                network=spec.verifier_network,
                labels={**sandbox_spec.labels, ROLE_LABEL: "verifier"},
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
            with _GuardedCastWriter(
                self.agent_path, COLS, ROWS, title=self.title, env={"TERM": "xterm-256color"}
            ) as cast:
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
        data = cleanroom.build(
            self.carry,
            state.archive if state is not None else None,
            cleanroom.fetcher(self.client, agent) if agent else None,
            tests=self.spec.tests_dir if self.prepared else None,
            logs_dir=LOGS_DIR if self.prepared else "",
        )
        try:
            cleanroom.apply(fresh, self.carry, data)
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
                prepared=self.mode in FRESH and self.prepared,
            )
            for _ in range(self.verifier_reruns):
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
            self.rec_dir / f"endstate{suffix}.tar",
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
        if self._room is not None:  # the try ended before its verifier: the clean room goes unused
            with contextlib.suppress(Exception):
                self._room.release()
        if self.verifier_sandbox is not None:
            with contextlib.suppress(Exception):
                sandbox_pool.release(self.verifier_sandbox)
        if self.sandbox is not None:  # removed in the background: the outcome no longer depends on it
            with contextlib.suppress(Exception):
                sandbox_pool.release(self.sandbox)


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
