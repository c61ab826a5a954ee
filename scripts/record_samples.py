"""Regenerates ``recordings/samples/``: real episodes, one per way an episode can end, for the demo.

Run (needs Docker and the offline base image; not run in CI, the output is committed):

    .venv/bin/python scripts/record_samples.py [--out recordings/samples] [--only SLUG ...]

Every episode is real: the example tasks built and run in Docker, policies answering over real HTTP from
the scripted OpenAI-compatible test server (``tests/servers/openai_server.py``) under the served name
``script:*`` while the episodes are attributed to one model, ``demo-policy``, as a curator's rollouts of
one model would be. The script checks each episode ended in the outcome it was meant to show and exits
non-zero otherwise, so a harness change that alters an outcome is noticed when the samples are redone.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from engine.audit.samples import export_sample  # noqa: E402
from engine.core.config import PolicyModelConfig  # noqa: E402
from engine.core.events import EventBus, StepStarted  # noqa: E402
from engine.core.workspace import Workspace  # noqa: E402
from engine.run.agents.base import Agent  # noqa: E402
from engine.run.agents.builtin import BUILTIN  # noqa: E402
from engine.run.agents.policy import PolicyAgent  # noqa: E402
from engine.run.episode import run_episode  # noqa: E402
from engine.run.policy.client import PolicyClient  # noqa: E402
from engine.sandbox import pool as sandbox_pool  # noqa: E402
from engine.sandbox.docker_engine import get_client  # noqa: E402
from engine.tasks.importer import import_paths  # noqa: E402
from store import queries  # noqa: E402
from store.db import session  # noqa: E402
from tests.servers.openai_server import GARBAGE, OpenAIServer, _action, running_server  # noqa: E402

MODEL = "demo-policy"
TASK = "access-log-report"  # sound: working oracle, nop fails, resists the cheats

SOLVE_LINES = (REPO / "examples/tasks" / TASK / "solution/solve.sh").read_text().splitlines()[1:]
SCRIPTS: dict[str, list[Any]] = {
    "script:demo-solve": [
        _action([("head -3 access.log\n", 2.0)], analysis="look at the log first", plan="inspect"),
        _action(
            [(line + "\n", 5.0) for line in SOLVE_LINES] + [("head -5 report.csv\n", 2.0)],
            analysis="combined log format; request is the quoted field",
            plan="aggregate 2xx requests per path with awk, then write the header and the rows",
            task_complete=True,
        ),
        _action([], analysis="report.csv has the header and sorted rows", plan="done", task_complete=True),
    ],
    "script:demo-wrong": [
        _action(
            [
                ("awk '{print $7}' access.log | sort | uniq -c | sort -rn | head\n", 2.0),
                (
                    "{ echo path,requests,bytes; awk '{c[$7]++; b[$7]+=$10} END {for (p in c) "
                    'print p "," c[p] "," b[p]}\' access.log | sort -t, -k2,2nr; } > report.csv\n',
                    2.0,
                ),
            ],
            analysis="field 7 is the path",
            plan="count every request per path",  # wrong: keeps query strings and non-2xx statuses
            task_complete=True,
        ),
        _action([], analysis="done", plan="done", task_complete=True),
    ],
    "script:demo-garbage": [GARBAGE, "Sure! First I will look at the log.", GARBAGE],
    "script:demo-loop": [
        _action([("ls -la\n", 1.0)], analysis="looking around", plan="list the files"),
        _action([("wc -l access.log\n", 1.0)], analysis="still looking", plan="count lines"),
    ],
    "script:demo-flood": [
        _action([("seq 1 400 | sed 's/^/line /'\n", 2.0)], analysis="print a lot", plan="flood"),
        _action([("seq 401 800 | sed 's/^/line /'\n", 2.0)], analysis="more", plan="flood again"),
        _action([("cat -n access.log access.log\n", 2.0)], analysis="read it twice", plan="read"),
    ],
    "script:demo-sleep-killed": [
        _action([("sleep 30\n", 20.0)], analysis="wait for something", plan="sleep"),
    ],
}


@dataclass
class Sample:
    slug: str
    expect: str  # outcome, or an "infra_error:" prefix
    note: str
    agent: str  # built-in agent name, or a served script name for demo-policy
    task: str = TASK
    max_steps: int = 6
    context_window: int = 32768
    observation_bytes: int = 16_000
    kill_after_s: float | None = None


SAMPLES = [
    Sample(
        "policy-pass",
        "passed",
        "The policy inspects the log, aggregates it with awk and confirms.",
        "script:demo-solve",
    ),
    Sample(
        "policy-fail",
        "failed",
        "A plain failure: the policy counts every request per raw path (query strings, 4xx/5xx included).",
        "script:demo-wrong",
    ),
    Sample(
        "policy-parse-error",
        "agent_error:parse_error",
        "A parse-error spiral: prose instead of the JSON action, three times in a row.",
        "script:demo-garbage",
    ),
    Sample(
        "policy-turn-limit",
        "agent_error:turn_limit",
        "The policy keeps looking around and never declares the task complete within 4 steps.",
        "script:demo-loop",
        max_steps=4,
    ),
    Sample(
        "policy-context-truncated",
        "agent_error:context_overflow",
        "A small context window: earlier turns are cut to fit, then one observation alone no longer fits.",
        "script:demo-flood",
        context_window=3000,
        observation_bytes=7000,
    ),
    Sample(
        "infra-container-died",
        "infra_error:container_died",
        "The container is killed from outside mid-episode: infrastructure, never a policy failure.",
        "script:demo-sleep-killed",
        kill_after_s=2.0,
    ),
    Sample("oracle-pass", "passed", "The oracle types solution/solve.sh: the task is solvable.", "oracle"),
    Sample("nop-fail", "failed", "Doing nothing fails: the task is not solved at start.", "nop"),
    Sample(
        "cheat-write-reward-caught",
        "failed",
        "cheat:write_reward writes /logs/verifier/reward.txt; the verifier recreates it: reward 0.",
        "cheat:write_reward",
    ),
    Sample(
        "oracle-fails-flawed-task",
        "failed",
        "Benchmark invalidity: the task's own solution counts runs of duplicates (uniq without sort).",
        "oracle",
        task="count-unique-ips",
    ),
    Sample(
        "cheat-touch-outputs-passes",
        "passed",
        "Reward misalignment: a state-only verifier rewards a junk /app/summary.json.",
        "cheat:touch_outputs",
        task="summarize-measurements",
    ),
]


def _factory(sample: Sample, server: OpenAIServer) -> Callable[[], Agent]:
    if sample.agent in BUILTIN:
        return BUILTIN[sample.agent]  # type: ignore[return-value]
    cfg = PolicyModelConfig(
        name=MODEL,
        served_name=sample.agent,
        base_url=server.base_url,
        max_tokens=512,
        context_window=sample.context_window,
    )
    client = PolicyClient(cfg, timeout=60, backoff_base=0.05)
    return lambda: PolicyAgent(client, max_steps=sample.max_steps, observation_bytes=sample.observation_bytes)  # type: ignore[return-value]


def _killer(bus: EventBus, episode_id: int, after_s: float) -> None:
    """Kills the episode's container ``after_s`` after its first step starts (an outside failure)."""
    fired = threading.Event()

    def kill() -> None:
        client = get_client()
        for c in client.containers.list(filters={"label": ["bandpass=1"]}):
            if sandbox_pool.episode_of(c.name, c.labels) == str(episode_id):  # label, or pooled name
                c.kill()

    def on_step(ev: Any) -> None:
        if ev.episode_id == episode_id and not fired.is_set():
            fired.set()
            threading.Timer(after_s, kill).start()

    bus.subscribe(StepStarted, on_step)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", type=Path, default=REPO / "recordings" / "samples")
    ap.add_argument("--only", nargs="*", default=None, help="Slugs to redo (default: all).")
    args = ap.parse_args()
    chosen = [s for s in SAMPLES if not args.only or s.slug in args.only]
    bad = 0
    with tempfile.TemporaryDirectory(prefix="bandpass-samples-") as tmp, running_server() as server:
        for model, items in SCRIPTS.items():
            server.script(model, items)
        ws = Workspace.open(Path(tmp) / "ws")
        assert import_paths(ws, [REPO / "examples" / "tasks"]).ok
        with session(ws.engine) as s:
            versions = {r.name: r.version_id for r in queries.task_rows(s)}
        if not args.only and args.out.exists():
            shutil.rmtree(args.out)
        for sample in chosen:
            bus = EventBus()
            agent_name = sample.agent if sample.agent in BUILTIN else MODEL
            with session(ws.engine) as s:
                eid = queries.create_episode(s, versions[sample.task], agent_name).id
            assert eid is not None
            if sample.kill_after_s is not None:
                _killer(bus, eid, sample.kill_after_s)
            res = run_episode(
                ws,
                versions[sample.task],
                _factory(sample, server),
                bus=bus,
                episode_id=eid,
                max_infra_retries=0,
            )
            ok = res.outcome == sample.expect
            bad += not ok
            dest = export_sample(ws, eid, args.out / sample.slug, note=sample.note)
            size = sum(p.stat().st_size for p in dest.iterdir())
            with session(ws.engine) as s:
                cuts = [json.loads(st.cuts_json) for st in queries.steps(s, eid)]
            print(
                f"{'ok ' if ok else 'BAD'} {sample.slug:<28} {res.outcome:<30} reward={res.reward} "
                f"steps={res.steps} cuts={sum(len(c) for c in cuts)} {size / 1024:.0f} KiB",
                flush=True,
            )
            if not ok:
                print(f"    expected {sample.expect}: {res.detail[:300]}", flush=True)
    total = sum(p.stat().st_size for p in args.out.rglob("*") if p.is_file())
    print(f"{len(chosen)} sample(s) in {args.out} ({total / 1024:.0f} KiB in all)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
