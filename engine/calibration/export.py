"""Export: the tasks that pass the gates, in the formats trainers read, reproducibly.

Layout of an export directory (every path relative to it; nothing outside it is written):

    manifest.json                 params, the task list, sha256 of every other file
    harbor/<task>/...             Harbor task directories, byte copies of the stored versions
    verl/{train,validation}.parquet     verl rows (data_source, prompt, ability, reward_model, extra_info)
    skyrl/{train,validation}.parquet    SkyRL rows (data_source, prompt, env_class, reward_spec, extra_info)
    jsonl/{verl,skyrl}_{train,validation}.jsonl   the same rows, one JSON object per line
    pass_counts.parquet, pass_counts.csv          (task, version_hash, model, attempts, solved, infra_errors)
    traces/traces.{jsonl,parquet}                 with --format traces: episodes as chat trajectories
                                                  (engine/calibration/traces.py), filtered by --filter

Reproducibility is a feature, not a nicety: a trainer run must be traceable to the exact set it saw, so
the same database and the same parameters give byte-identical files. Hence no timestamps or absolute
export paths inside files, JSON with sorted keys, explicit Arrow schemas, and Parquet written with fixed
options (no statistics, fixed compression and row-group size). ``created_by`` in the Parquet footer
names the pyarrow version, so byte identity holds for one pyarrow version (the manifest records it).

Files are written into a sibling ``.partial`` folder and renamed into place at the end, so a crash or a
refused export (a secret found) never leaves a half-written set that looks complete.

A task is exported only when it is *decided* in the band at ``confidence`` (engine/calibration/
confidence.py); every row and the manifest say so with the decision's pass@k interval, and
``extra_info.band_history`` carries the task's band ledger: the latest decision of every model on that
version (each on its own band), in checkpoint order. The export records those decisions first, so the
history is the one the gates just used.
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import random
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ...store import queries
from ...store.db import session
from ...store.queries import endstate as endstate_store
from ..core.config import BandConfig, ConfigError
from ..core.errors import BandpassError
from ..core.workspace import Workspace
from ..tasks.artifacts import declare
from ..tasks.taskdir import TaskInvalid, load_task, task_files, version_hash
from . import ledger
from .calibrate import (
    DUPLICATE_THRESHOLD,
    INFRA_WARN_RATE,
    GateParams,
    TaskEstimate,
    estimates,
    gates,
)
from .confidence import check_confidence

FORMATS = ("harbor", "verl", "skyrl", "jsonl", "traces")
#: The traces format's row shapes: Bandpass's (with the columns to mask infra and suspect episodes with)
#: or Harbor's own ``harbor traces export`` schema (engine/calibration/harbor_traces.py).
TRACE_SCHEMAS = ("bandpass", "harbor")
SPLITS = ("train", "validation")
DATA_SOURCE = "bandpass"
ABILITY = "terminal"
MANIFEST = "manifest.json"
#: Env vars whose values must never leave the workstation, besides the ones bandpass.toml names.
SECRET_ENV_VARS = (
    "ANTHROPIC_API_KEY",
    "OPENAI_API_KEY",
    "VLLM_API_KEY",
    "HF_TOKEN",
    "HUGGING_FACE_HUB_TOKEN",
    "WANDB_API_KEY",
)
_MIN_SECRET_LEN = 8  # shorter values ("1", "true") would match innocent bytes everywhere


class ExportError(BandpassError, RuntimeError):
    """An export that cannot be made; the message is one line naming what to fix."""


@dataclass
class ExportParams:
    """Everything that determines an export's bytes; stored with the Export row and in the manifest."""

    model: str
    lo: float = BandConfig.lo
    hi: float = BandConfig.hi
    k: int = BandConfig.k
    formats: tuple[str, ...] = FORMATS
    curriculum: bool = False
    val_fraction: float = 0.1
    seed: int = 0
    min_samples: int = BandConfig.min_samples
    allow_warning: bool = False
    duplicate_threshold: float = DUPLICATE_THRESHOLD
    max_infra_rate: float = INFRA_WARN_RATE
    env_class: str = "harbor"
    trace_filter: str = "all"  # with the traces format: all | success | failure
    trace_schema: str = "bandpass"  # with the traces format: bandpass (masking columns) | harbor (Harbor's)
    against: tuple[str, ...] = ()  # reference task folders: near-duplicates of theirs are left out
    confidence: float = BandConfig.confidence  # band decisions hold with this probability

    def __post_init__(self) -> None:
        unknown = [f for f in self.formats if f not in FORMATS]
        if unknown or not self.formats:
            got = ", ".join(repr(f) for f in unknown) if unknown else "nothing"
            parquet = (
                " (Parquet rows: verl and skyrl)" if any("parquet" in f.lower() for f in unknown) else ""
            )
            raise ExportError(f"--format: expected a comma list of {','.join(FORMATS)}, got {got}{parquet}")
        self.formats = tuple(f for f in FORMATS if f in self.formats)  # canonical order, no repeats
        if not 0 <= self.lo <= self.hi <= 1:
            raise ExportError(f"--band: expected LO:HI with 0 <= LO <= HI <= 1, got {self.lo}:{self.hi}")
        if self.k < 1:
            raise ExportError(f"--k: expected an integer >= 1, got {self.k}")
        if not 0 <= self.val_fraction < 1:
            raise ExportError(f"--val-fraction: expected 0 <= F < 1, got {self.val_fraction}")
        from .traces import FILTERS

        if self.trace_filter not in FILTERS:
            raise ExportError(f"--filter: expected one of {', '.join(FILTERS)}, got {self.trace_filter!r}")
        if self.trace_schema not in TRACE_SCHEMAS:
            raise ExportError(
                f"--traces-schema: expected one of {', '.join(TRACE_SCHEMAS)}, got {self.trace_schema!r}"
            )
        self.against = tuple(self.against)
        try:
            check_confidence(self.confidence)
        except ValueError as exc:
            raise ExportError(str(exc)) from None

    def gate_params(self) -> GateParams:
        return GateParams(
            lo=self.lo,
            hi=self.hi,
            k=self.k,
            min_samples=self.min_samples,
            allow_warning=self.allow_warning,
            duplicate_threshold=self.duplicate_threshold,
            max_infra_rate=self.max_infra_rate,
            confidence=self.confidence,
        )

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["formats"] = list(self.formats)
        d["against"] = list(self.against)
        return d


