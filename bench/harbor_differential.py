"""Differential execution against the real Harbor 0.25: the oracle and the nop agent of each task, run by
Harbor (``harbor trials start``, real Docker through Compose v2) and by Bandpass (``bandpass episode``,
real Docker), rewards compared task by task.

    .venv/bin/python bench/harbor_differential.py TASK_DIR... [--agents oracle,nop] [--json OUT] [--md OUT]

A TASK_DIR is a Harbor task (``task.toml``) or a Terminal-Bench 1 task (``task.yaml``): for a TB1 task
Harbor runs what its own ``harbor task migrate`` mapper writes, Bandpass what its converter writes, so
the two conversions are compared too. Needs ``.venv-harbor`` (scripts/setup-harbor.sh) and ``docker
compose`` (scripts/ensure-compose.sh).

What is the same on both sides, and how (the table in bench/BENCHMARKS.md says so per task):

- **Images.** No registry is reachable here. Bandpass maps a ``FROM`` it cannot pull to a local image
  (``DEFAULT_IMAGE_ALIASES``); Harbor runs a *prepared copy* of the task whose Dockerfile has the same
  ``FROM`` lines rewritten by the same map. Both build with the host's network (Bandpass's rule, so ``RUN
  apt-get``/``pip install`` reach the Debian mirror and PyPI this machine reaches); for Harbor that is a
  Compose overlay passed as trial configuration (``environment.extra_docker_compose``:
  ``build.network: host``), never a change to Harbor's code.
- **Network at run time.** The engine runs with ``--bridge=none --iptables=false``: a Compose project
  network has no route out, so Harbor's ``public`` is given as Bandpass gives it, the host's network (the
  same overlay: ``network_mode: host``). Harbor's docker environment cannot enforce ``no-network`` here
  (its egress sidecar needs an image this machine cannot pull), so a ``no-network`` task runs in Harbor
  from a copy saying ``public`` with the overlay ``network_mode: none`` — Harbor's own meaning of it.
- **CPUs.** A task asking for more CPUs than the machine has is refused by Docker in Harbor ("Range of
  CPUs is from 0.01 to N"); the trial configuration's ``override_cpus`` caps it at the machine's count,
  as Bandpass does.

Each task takes the shared Docker lock (``/tmp/bandpass-docker.lock``) for its own runs only, so other
Docker jobs interleave between tasks; images the run built are removed when a task is done (images that
existed before are kept).
"""

from __future__ import annotations

import argparse
import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

import tomli_w  # noqa: E402 - imported after the sys.path set-up above

from bandpass.engine.tasks.images import DEFAULT_IMAGE_ALIASES, rewrite_from  # noqa: E402
from bandpass.engine.tasks.taskdir import is_tb1_dir, load_task  # noqa: E402

HARBOR = REPO / ".venv-harbor" / "bin" / "harbor"
HARBOR_PY = REPO / ".venv-harbor" / "bin" / "python"
BANDPASS = REPO / ".venv" / "bin" / "bandpass"
LOCK = "/tmp/bandpass-docker.lock"
#: One trial or episode at most this long (build included); a task that takes longer is reported so.
RUN_TIMEOUT_S = 1200

_MIGRATE = """
import sys
from pathlib import Path
from harbor.mappers.terminal_bench import TerminalBenchMapper
TerminalBenchMapper()._map_task(Path(sys.argv[1]), Path(sys.argv[2]))
"""


@dataclass
class Side:
    """One system's verdict for one agent: a reward, or why there is none."""

    reward: float | None = None
    outcome: str = ""  # Bandpass's outcome; Harbor's exception type (or "ok")
    detail: str = ""
    seconds: float = 0.0


@dataclass
class Row:
    task: str
    source: str
    kind: str  # harbor | tb1
    preparation: list[str] = field(default_factory=list)
    harbor: dict[str, Side] = field(default_factory=dict)
    bandpass: dict[str, Side] = field(default_factory=dict)
    error: str = ""

    def equal(self) -> bool | None:
        """True when every agent's rewards agree (None when one side has no reward for some agent)."""
        pairs = [(self.harbor.get(a), self.bandpass.get(a)) for a in self.harbor]
        if not pairs or any(h is None or b is None for h, b in pairs):
            return None
        return all(h.reward == b.reward for h, b in pairs if h is not None and b is not None)


@contextlib.contextmanager
def docker_lock() -> Iterator[None]:
    """The shared Docker lock (what ``flock /tmp/bandpass-docker.lock`` takes), held for one task's four
    runs: one wait per task instead of four, and still a few minutes at most."""
    with open(LOCK, "a") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def _run(cmd: list[str], *, cwd: Path | None = None, timeout: float = RUN_TIMEOUT_S) -> tuple[int, str]:
    """Runs ``cmd`` (the caller holds the Docker lock); (exit status, output)."""
    try:
        res = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired as exc:
        out = exc.stdout.decode() if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return 124, out + f"\n[timed out after {timeout:.0f} s]"
    return res.returncode, res.stdout + res.stderr


