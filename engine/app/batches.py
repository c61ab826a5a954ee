"""Start and resume a rollout batch: what ``bandpass run`` and the Runs screen both do.

Why here: the order of the checks is the contract with the curator — connect the executor, check a model's
endpoint, resolve the tasks, check the Docker engine, and only then plan — so a dead endpoint or a missing
engine costs a second and leaves nothing queued. Both front ends used to write that order themselves; they
now call :func:`start_batch` / :func:`resume_batch` and :func:`run_batch`, and render what comes back.
Every refusal is a ``BandpassError`` with the line to show.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal

from ...store import queries
from ...store.db import session
from ...store.models import pk
from ..run.agents.builtin import BUILTIN
from ..run.rollouts import BatchError, BatchSummary, batch_summary
from ..run.scope import BatchScope, batch_scope
from ..sandbox.docker_engine import DockerUnavailable
from .errors import NothingToRun

if TYPE_CHECKING:
    from ...store.models import Batch
    from ..calibration.adaptive import AdaptiveSampler, AdaptiveSettings
    from ..core.events import EventBus
    from ..core.workspace import Workspace
    from ..run.executors import Executor

__all__ = [
    "BUILTIN",
    "AdaptiveOptions",
    "BatchError",
    "BatchScope",
    "BatchSummary",
    "DockerUnavailable",
    "PlannedBatch",
    "ResumedBatch",
    "RunOptions",
    "StartBatch",
    "all_task_versions",
    "batch_scope",
    "batch_summary",
    "check_endpoint",
    "check_model_config",
    "config_or_none",
    "latest_batch",
    "plan_adaptive",
    "require_docker",
    "resume_batch",
    "run_batch",
    "start_batch",
    "start_round",
    "task_versions",
]

#: A warning the endpoint check found (e.g. bandpass.toml's window larger than the served max_model_len).
OnWarning = Callable[[str], None]


def _ignore(_line: str) -> None:
    return None


@dataclass(frozen=True)
class StartBatch:
    """A new batch: ``kind`` "model" (``name`` in bandpass.toml, or a served name with ``base_url``) or
    "builtin" (oracle, nop, cheat:*); ``version_ids`` None means every task in the workspace."""

    name: str
    kind: Literal["model", "builtin"]
    version_ids: Sequence[int] | None = None
    #: Task names or version-hash prefixes, resolved after the endpoint check (when no ``version_ids``).
    tasks: Sequence[str] | None = None
    k: int = 4
    base_url: str | None = None
    params: dict[str, Any] = field(default_factory=dict)
    #: Check the model's endpoint before anything is planned (``--no-check`` turns it off).
    check_endpoint: bool = True
    #: The endpoint check's timeout is this, at most 30 s.
    request_timeout: float = 30.0
    #: Episodes run on this machine's Docker engine: check it answers before planning.
    local: bool = True


@dataclass(frozen=True)
class AdaptiveOptions:
    """``--adaptive``: the band and its budget (None: bandpass.toml's, the model's own band first)."""

    first: int | None = None
    budget: int | None = None
    max_k: int | None = None
    confidence: float | None = None
    band: str | None = None
    #: Rounds are sized to the executor: twice its slots in tasks, at least 4.
    slots: int = 1


@dataclass(frozen=True)
class PlannedBatch:
    batch_id: str
    version_ids: list[int]
    k: int
    sampler: AdaptiveSampler | None = None


@dataclass(frozen=True)
class ResumedBatch:
    batch_id: str
    batch: Batch
    #: Episode ids requeued by ``retry`` (None: a plain resume).
    requeued: list[int] | None = None
    sampler: AdaptiveSampler | None = None


def all_task_versions(ws: Workspace) -> list[int]:
    """Every task version the workspace lists (its current version per task)."""
    with session(ws.engine) as s:
        return [r.version_id for r in queries.task_rows(s)]


def task_versions(ws: Workspace, refs: Sequence[str] | None) -> list[int]:
    """Task names or version-hash prefixes (each may be comma-separated) to version ids; none: every task.
    Raises ``NothingToRun`` naming the reference that matches nothing."""
    names = [r.strip() for ref in refs or [] for r in ref.split(",") if r.strip()]
    if not names:
        ids = all_task_versions(ws)
        if not ids:
            raise NothingToRun(f"no tasks in {ws.root} (import some: bandpass import DIR)")
        return ids
    out = []
    with session(ws.engine) as s:
        for ref in names:
            v = queries.resolve_version(s, ref)
            if v is None:
                raise NothingToRun(f"no task or version matches {ref!r} (see bandpass tasks)")
            out.append(pk(v))
    return out


def check_endpoint(
    ws: Workspace, name: str, base_url: str | None, timeout: float = 30.0, on_warning: OnWarning = _ignore
) -> None:
    """The model's endpoint answers and serves it (``bandpass policy check``); raises ``BatchError`` with
    the line to show, so a dead endpoint is refused before any container starts."""
    from ..run.rollouts import check_policy_endpoint

    for warning in check_policy_endpoint(ws, name, base_url, min(timeout, 30.0)):
        on_warning(warning)


def check_model_config(ws: Workspace, name: str, base_url: str | None) -> None:
    """The model resolves from bandpass.toml (or ``base_url``): a config error is one line, before any
    request."""
    from ..run.policy.client import resolve_model

    try:
        resolve_model(ws.config, name, base_url)
    except ValueError as exc:
        raise BatchError(str(exc)) from None


def require_docker(local: bool) -> None:
    """This machine's Docker engine answers (raises ``DockerUnavailable``); a Ray cluster's nodes have
    their own engines, so nothing is checked for them."""
    if local:
        from ..sandbox.docker_engine import get_client

        get_client()


def start_batch(
    ws: Workspace,
    req: StartBatch,
    *,
    adaptive: AdaptiveOptions | None = None,
    on_warning: OnWarning = _ignore,
) -> PlannedBatch:
    """Checks, then plans a batch in the database (nothing runs yet: :func:`run_batch` does). Raises
    ``BatchError``/``NothingToRun``/``DockerUnavailable``/``AdaptiveError`` — all ``BandpassError`` —
    with nothing queued."""
    if req.kind == "model":
        check_model_config(ws, req.name, req.base_url)
        if req.check_endpoint:
            check_endpoint(ws, req.name, req.base_url, req.request_timeout, on_warning)
    versions = list(req.version_ids) if req.version_ids is not None else task_versions(ws, req.tasks)
    require_docker(req.local)
    if adaptive is not None:
        sampler = plan_adaptive(ws, req, versions, adaptive)
        return PlannedBatch(sampler.batch_id, versions, sampler.settings.k, sampler)
    from ..run.rollouts import plan_batch

    extra: dict[str, Any] = {}  # only what differs from plan_batch's defaults
    if req.base_url:
        extra["base_url"] = req.base_url
    if req.params:
        extra["params"] = req.params
    batch_id = plan_batch(ws, req.name, versions, req.k, kind=req.kind, **extra)
    return PlannedBatch(batch_id, versions, req.k)


def config_or_none(ws: Workspace) -> Any:
    """bandpass.toml, or None when it is broken: the ledger then records no checkpoint step, nothing else
    changes (the batch's own checks say what is wrong with the file)."""
    from ..core.config import ConfigError

    try:
        return ws.config
    except ConfigError:
        return None


def plan_adaptive(
    ws: Workspace, req: StartBatch, versions: list[int], opts: AdaptiveOptions
) -> AdaptiveSampler:
    """Creates an adaptive batch: the band and its k from ``opts.band`` or bandpass.toml (the model's own
    band first), rounds sized to the executor (twice its slots in tasks, at least 4)."""
    from ..calibration.adaptive import (
        DEFAULT_FIRST,
        DEFAULT_MAX_K,
        AdaptiveSettings,
        plan_adaptive_batch,
    )
    from ..calibration.calibrate import parse_band

    cfg = ws.config
    own = cfg.models[req.name].band_edges() if req.name in cfg.models else None
    try:
        lo, hi = parse_band(opts.band) if opts.band is not None else (own or (cfg.band.lo, cfg.band.hi))
    except ValueError as exc:
        raise BatchError(str(exc)) from None
    settings = AdaptiveSettings(
        lo=lo,
        hi=hi,
        k=cfg.band.k,
        confidence=cfg.band.confidence if opts.confidence is None else opts.confidence,
        min_samples=cfg.band.min_samples,  # the floor the report applies: the same decisions
        first=DEFAULT_FIRST if opts.first is None else opts.first,
        max_k=DEFAULT_MAX_K if opts.max_k is None else opts.max_k,
        budget=opts.budget,
        round_tasks=max(4, 2 * opts.slots),
    )
    return plan_adaptive_batch(
        ws,
        req.name,
        versions,
        settings,
        kind=req.kind,
        base_url=req.base_url or "",
        params=req.params,
        config=config_or_none(ws),
    )


def batch_versions(ws: Workspace, batch_id: str) -> list[int]:
    """The task versions a batch has rows for, in first-queued order."""
    with session(ws.engine) as s:
        return list(dict.fromkeys(e.task_version_id for e in queries.episodes(s, batch_id=batch_id)))


def learn_footprints(
    ws: Workspace,
    version_ids: Sequence[int],
    *,
    bus: EventBus | None = None,
    stop: threading.Event | None = None,
    on_note: OnWarning | None = None,
    workers: int = 2,
) -> list[Any]:
    """Before a version's first rollout, where it is verified and what its verifier needs outside the
    declared artifacts, learnt from its oracle as the audit learns it (``engine/audit/adoption.py``:
    one oracle episode per version, cached on the version). Never raises: a version whose footprint
    cannot be learnt now is verified as before and learnt by the next batch."""
    from ..audit.adoption import learn_before_rollout

    try:
        return learn_before_rollout(ws, version_ids, bus=bus, stop=stop, on_note=on_note, workers=workers)
    except Exception as exc:  # noqa: BLE001 - the batch runs whatever learning does
        if on_note is not None:
            on_note(f"footprints not learnt: {type(exc).__name__}: {exc}")
        return []


def start_round(
    ws: Workspace, model: str, version_ids: Sequence[int], settings: AdaptiveSettings
) -> AdaptiveSampler:
    """A band round from the Calibration screen: an adaptive batch of ``model`` (a policy model or a
    built-in agent) over ``version_ids`` with ``settings``; a model's endpoint and this machine's Docker
    engine are checked first, so either missing is one refusal, not a round of infra errors or of waiting.
    The footprints of versions no audit or rollout learnt are learnt here (:func:`learn_footprints`), so
    the round's first episodes are verified with what their oracle needs. Run it with ``run_adaptive``."""
    from ..calibration.adaptive import plan_adaptive_batch
    from ..core.probes import is_builtin_agent

    kind = "builtin" if is_builtin_agent(model) else "model"
    if kind == "model":
        check_endpoint(ws, model, None)
    require_docker(True)  # the round runs here: no engine is one refusal, not a round waiting for one
    config = config_or_none(ws)
    sampler = plan_adaptive_batch(ws, model, list(version_ids), settings, kind=kind, config=config)
    learn_footprints(ws, version_ids)
    return sampler


def latest_batch(ws: Workspace) -> str | None:
    with session(ws.engine) as s:
        rows = queries.batches(s)
    return rows[0].id if rows else None


def resume_batch(
    ws: Workspace,
    batch_id: str | None = None,
    *,
    retry: str | None = None,
    check: bool = True,
    request_timeout: float = 30.0,
    on_warning: OnWarning = _ignore,
) -> ResumedBatch:
    """Finds the batch to finish (``batch_id``, else the latest unfinished one; with ``retry`` the latest
    one), checks a model batch's endpoint, and with ``retry`` (``oom``, ``infra_error``...) requeues those
    infra errors for a new try. An adaptive batch comes back with its sampler, so its rounds go on."""
    from ..run.rollouts import (
        get_batch,
        latest_unfinished_batch,
        parse_retry_codes,
        requeue_for_retry,
    )

    requeued: list[int] | None = None
    if retry is not None:
        codes = parse_retry_codes(retry)
        found = batch_id or latest_batch(ws)
        if found is None:
            raise NothingToRun(f"no batch in {ws.root}")
    else:
        found = batch_id or latest_unfinished_batch(ws)
        if found is None:
            raise NothingToRun(f"no unfinished batch in {ws.root}")
    b = get_batch(ws, found)
    if b.kind == "model" and check:
        check_endpoint(ws, b.agent, b.base_url or None, request_timeout, on_warning)
    if retry is not None:
        requeued = requeue_for_retry(ws, found, codes)
    sampler = None
    if b.adaptive_json:
        from ..calibration.adaptive import AdaptiveSampler

        sampler = AdaptiveSampler.from_batch(ws, found, config=config_or_none(ws))
    return ResumedBatch(found, b, requeued, sampler)


@dataclass(frozen=True)
class RunOptions:
    """How a planned batch runs: ``concurrency`` episodes at once (None: the executor's default), on
    ``executor`` (None: this machine's Docker engine), ``max_infra_retries`` fresh tries after a retryable
    infra error, and a stop after ``max_consecutive_unavailable`` episodes in a row end
    ``policy_unavailable`` (None: the runner's default; 0: never)."""

    concurrency: int | None = None
    executor: Executor | None = None
    max_infra_retries: int = 2
    max_consecutive_unavailable: int | None = None


def run_batch(
    ws: Workspace,
    batch_id: str,
    opts: RunOptions | None = None,
    *,
    stop: threading.Event | None = None,
    on_progress: Callable[[BatchSummary], None] | None = None,
    bus: EventBus | None = None,
    sampler: AdaptiveSampler | None = None,
    on_note: OnWarning | None = None,
) -> BatchSummary:
    """Runs a planned batch to its end (or ``stop``); an adaptive batch grows round by round through its
    sampler. Progress reaches the caller through ``on_progress`` and, per episode, ``bus``.

    First, on this machine's engine, the footprint of every version of the batch that no audit or earlier
    rollout learnt (:func:`learn_footprints`); ``on_note`` hears what that did, one line per version."""
    from ..run.rollouts import run_planned

    opts = opts or RunOptions()
    learn_footprints(
        ws,
        batch_versions(ws, batch_id) + (list(sampler.version_ids) if sampler is not None else []),
        bus=bus,
        stop=stop,
        on_note=on_note,
        workers=opts.concurrency or 2,
    )

    extra: dict[str, Any] = {}
    if opts.max_consecutive_unavailable is not None:
        extra["max_consecutive_unavailable"] = opts.max_consecutive_unavailable
    return run_planned(
        ws,
        batch_id,
        concurrency=opts.concurrency,
        bus=bus,
        on_progress=on_progress,
        stop=stop,
        max_infra_retries=opts.max_infra_retries,
        executor=opts.executor,
        next_round=sampler,
        **extra,
    )