@dataclass
class ExportedTask:
    name: str
    dirname: str
    version_hash: str
    split: str
    index: int
    n: int
    c: int
    infra_errors: int
    pass_at_k: float | None
    category: str
    difficulty: str
    band: str = "in"  # the band decision (an exported task is always decided in)
    pass_at_k_interval: tuple[float, float] = (0.0, 1.0)  # the interval behind it
    confidence: float = BandConfig.confidence
    verified: str = ""  # clean_room | service | in_place | mixed: where its episodes' verifier ran
    #: The audit that let it through: its verdict and what the hostile twins of the oracle's own
    #: artifacts got (engine/audit/twins.py): a trainer sees the task was proven against the policy's code
    audit: dict[str, Any] = field(default_factory=dict)
    #: What the version adopted from its oracle's footprint: declared in the exported task.toml too.
    adopted_artifacts: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        d = dict(self.__dict__)
        d["pass_at_k_interval"] = list(self.pass_at_k_interval)
        if not self.adopted_artifacts:  # an export of tasks that adopted nothing reads as it always did
            del d["adopted_artifacts"]
        return d


@dataclass
class ExportResult:
    out_dir: Path
    params: ExportParams
    tasks: list[ExportedTask] = field(default_factory=list)
    excluded: dict[str, list[str]] = field(default_factory=dict)  # task -> failed gates
    files: dict[str, str] = field(default_factory=dict)  # relative path -> sha256 (manifest excluded)
    decontaminated: dict[str, dict[str, Any]] = field(default_factory=dict)  # task -> reference, similarity
    traces: int = 0  # trace rows written
    manifest_sha256: str = ""
    export_id: int | None = None

    def as_dict(self) -> dict[str, Any]:
        return {
            "out_dir": str(self.out_dir),
            "params": self.params.as_dict(),
            "tasks": [t.as_dict() for t in self.tasks],
            "excluded": self.excluded,
            "files": self.files,
            "decontaminated": self.decontaminated,
            "traces": self.traces,
            "manifest_sha256": self.manifest_sha256,
            "export_id": self.export_id,
        }


# --- ordering and splitting ---------------------------------------------------------------------------