def _images() -> set[str]:
    out = subprocess.run(
        ["docker", "images", "-q", "--no-trunc"], capture_output=True, text=True, check=True
    ).stdout
    return set(out.split())


def _remove_new_images(before: set[str]) -> None:
    new = sorted(_images() - before)
    if new:
        subprocess.run(["docker", "rmi", "-f", *new], capture_output=True, check=False)


# ------------------------------------------------------------------------------------------ Harbor side


def _harbor_task(src: Path, work: Path, row: Row) -> Path:
    """The folder Harbor runs: its own migration of a TB1 task, or a copy of a Harbor task; then the FROM
    rewrite and the network setting described in the module docstring."""
    dst = work / "harbor-task" / src.name
    if row.kind == "tb1":
        proc = subprocess.run(
            [str(HARBOR_PY), "-c", _MIGRATE, str(src), str(dst)], capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise RuntimeError("harbor task migrate: " + (proc.stderr.strip().splitlines() or ["failed"])[-1])
        row.preparation.append("Harbor runs its own `harbor task migrate` output")
    else:
        shutil.copytree(src, dst, symlinks=True)
    for dockerfile in sorted(dst.glob("environment/**/Dockerfile")):
        text, used = rewrite_from(dockerfile.read_text(), DEFAULT_IMAGE_ALIASES)
        if used:
            dockerfile.write_text(text)
            row.preparation.append(
                "FROM " + ", ".join(f"{a} -> {b}" for a, b in used) + " (Harbor: prepared copy)"
            )
    return dst


def _harbor_overlay(task_dir: Path, work: Path, row: Row) -> Path:
    """The trial configuration: build on the host's network, run on the network the task asks for."""
    toml_path = task_dir / "task.toml"
    doc = tomllib.loads(toml_path.read_text())
    env = doc.setdefault("environment", {})
    mode = env.get("network_mode") or ("no-network" if env.get("allow_internet") is False else "public")
    if mode == "no-network":
        env["network_mode"] = "public"
        env.pop("allow_internet", None)
        toml_path.write_text(tomli_w.dumps(doc))
        row.preparation.append("no-network: Harbor copy says public + overlay network_mode none")
    main: dict[str, Any] = {"build": {"network": "host"}}
    main["network_mode"] = "none" if mode == "no-network" else "host"
    overlay = work / "harbor-overlay.json"
    overlay.write_text(json.dumps({"services": {"main": main}}))
    cfg: dict[str, Any] = {
        "task": {"path": str(task_dir)},
        "environment": {"extra_docker_compose": [str(overlay)], "delete": False},
    }
    cpus = env.get("cpus")
    ncpu = os.cpu_count() or 1
    if isinstance(cpus, int | float) and cpus > ncpu:
        cfg["environment"]["override_cpus"] = ncpu
        row.preparation.append(f"cpus {cpus:g} > {ncpu}: Harbor override_cpus {ncpu}")
    path = work / "harbor-trial.json"
    path.write_text(json.dumps(cfg))
    return path


def _harbor_trial(task_dir: Path, config: Path, agent: str, work: Path) -> Side:
    trials = work / f"trials-{agent}"
    started = time.monotonic()
    code, out = _run(
        [
            str(HARBOR),
            "trials",
            "start",
            "-a",
            agent,
            "--trials-dir",
            str(trials),
            "-c",
            str(config),
        ],
        cwd=work,
    )
    side = Side(seconds=round(time.monotonic() - started, 1))
    results = sorted(trials.glob("*/result.json"))
    if not results:
        side.outcome, side.detail = (
            "no_result",
            out.strip().splitlines()[-1:][0] if out.strip() else f"exit {code}",
        )
        return side
    res = json.loads(results[-1].read_text())
    rewards = (res.get("verifier_result") or {}).get("rewards") or {}
    exc = res.get("exception_info") or {}
    side.outcome = exc.get("exception_type") or "ok"
    side.detail = (exc.get("exception_message") or "").strip().splitlines()[0][:200] if exc else ""
    if "reward" in rewards:
        side.reward = float(rewards["reward"])
    elif rewards:
        side.detail = f"rewards {json.dumps(rewards, sort_keys=True)}"
    return side


def _harbor_down(work: Path) -> None:
    """Removes whatever the Compose projects of this task's trials left (Harbor's ``down`` normally took
    them; ``delete: false`` only keeps the image, so the nop trial reuses the oracle's build). Harbor names
    a trial's project ``<trial name>__env``, lower-cased."""
    for trial in work.glob("trials-*/*/"):
        project = f"{trial.name.lower()}__env"
        ids = subprocess.run(
            ["docker", "ps", "-aq", "--filter", f"label=com.docker.compose.project={project}"],
            capture_output=True,
            text=True,
            check=False,
        ).stdout.split()
        if ids:
            subprocess.run(["docker", "rm", "-f", *ids], capture_output=True, check=False)
        subprocess.run(["docker", "network", "rm", f"{project}_default"], capture_output=True, check=False)


# ---------------------------------------------------------------------------------------- Bandpass side


def _bandpass(src: Path, work: Path, agents: list[str], row: Row) -> None:
    ws = work / "ws"
    res = subprocess.run(
        [str(BANDPASS), "-w", str(ws), "import", "--json", str(src)],
        capture_output=True,
        text=True,
        check=False,
    )
    try:
        (item,) = json.loads(res.stdout)
    except (ValueError, TypeError):
        row.error = "bandpass import: " + (res.stderr or res.stdout).strip()[-300:]
        return
    if item["status"] not in ("new", "new_version", "unchanged"):
        row.error = "bandpass import: " + "; ".join(item.get("problems") or [item["status"]])
        return
    for agent in agents:
        started = time.monotonic()
        code, out = _run([str(BANDPASS), "-w", str(ws), "episode", item["name"], "--agent", agent, "--json"])
        side = Side(seconds=round(time.monotonic() - started, 1))
        try:
            ep = json.loads(out[out.index("{") :].strip().splitlines()[0] if "{" in out else "")
        except ValueError:
            side.outcome, side.detail = (
                "no_result",
                out.strip().splitlines()[-1:][0] if out.strip() else str(code),
            )
            row.bandpass[agent] = side
            continue
        side.outcome = ep.get("outcome", "")
        side.reward = ep.get("reward")
        side.detail = (ep.get("detail") or "")[:200]
        row.bandpass[agent] = side


# ------------------------------------------------------------------------------------------------ main


class _Skipped(Exception):
    """This side was not asked for (``--sides``)."""


def run_task(src: Path, agents: list[str], sides: tuple[str, ...] = ("harbor", "bandpass")) -> Row:
    kind = "tb1" if is_tb1_dir(src) else "harbor"
    row = Row(task=src.name, source=str(src), kind=kind)
    with docker_lock():
        return _run_task_locked(src, agents, row, sides)


def _run_task_locked(src: Path, agents: list[str], row: Row, sides: tuple[str, ...]) -> Row:
    before = _images()
    with tempfile.TemporaryDirectory(prefix="bandpass-hdiff-") as tmp:
        work = Path(tmp)
        try:
            if "harbor" not in sides:
                raise _Skipped
            task_dir = _harbor_task(src, work, row)
            config = _harbor_overlay(task_dir, work, row)
            for agent in agents:
                row.harbor[agent] = _harbor_trial(task_dir, config, agent, work)
        except _Skipped:
            pass
        except Exception as exc:  # noqa: BLE001 - one task's failure is its row, never the run's end
            row.error = f"harbor side: {type(exc).__name__}: {exc}"
        finally:
            _harbor_down(work)
        if "bandpass" in sides:
            _bandpass(src, work, agents, row)
    _remove_new_images(before)
    return row


def markdown(rows: list[Row], agents: list[str]) -> str:
    head = "| task | " + " | ".join(f"{a}: Harbor | {a}: Bandpass" for a in agents) + " | equal | prepared |"
    lines = [head, "|" + "---|" * (2 + 2 * len(agents) + 1)]
    for r in rows:
        cells = []
        for a in agents:
            for side in (r.harbor.get(a), r.bandpass.get(a)):
                if side is None:
                    cells.append("—")
                elif side.reward is None:
                    cells.append(f"none ({side.outcome})")
                else:
                    cells.append(
                        f"{side.reward:g}"
                        + ("" if side.outcome in ("ok", "passed", "failed") else f" ({side.outcome})")
                    )
        eq = r.equal()
        lines.append(
            f"| {r.task} | "
            + " | ".join(cells)
            + f" | {'yes' if eq else 'no' if eq is False else '—'} | "
            + ("; ".join(r.preparation) or "—")
            + (f" ({r.error})" if r.error else "")
            + " |"
        )
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tasks", nargs="+", type=Path)
    ap.add_argument("--agents", default="oracle,nop")
    ap.add_argument(
        "--sides",
        default="harbor,bandpass",
        help="which systems run (bandpass alone: an older Bandpass via PYTHONPATH, for a before/after)",
    )
    ap.add_argument("--json", type=Path, help="append one JSON line per task here")
    ap.add_argument("--md", type=Path, help="write the table here")
    args = ap.parse_args()
    agents = [a for a in args.agents.split(",") if a]
    for tool in (HARBOR, BANDPASS):
        if not tool.exists():
            print(f"{tool} is missing (scripts/setup-harbor.sh, scripts/setup.sh)", file=sys.stderr)
            return 1
    rows: list[Row] = []
    for src in args.tasks:
        src = src.resolve()
        if not is_tb1_dir(src):
            try:
                load_task(src)
            except Exception as exc:  # noqa: BLE001 - reported in the row
                rows.append(Row(task=src.name, source=str(src), kind="harbor", error=str(exc)[:300]))
                continue
        row = run_task(src, agents, tuple(args.sides.split(",")))
        rows.append(row)
        line = {**asdict(row), "equal": row.equal()}
        print(json.dumps(line), flush=True)
        if args.json:
            with args.json.open("a") as fh:
                fh.write(json.dumps(line) + "\n")
    table = markdown(rows, agents)
    if args.md:
        args.md.write_text(table)
    print(table)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
