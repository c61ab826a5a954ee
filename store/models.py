"""SQLModel tables: the single record of every fact Bandpass knows.

Every result row points at a *task version* (sha256 of the task's files), never at a task, so that
editing a task can never silently mix results from its old and new contents. JSON-shaped details are kept
in TEXT columns (``*_json``) because they are read whole and never queried by part.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Protocol

from sqlalchemy import DDL, event
from sqlmodel import Field, SQLModel


def utcnow() -> datetime:
    return datetime.now(UTC)


class _Stored(Protocol):
    id: int | None


def pk(row: _Stored) -> int:
    """A row's primary key, typed ``int``. SQLModel types ``id`` Optional because it is None until the row is
    flushed; every row this is asked of was read from the database or flushed, so None here is a bug and
    fails loudly instead of reaching a query as ``NULL``."""
    if row.id is None:
        raise ValueError(f"{type(row).__name__} has no id yet: it was never flushed to the database")
    return row.id


class Task(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    source_path: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class TaskVersion(SQLModel, table=True):
    __tablename__ = "task_version"

    id: int | None = Field(default=None, primary_key=True)
    task_id: int = Field(foreign_key="task.id", index=True)
    hash: str = Field(index=True, unique=True)
    path: str  # where the workspace keeps this version's files (relative to the workspace)
    instruction: str = ""
    category: str = ""
    difficulty: str = ""
    tags_json: str = "[]"
    metadata_json: str = "{}"
    origin: str = "import"  # import | tb1 | generated
    image_aliases_json: str = "[]"  # [[FROM-as-written, local-image-used], ...]: a validity risk to show
    created_at: datetime = Field(default_factory=utcnow)
    # schema 14 (the world's tasks): the import's warnings, and what Bandpass cannot run as written
    warnings_json: str = "[]"
    unsupported_json: str = "[]"
    #: Where this version's verifier runs, as the audit settled it: "" (the task's [verifier]
    #: environment_mode, else the clean room) or in_place (its oracle leaves a listening service).
    verify_mode: str = ""
    #: Paths the version's oracle needs outside its declared artifacts, adopted for it (schema 19):
    #: carried into the clean room like declared ones, and declared in the task.toml an export writes.
    adopted_artifacts_json: str = "[]"
    #: The footprint that settled how the version is verified (engine/audit/footprint.py), learnt by the
    #: audit or before the version's first rollout; "" when not learnt yet.
    footprint_json: str = ""


class ImageBuild(SQLModel, table=True):
    __tablename__ = "image_build"

    id: int | None = Field(default=None, primary_key=True)
    task_version_id: int = Field(foreign_key="task_version.id", index=True)
    tag: str = ""
    ok: bool = False
    log: str = ""
    duration_s: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)


class Generation(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    prompt_version: str = ""
    model: str = ""
    seed_axes_json: str = "{}"
    difficulty: str = ""
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float = 0.0
    wall_s: float = 0.0
    api_retries: int = 0
    transcript_json: str = "[]"
    outcome: str = "running"  # running | accepted | rejected | budget_exhausted | error | cancelled
    reason: str = ""
    task_version_id: int | None = Field(default=None, foreign_key="task_version.id")
    created_at: datetime = Field(default_factory=utcnow)
    # schema 5 (generation transcripts): turns taken, tokens of broken streams (kept apart), failure line
    turns: int = 0
    lost_tokens_in: int = 0
    lost_tokens_out: int = 0
    detail: str = ""


class Audit(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    task_version_id: int = Field(foreign_key="task_version.id", index=True)
    verdict: str = ""  # accepted | rejected | warning
    reasons_json: str = "[]"  # taxonomy codes, e.g. ["invalidity.oracle_fails"]
    details_json: str = "{}"
    created_at: datetime = Field(default_factory=utcnow)


class ProbeCache(SQLModel, table=True):
    """Harness probe outcomes for one setting (base image, engine, limits): the audit reuses them."""

    __tablename__ = "probe_cache"

    key: str = Field(primary_key=True)  # sha256 of setting_json
    setting_json: str = "{}"
    results_json: str = "{}"  # {probe: {outcome, expected, ok, by, episode}}
    task_version_id: int | None = None  # the audit whose episodes produced them
    created_at: datetime = Field(default_factory=utcnow)


class AuditRun(SQLModel, table=True):
    """A queue of task versions to audit (``bandpass audit``): claimed, resumed and run on any executor
    like a rollout batch's episodes (engine/audit/corpus.py)."""

    __tablename__ = "audit_run"

    id: str = Field(primary_key=True)
    executor: str = ""  # where its latest runner ran audits: local | ray
    params_json: str = "{}"  # what --resume must reuse (reruns)
    created_at: datetime = Field(default_factory=utcnow)