def order_tasks(ests: Sequence[TaskEstimate], k: int, curriculum: bool) -> list[TaskEstimate]:
    """By name; with ``curriculum``, easy→hard: highest pass rate first (then pass@k, then name).

    The per-sample pass rate c/n orders more finely than pass@k, which saturates near 1 for easy tasks.
    """
    if not curriculum:
        return sorted(ests, key=lambda e: e.task)
    return sorted(ests, key=lambda e: (-(e.pass_rate or 0.0), -(e.pass_at.get(k) or 0.0), e.task))


def stratified_split(ests: Sequence[TaskEstimate], val_fraction: float, seed: int) -> dict[str, str]:
    """``{task: "train" | "validation"}``, stratified by category, deterministic in ``seed``.

    The validation total is ``round(N * f)`` (at least one when ``f > 0`` and N >= 2, never all N),
    shared between categories by largest remainder, so many one-task categories still yield a
    validation set. Each category's members are shuffled by a ``random.Random`` seeded with a string
    (hashed with sha512, hence stable across processes and PYTHONHASHSEED).
    """
    names_by_cat: dict[str, list[str]] = {}
    for e in ests:
        names_by_cat.setdefault(e.category or "uncategorized", []).append(e.task)
    total = len(ests)
    want = math.floor(total * val_fraction + 0.5) if val_fraction > 0 else 0
    if val_fraction > 0 and total >= 2:
        want = min(max(want, 1), total - 1)
    elif total < 2:
        want = 0
    quotas = {cat: math.floor(len(v) * val_fraction) for cat, v in names_by_cat.items()}
    rest = want - sum(quotas.values())
    by_remainder = sorted(names_by_cat, key=lambda c: (-(len(names_by_cat[c]) * val_fraction - quotas[c]), c))
    while rest > 0:
        progressed = False
        for cat in by_remainder:
            if rest == 0:
                break
            if quotas[cat] < len(names_by_cat[cat]):
                quotas[cat] += 1
                rest -= 1
                progressed = True
        if not progressed:
            break
    out: dict[str, str] = {}
    for cat in sorted(names_by_cat):
        names = sorted(names_by_cat[cat])
        random.Random(f"bandpass-split:{seed}:{cat}").shuffle(names)
        for i, name in enumerate(names):
            out[name] = "validation" if i < quotas[cat] else "train"
    return out


# --- rows and schemas ---------------------------------------------------------------------------------

_MESSAGES = pa.list_(pa.struct([("role", pa.string()), ("content", pa.string())]))
#: One model's latest band decision on the task version (engine/calibration/ledger.py ``HistoryItem``).
_HISTORY = pa.list_(
    pa.struct(
        [
            ("c", pa.int64()),
            ("checkpoint_step", pa.int64()),
            ("confidence", pa.float64()),
            ("decision", pa.string()),
            ("hi", pa.float64()),
            ("k", pa.int64()),
            ("lo", pa.float64()),
            ("model", pa.string()),
            ("n", pa.int64()),
            ("pass_hi", pa.float64()),
            ("pass_lo", pa.float64()),
            ("series", pa.string()),
        ]
    )
)
_EXTRA_FIELDS = [
    ("band", pa.string()),
    ("band_history", _HISTORY),
    ("c", pa.int64()),
    ("category", pa.string()),
    ("confidence", pa.float64()),
    ("difficulty", pa.string()),
    ("index", pa.int64()),
    ("k", pa.int64()),
    ("model", pa.string()),
    ("n", pa.int64()),
    ("pass_at_k", pa.float64()),
    ("pass_at_k_hi", pa.float64()),
    ("pass_at_k_lo", pa.float64()),
    ("split", pa.string()),
    ("task", pa.string()),
    ("task_dir", pa.string()),
    ("task_path", pa.string()),
    ("version_hash", pa.string()),
]
_EXTRA = pa.struct(_EXTRA_FIELDS)
VERL_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", _MESSAGES),
        ("ability", pa.string()),
        ("reward_model", pa.struct([("style", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", _EXTRA),
    ]
)
SKYRL_SCHEMA = pa.schema(
    [
        ("data_source", pa.string()),
        ("prompt", _MESSAGES),
        ("env_class", pa.string()),
        ("reward_spec", pa.struct([("method", pa.string()), ("ground_truth", pa.string())])),
        ("extra_info", _EXTRA),
    ]
)
PASS_COUNTS_SCHEMA = pa.schema(
    [
        ("task", pa.string()),
        ("version_hash", pa.string()),
        ("model", pa.string()),
        ("attempts", pa.int64()),
        ("solved", pa.int64()),
        ("infra_errors", pa.int64()),
    ]
)


def _extra(
    e: TaskEstimate,
    t: ExportedTask,
    params: ExportParams,
    task_path: str,
    history: list[ledger.HistoryItem] | None = None,
) -> dict[str, Any]:
    return {
        "band": t.band,
        "band_history": [h.as_dict() for h in history or []],
        "c": e.c,
        "category": e.category,
        "confidence": t.confidence,
        "difficulty": e.difficulty,
        "index": t.index,
        "k": params.k,
        "model": params.model,
        "n": e.n,
        "pass_at_k": t.pass_at_k,
        "pass_at_k_hi": t.pass_at_k_interval[1],
        "pass_at_k_lo": t.pass_at_k_interval[0],
        "split": t.split,
        "task": e.task,
        "task_dir": task_path,
        "task_path": task_path,
        "version_hash": e.version_hash,
    }


def verl_row(
    e: TaskEstimate,
    t: ExportedTask,
    params: ExportParams,
    task_path: str,
    history: list[ledger.HistoryItem] | None = None,
) -> dict[str, Any]:
    """verl RLHFDataset row. ``ground_truth`` names the task's tests: the reward comes from running
    them in the task's container, there is no literal answer to compare against."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": e.instruction}],
        "ability": ABILITY,
        "reward_model": {"style": "rule", "ground_truth": f"{task_path}/tests"},
        "extra_info": _extra(e, t, params, task_path, history),
    }


def skyrl_row(
    e: TaskEstimate,
    t: ExportedTask,
    params: ExportParams,
    task_path: str,
    history: list[ledger.HistoryItem] | None = None,
) -> dict[str, Any]:
    """SkyRL-Gym row; ``env_class`` selects the environment that runs the Harbor task directory."""
    return {
        "data_source": DATA_SOURCE,
        "prompt": [{"role": "user", "content": e.instruction}],
        "env_class": params.env_class,
        "reward_spec": {"method": "rule", "ground_truth": f"{task_path}/tests"},
        "extra_info": _extra(e, t, params, task_path, history),
    }


def _parquet_bytes(rows: list[dict[str, Any]], schema: pa.Schema) -> bytes:
    """Parquet with every option that could vary pinned down (see the module docstring)."""
    table = pa.Table.from_pylist(rows, schema=schema)
    buf = io.BytesIO()
    pq.write_table(
        table,
        buf,
        compression="zstd",
        compression_level=3,
        write_statistics=False,
        use_dictionary=False,
        row_group_size=65536,
        data_page_version="1.0",
        version="2.6",
        store_schema=True,
    )
    return buf.getvalue()


def _jsonl_bytes(rows: list[dict[str, Any]]) -> bytes:
    return "".join(json.dumps(r, sort_keys=True, ensure_ascii=False) + "\n" for r in rows).encode()


def _csv_bytes(rows: list[dict[str, Any]], columns: Sequence[str]) -> bytes:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=list(columns), lineterminator="\n")
    w.writeheader()
    w.writerows(rows)
    return buf.getvalue().encode()


# --- files --------------------------------------------------------------------------------------------

_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def _dirnames(names: Sequence[str], hashes: Sequence[str]) -> list[str]:
    """Filesystem-safe, unique directory names; a name that had to change gets its hash appended."""
    out: list[str] = []
    seen: set[str] = set()
    for name, h in zip(names, hashes, strict=True):
        safe = _UNSAFE.sub("_", name).strip("._") or "task"
        if safe in seen or safe != name:
            safe = f"{safe}-{h[:8]}"
        seen.add(safe)
        out.append(safe)
    return out


def _copy_task(src: Path, dest: Path) -> None:
    """Copies the files the version hash covers (same walk, symlinks followed), with normalised modes
    so the copy hashes the same and reads the same on any machine."""
    for p in task_files(src):
        rel = p.relative_to(src)
        target = dest / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        if p.is_symlink() and not p.exists():
            os.symlink(os.readlink(p), target)  # dangling: the link text is its identity
            continue
        target.write_bytes(p.read_bytes())
        target.chmod(0o755 if os.stat(p).st_mode & 0o111 else 0o644)


def _secret_values(ws: Workspace) -> dict[str, str]:
    names = set(SECRET_ENV_VARS)
    try:
        cfg = ws.config
        names.add(cfg.generator.api_key_env)
        names.update(m.api_key_env for m in cfg.models.values())
    except ConfigError:  # a broken config is reported by the commands that use it; scan the defaults
        pass
    values = {}
    for n in sorted(names):
        v = os.environ.get(n, "")
        if len(v) >= _MIN_SECRET_LEN:
            values[n] = v
    return values


def _sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _is_previous_export(out: Path) -> bool:
    try:
        return "bandpass_export" in json.loads((out / MANIFEST).read_text())
    except (OSError, ValueError):
        return False


# --- the export ---------------------------------------------------------------------------------------


GATE_CONTAMINATED = "contaminated"
#: A stored version Harbor 0.25's own loader would refuse (an older network_mode spelling, a name that is not
#: org/name): exported byte for byte it would not load, and rewriting it would change its version hash.
GATE_HARBOR_INVALID = "harbor_invalid"


def _audit_proof(ws: Workspace, version_id: int, verdict: str) -> dict[str, Any]:
    """The audit's verdict and its hostile twins in brief: each twin's outcome and whether it was paid,
    or why none ran (no code among the oracle's artifacts, a service task)."""
    with session(ws.engine) as s:
        audit = queries.latest_audit(s, version_id)
    details = json.loads(audit.details_json or "{}") if audit is not None else {}
    twins = details.get("hostile_twins") or {}
    brief: dict[str, Any] = (
        {"skipped": twins["skipped"]}
        if twins.get("skipped")
        else {
            name: {"outcome": v.get("outcome"), "paid": v.get("paid")}
            for name, v in (twins.get("twins") or {}).items()
        }
    )
    return {"verdict": verdict, "hostile_twins": brief}


def _harbor_gate(ws: Workspace, ests: Sequence[TaskEstimate], failed: dict[str, list[str]]) -> None:
    for e in ests:
        if failed[e.task]:
            continue
        try:
            refusals = load_task(ws.abs(e.path)).harbor_refusals
        except TaskInvalid as exc:
            refusals = [str(p) for p in exc.problems]
        failed[e.task].extend(f"{GATE_HARBOR_INVALID}:{r}" for r in refusals[:1])


def plan(
    ws: Workspace, params: ExportParams, decontaminated: dict[str, dict[str, Any]] | None = None
) -> tuple[list[TaskEstimate], dict[str, list[str]]]:
    """The tasks that pass the gates, in export order, and the failed gates of the rest.

    With ``params.against``, a task near-duplicating a reference instruction fails the extra gate
    ``contaminated:<reference>``; ``decontaminated`` (when given) receives those matches.
    """
    from .decontaminate import AgainstError, contaminated, reference_instructions

    ests = estimates(ws, params.model, ks=sorted({1, params.k}))
    failed = gates(ests, params.gate_params())
    _record_decisions(ws, params, ests)
    if params.against:
        try:
            refs = reference_instructions(params.against)
        except AgainstError as exc:
            raise ExportError(str(exc)) from None
        hits = contaminated([(e.task, e.instruction) for e in ests], refs, params.duplicate_threshold)
        for name, (ref, sim) in sorted(hits.items()):
            failed[name].append(f"{GATE_CONTAMINATED}:{ref}")
            if decontaminated is not None:
                decontaminated[name] = {"reference": ref, "similarity": round(sim, 6)}
    if "harbor" in params.formats:
        _harbor_gate(ws, ests, failed)
    chosen = [e for e in ests if not failed[e.task]]
    excluded = {name: why for name, why in sorted(failed.items()) if why}
    return order_tasks(chosen, params.k, params.curriculum), excluded


def _record_decisions(ws: Workspace, params: ExportParams, ests: Sequence[TaskEstimate]) -> None:
    """Records the exported model's decisions, and every other policy model's on its own band at the
    export's confidence, in the band ledger: the history ``extra_info`` carries."""
    from ..core.probes import is_builtin_agent
    from .compare import model_params

    try:
        config = ws.config
    except ConfigError:  # a broken bandpass.toml: the ledger records no checkpoint step
        config = None
    gp = params.gate_params()
    ledger.record(ws, params.model, ests, gp, "export", config)
    with session(ws.engine) as s:
        others = [a for a in queries.episode_agents(s) if a != params.model and not is_builtin_agent(a)]
    for m in others:
        mp = model_params(m, gp, config)
        ledger.record(ws, m, estimates(ws, m, ks=sorted({1, mp.k})), mp, "export", config)


def export(ws: Workspace, params: ExportParams, out: Path, *, overwrite: bool = False) -> ExportResult:
    """Writes the export to ``out`` and records it; raises ``ExportError`` with a one-line reason.

    ``out`` must be missing or empty; ``overwrite`` replaces it only when it holds a previous Bandpass
    export (its manifest says so), so a typo in ``--out`` can never wipe an unrelated folder.
    """
    out = Path(out).expanduser().resolve()
    if out.exists():
        if not out.is_dir():
            raise ExportError(f"--out: {out} exists and is not a directory")
        if any(out.iterdir()):
            # a foreign folder is refused the same way with or without --overwrite: suggesting a flag
            # that then refuses too sends the curator round in a circle
            if not _is_previous_export(out):
                raise ExportError(
                    f"--out: {out} is not empty and holds no Bandpass export; choose a new or empty folder"
                    " (--overwrite replaces only a previous export)"
                )
            if not overwrite:
                raise ExportError(
                    f"--out: {out} is not empty: it holds a previous export (--overwrite replaces it)"
                )

    decontaminated: dict[str, dict[str, Any]] = {}
    chosen, excluded = plan(ws, params, decontaminated)
    split = stratified_split(chosen, params.val_fraction, params.seed)
    dirnames = _dirnames([e.task for e in chosen], [e.version_hash for e in chosen])
    result = ExportResult(out_dir=out, params=params, excluded=excluded, decontaminated=decontaminated)

    counters = dict.fromkeys(SPLITS, 0)
    pairs: list[tuple[TaskEstimate, ExportedTask]] = []
    gp = params.gate_params()
    history = ledger.band_history(ws, [e.version_id for e in chosen])
    with session(ws.engine) as s:
        adopted = {
            e.version_id: endstate_store.adopted_artifacts(v)
            for e in chosen
            if (v := queries.get_version(s, e.version_id)) is not None
        }
    for e, dirname in zip(chosen, dirnames, strict=True):
        sp = split[e.task]
        d = e.decision(gp)
        t = ExportedTask(
            name=e.task,
            dirname=dirname,
            version_hash=e.version_hash,
            split=sp,
            index=counters[sp],
            n=e.n,
            c=e.c,
            infra_errors=e.infra_errors,
            pass_at_k=e.pass_at.get(params.k),
            category=e.category,
            difficulty=e.difficulty,
            band=d.status,
            pass_at_k_interval=d.pass_at_k,
            confidence=gp.confidence,
            verified=e.verified,
            audit=_audit_proof(ws, e.version_id, e.audit),
            adopted_artifacts=adopted.get(e.version_id, []),
        )
        counters[sp] += 1
        pairs.append((e, t))
    result.tasks = [t for _, t in pairs]

    files: dict[str, bytes] = {}
    with_harbor = "harbor" in params.formats

    def task_path(e: TaskEstimate, t: ExportedTask) -> str:
        # Relative to the export root when the directories travel with it; otherwise the stored copy.
        return f"harbor/{t.dirname}" if with_harbor else str(ws.abs(e.path))

    rows: dict[str, dict[str, list[dict[str, Any]]]] = {"verl": {}, "skyrl": {}}
    for e, t in pairs:
        hist = history.get(e.version_id, [])
        rows["verl"].setdefault(t.split, []).append(verl_row(e, t, params, task_path(e, t), hist))
        rows["skyrl"].setdefault(t.split, []).append(skyrl_row(e, t, params, task_path(e, t), hist))
    for fmt, schema in (("verl", VERL_SCHEMA), ("skyrl", SKYRL_SCHEMA)):
        for sp in SPLITS:
            split_rows = rows[fmt].get(sp, [])
            if fmt in params.formats and (split_rows or sp == "train"):
                files[f"{fmt}/{sp}.parquet"] = _parquet_bytes(split_rows, schema)
            if "jsonl" in params.formats and (split_rows or sp == "train"):
                files[f"jsonl/{fmt}_{sp}.jsonl"] = _jsonl_bytes(split_rows)
    counts = [
        {
            "task": e.task,
            "version_hash": e.version_hash,
            "model": params.model,
            "attempts": e.n,
            "solved": e.c,
            "infra_errors": e.infra_errors,
        }
        for e, _ in sorted(pairs, key=lambda p: p[0].task)
    ]
    files["pass_counts.parquet"] = _parquet_bytes(counts, PASS_COUNTS_SCHEMA)
    files["pass_counts.csv"] = _csv_bytes(counts, PASS_COUNTS_SCHEMA.names)
    if "traces" in params.formats:
        from .traces import TRACE_SCHEMA, trace_rows

        with session(ws.engine) as s:
            sources = queries.trace_sources(s, params.model)
        if params.trace_schema == "harbor":
            from .harbor_traces import HARBOR_TRACE_SCHEMA, harbor_rows
            from .traces import DEFAULT_PROMPT_VERSION

            trows = harbor_rows(
                ws.root, sources, params.trace_filter, set(decontaminated), DEFAULT_PROMPT_VERSION
            )
            schema = HARBOR_TRACE_SCHEMA
        else:
            trows = trace_rows(
                sources, params.trace_filter, {e.task for e in chosen}, excluded_tasks=set(decontaminated)
            )
            schema = TRACE_SCHEMA
        files["traces/traces.jsonl"] = _jsonl_bytes(trows)
        files["traces/traces.parquet"] = _parquet_bytes(trows, schema)
        result.traces = len(trows)

    partial = out.parent / f".{out.name}.partial-{os.getpid()}"
    try:
        if partial.exists():
            shutil.rmtree(partial)
        partial.mkdir(parents=True)
    except OSError as exc:  # the scratch folder is ours: the curator named --out, so the error does too
        raise ExportError(f"--out {out}: cannot write there: {exc.strerror or exc}") from None
    try:
        for e, t in pairs:
            if not with_harbor:
                break
            src = ws.abs(e.path)
            if not src.is_dir():
                raise ExportError(f"{e.task}: stored version {e.path} is missing from the workspace")
            dest = partial / "harbor" / t.dirname
            _copy_task(src, dest)
            got = version_hash(dest)
            if got != e.version_hash:
                raise ExportError(
                    f"{e.task}: files under {e.path} no longer match version {e.version_hash[:12]} "
                    f"(now {got[:12]}); re-import the task"
                )
            toml = dest / "task.toml"
            if t.adopted_artifacts and toml.is_file():  # it declares what its verifier was shown to read
                toml.write_text(declare(toml.read_text(), t.adopted_artifacts))
            for p in task_files(dest):
                rel = p.relative_to(partial).as_posix()
                files[rel] = os.readlink(p).encode() if p.is_symlink() and not p.exists() else p.read_bytes()
        for rel, data in files.items():
            if rel.startswith("harbor/"):
                continue
            target = partial / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_bytes(data)
        secrets = _secret_values(ws)
        for rel in sorted(files):
            for var, value in secrets.items():
                if value.encode() in files[rel]:
                    raise ExportError(
                        f"{rel}: contains the value of ${var}; export refused "
                        "(remove the secret from the task or unset the variable)"
                    )
        result.files = {rel: _sha256(files[rel]) for rel in sorted(files)}
        manifest = {
            "bandpass_export": 1,
            "decontaminated": decontaminated,
            "files": result.files,
            "params": params.as_dict(),
            "pyarrow": pa.__version__,
            "tasks": [t.as_dict() for t in result.tasks],
        }
        manifest_bytes = (json.dumps(manifest, sort_keys=True, indent=2) + "\n").encode()
        (partial / MANIFEST).write_bytes(manifest_bytes)
        result.manifest_sha256 = _sha256(manifest_bytes)
        if out.exists():
            shutil.rmtree(out)
        os.replace(partial, out)
    except OSError as exc:  # a full disk, a folder made read-only meanwhile: said of --out, not of scratch
        shutil.rmtree(partial, ignore_errors=True)
        raise ExportError(f"--out {out}: writing the export failed: {exc.strerror or exc}") from None
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise

    with session(ws.engine) as s:
        rec = queries.record_export(
            s,
            model=params.model,
            params=params.as_dict(),
            out_dir=str(out),
            task_count=len(result.tasks),
            manifest_sha256=result.manifest_sha256,
        )
        result.export_id = rec.id
    return result