class AuditJob(SQLModel, table=True):
    """One task version's audit in a run: queued | running (``phase`` says what it does now) | done."""

    __tablename__ = "audit_job"

    id: int | None = Field(default=None, primary_key=True)
    run_id: str = Field(foreign_key="audit_run.id")
    task_version_id: int = Field(foreign_key="task_version.id")
    status: str = "queued"
    phase: str = ""  # static | build | footprint | probes | verdict (engine/audit/phases.py)
    node: str = ""  # the host that runs (ran) it
    batch_id: str = ""  # its episodes' batch id (this try's): clean-up after a kill finds them by it
    tries: int = 0
    audit_id: int | None = Field(default=None, foreign_key="audit.id")
    created_at: datetime = Field(default_factory=utcnow)
    started_at: datetime | None = None
    ended_at: datetime | None = None


class PolicyModel(SQLModel, table=True):
    __tablename__ = "policy_model"

    id: int | None = Field(default=None, primary_key=True)
    name: str = Field(index=True, unique=True)
    base_url: str = ""
    served_name: str = ""
    params_json: str = "{}"
    created_at: datetime = Field(default_factory=utcnow)


class Episode(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    task_version_id: int = Field(foreign_key="task_version.id", index=True)
    agent: str = Field(default="", index=True)  # built-in agent name or policy model name
    batch_id: str = Field(default="", index=True)
    attempt: int = 0
    status: str = Field(default="queued", index=True)  # queued | running | done
    outcome: str = ""  # passed | failed | agent_error:<code> | infra_error:<code>
    reward: float | None = None
    retries: int = 0
    error: str = ""
    agent_cast: str = ""  # path relative to the workspace
    verifier_cast: str = ""
    verifier_output: str = ""
    evidence_json: str = ""  # who ended the sandbox, with the evidence (engine/sandbox/attribution/)
    started_at: datetime | None = None
    ended_at: datetime | None = None
    created_at: datetime = Field(default_factory=utcnow)
    phases_json: str = "[]"  # [{name, timeout_s, duration_s, error}] of the last try: where time went
    origin: str = ""  # "" (ran) | regrade (this version's verifier re-run on another end state)
    source_episode_id: int | None = Field(default=None, index=True)  # the regraded episode
    # --- calibration (#17): imported episodes and selective retries ---
    source: str = Field(
        default="", index=True
    )  # "harbor:<job id>/<trial>" for an imported trial; "" ran here
    prior_tries_json: str = "[]"  # what each `run --retry` replaced: [{outcome, error, retries, recordings}]
    node_id: str = ""  # Ray node id of the last try ('' = ran locally); migration episode_node
    node_address: str = ""  # that node's address
    # schema 14: what an imported Harbor trial recorded: {"usage": agent_result, "harbor": traces metadata}
    imported_json: str = ""
    verify_mode: str = ""  # clean_room | in_place ('' ran before the clean room existed: in place)
    # schema 18: every key of the verifier's reward.json ({"reward": x} for reward.txt; '' none), and how
    # the reward was read and what the verifier's observer saw (engine/run/verifier.py ``judge``)
    rewards_json: str = ""
    verifier_json: str = ""


class Batch(SQLModel, table=True):
    """A rollout request: ``k`` attempts per task version for one agent, run as its queued episodes.

    Kept in the database (not a side file) so the batch and its queued rows are created in one
    transaction and travel with the workspace; ``bandpass run --resume`` rebuilds the agent from it.
    """

    id: str = Field(primary_key=True)
    agent: str = ""  # policy model name (as in bandpass.toml) or built-in agent name; = Episode.agent
    kind: str = "model"  # model | builtin
    base_url: str = ""  # --base-url override; "" = the model's bandpass.toml entry
    k: int = 1
    params_json: str = "{}"  # agent parameters (max_steps, request timeout...) resume must reuse
    created_at: datetime = Field(default_factory=utcnow)
    executor: str = ""  # where its latest runner ran episodes: local | ray ("" until one starts)
    adaptive_json: str = ""  # an adaptive batch's settings and stop reason (engine/calibration/adaptive.py)


class Step(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    episode_id: int = Field(foreign_key="episode.id", index=True)
    index: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    latency_s: float = 0.0
    action_json: str = "{}"
    raw_reply: str = ""
    observation: str = ""
    cuts_json: str = "[]"  # context/observation truncations: harness evidence
    marker_time: float = 0.0
    attempts_json: str = "[]"  # every request behind the step: latency, error, backoff (a slow server)
    created_at: datetime = Field(default_factory=utcnow)


#: A step's evidence: every column but its identity. What samples and remote workers carry across.
STEP_FIELDS: tuple[str, ...] = (
    "index",
    "prompt_tokens",
    "completion_tokens",
    "latency_s",
    "action_json",
    "raw_reply",
    "observation",
    "cuts_json",
    "marker_time",
    "attempts_json",
)


class FailureTag(SQLModel, table=True):
    __tablename__ = "failure_tag"

    id: int | None = Field(default=None, primary_key=True)
    episode_id: int = Field(foreign_key="episode.id", index=True)
    tag_class: str = ""  # invalidity | harness | misalignment | infra
    subclass: str = ""
    note: str = ""
    author: str = ""
    blocking: bool = False  # invalidity and misalignment keep the task out of exports
    cleared: bool = False
    created_at: datetime = Field(default_factory=utcnow)


class Export(SQLModel, table=True):
    id: int | None = Field(default=None, primary_key=True)
    model: str = ""
    params_json: str = "{}"
    out_dir: str = ""
    task_count: int = 0
    manifest_sha256: str = ""
    created_at: datetime = Field(default_factory=utcnow)


class ReviewState(SQLModel, table=True):
    """The tagging queue's persistent state for one episode: only "skipped" is stored (pending and tagged
    follow from the episode and its tags), so a curator's "not now" survives a restart."""

    __tablename__ = "review_state"

    episode_id: int = Field(primary_key=True, foreign_key="episode.id")
    state: str = "skipped"
    author: str = ""
    updated_at: datetime = Field(default_factory=utcnow)


class Diagnosis(SQLModel, table=True):
    """Why one finished episode ended (engine/review/diagnosis.py): a suggested tag (``""`` when the
    code is not a tag, e.g. ``policy.failed_checks``), its confidence, the evidence and the failing
    checks as JSON, and the failure signature clusters group by. Derived data: recomputable any time."""

    __tablename__ = "diagnosis"

    episode_id: int = Field(primary_key=True, foreign_key="episode.id")
    code: str = ""
    tag: str = ""
    confidence: float = 0.0
    summary: str = ""
    evidence_json: str = "[]"
    checks_json: str = "[]"
    signature: str = Field(default="", index=True)
    rules_version: int = 0
    created_at: datetime = Field(default_factory=utcnow)


class ReviewSuggestion(SQLModel, table=True):
    """Claude's review of one episode (issue #16): a *suggestion* beside the curator's tags, never a tag.

    Only validated content is kept in ``tag_class``/``subclass``/``citations_json``; what validation dropped
    (unknown class, a step that does not exist, a quote not in the stored record) is in ``dropped_json``,
    so the report can say how often the model's evidence could not be trusted. ``cost_usd`` is NULL when
    the model has no price (unknown, never $0). ``accepted_tag_id`` is the tag a curator wrote from it.
    """

    __tablename__ = "review_suggestion"

    id: int | None = Field(default=None, primary_key=True)
    episode_id: int = Field(foreign_key="episode.id", index=True)
    model: str = ""
    prompt_version: str = ""
    run_id: str = Field(default="", index=True)
    cluster: str = ""  # the failure signature the episode was sampled from (bandpass review --cluster)
    status: str = ""  # ok | refused | invalid | error | budget
    verdict: str = ""  # true_pass | false_pass | true_fail | false_fail | infra ("" unless ok)
    tag_class: str = ""  # "" when the model named no code, or validation dropped it
    subclass: str = ""
    explanation: str = ""
    citations_json: str = "[]"  # validated [{"source", "step", "quote"}]
    dropped_json: str = "[]"  # [{"what", "reason", ...}] every part of the answer validation refused
    raw_input_json: str = "{}"  # the submit_review input as the model sent it (audit trail)
    tokens_in: int = 0
    tokens_out: int = 0
    cost_usd: float | None = None
    latency_s: float = 0.0
    api_retries: int = 0
    tool_errors: int = 0  # malformed submit_review inputs sent back to the model
    error: str = ""
    accepted_tag_id: int | None = None  # no foreign key: undoing the tag deletes it
    created_at: datetime = Field(default_factory=utcnow)


class EpisodeEndState(SQLModel, table=True):
    """What the policy left in its container, captured after the agent and before the verifier.

    ``changes_json`` is the engine's diff against the image with each regular file's size and sha256 and
    whether its content is in ``archive`` (a tar under the episode's recordings, capped per episode);
    ``findings_json`` is what the tamper guard flagged. Evidence for the curator and input to regrade.
    """

    __tablename__ = "episode_endstate"

    episode_id: int = Field(primary_key=True, foreign_key="episode.id")
    archive: str = ""  # path relative to the workspace; "" when nothing was archived
    image: str = ""  # the image the changes are against (for diffs of modified files)
    changes_json: str = "[]"
    findings_json: str = "[]"
    archived_bytes: int = 0
    cap_bytes: int = 0
    over_cap: int = 0  # regular files listed with size and sha256 only
    capture_s: float = 0.0
    created_at: datetime = Field(default_factory=utcnow)
    #: The clean room's carry (artifact roots, carried/deleted counts, dropped artifacts with why) or, in
    #: place, the processes kept alive for the verifier (engine/run/cleanroom.py)
    carry_json: str = "{}"


class EpisodeTaskStep(SQLModel, table=True):
    """One task step of a multi-step episode (Harbor's ``[[steps]]``): what its verifier said and where it
    is in the recordings. ``outcome`` is the step's own (passed, failed, an agent or infra error, or
    ``skipped``: an earlier step fell below its ``min_reward``, or ``not_run``: its setup failed on what
    the policy left); ``counted`` says whether the step enters the task's reward (Harbor's mean counts the
    steps with a verifier result)."""

    __tablename__ = "episode_task_step"

    id: int | None = Field(default=None, primary_key=True)
    episode_id: int = Field(foreign_key="episode.id", index=True)
    position: int = 0  # 0-based, in the task's order
    name: str = ""
    outcome: str = ""
    reward: float | None = None
    rewards_json: str = "{}"  # every key of the step's reward file
    detail: str = ""
    marker_time: float = 0.0  # seconds into the agent cast where the step began
    verifier_cast: str = ""  # path relative to the workspace
    verifier_output: str = ""
    verify_mode: str = ""  # clean_room | service | in_place
    counted: bool = False
    duration_s: float = 0.0
    carry_json: str = "{}"  # what crossed into the step's clean room (or stayed alive, in place)
    verifier_evidence_json: str = "{}"  # how the step's reward was read, what the observer saw


class SearchDoc(SQLModel, table=True):
    """One terminal of one episode as the search index holds it (store/queries/search.py; issue 33): its
    lines in the order they first appeared (``body``, as FTS5 reads it) and per line the step, cast time,
    frame and kind (``lines_json``); ``facets`` are filter tokens (task, agent, outcome, terminal). The id
    is ``episode_id * 2 + (0 agent | 1 verifier)``, so the index's rowid order is episode order."""

    __tablename__ = "search_doc"

    id: int = Field(primary_key=True)
    episode_id: int = Field(index=True)
    terminal: str = ""
    body: str = ""
    facets: str = ""
    lines_json: str = "{}"


class SearchState(SQLModel, table=True):
    """Which episodes the search index holds, as of which finished row (``ended_at``, copied from the
    episode) and transcript version: anything else about an episode makes it pending again."""

    __tablename__ = "search_state"

    episode_id: int = Field(primary_key=True)
    version: int = 0
    ended_at: str = ""
    lines: int = 0
    note: str = ""
    indexed_at: datetime = Field(default_factory=utcnow)


#: The FTS5 index over ``search_doc`` (external content), as migration 0015_search_index creates it; also
#: made by ``SQLModel.metadata.create_all``, so a schema built from the models is the migrated schema.
SEARCH_FTS_DDL = (
    "CREATE VIRTUAL TABLE search_fts USING fts5(body, facets, content='search_doc', content_rowid='id',"
    " tokenize='unicode61 remove_diacritics 2')"
)
event.listen(
    SQLModel.metadata.tables["search_doc"],
    "after_create",
    DDL(SEARCH_FTS_DDL),  # type: ignore[no-untyped-call]  # SQLAlchemy 2's DDL() is unannotated
)


class BandLedgerEntry(SQLModel, table=True):
    """The band ledger: one band decision for a (task version, model) — the checkpoint it stands for, the
    band, k and confidence it was decided at, its interval and the episodes behind it. Appended whenever
    the evidence or the parameters change (engine/calibration/ledger.py), never updated."""

    __tablename__ = "band_decision"

    id: int | None = Field(default=None, primary_key=True)
    task_version_id: int = Field(foreign_key="task_version.id", index=True)
    model: str = Field(default="", index=True)
    series: str = ""  # bandpass.toml [models.X] series ("" when none)
    checkpoint_step: int | None = None
    lo: float = 0.0
    hi: float = 1.0
    k: int = 1
    confidence: float = 0.9
    min_samples: int = 1
    decision: str = ""  # in | below | above | undecided
    n: int = 0
    c: int = 0
    infra_errors: int = 0
    rate_lo: float = 0.0  # interval on the per-sample pass rate
    rate_hi: float = 1.0
    pass_lo: float = 0.0  # the same interval on pass@k
    pass_hi: float = 1.0
    episodes_json: str = "[]"  # ids of the valid samples behind the decision
    source: str = ""  # report | export | adaptive:<batch id> | tui
    created_at: datetime = Field(default_factory=utcnow)
