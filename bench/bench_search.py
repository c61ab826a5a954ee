"""Search at scale: how fast the index is built from recordings, and how fast queries answer, at 10,000
and 100,000 synthetic episodes.

Run: .venv/bin/python bench/bench_search.py [--sizes 10000 100000] [--from-casts 10000] [--probe 1000]
     [--repeat 5] [--seed 7]

Fills a fresh workspace with synthetic finished episodes on 40 tasks and 4 agents. Each has an agent
recording of 6-12 steps (a marker, the keys typed, the echo and the output, OSC 133 prompts as the
harness writes them: file listings, pytest runs, tracebacks, logs with addresses and ids, a stuck
``>>>`` REPL now and then, and one step in six printing 80-400 lines in 4 KiB writes, most of which
scroll away) and a verifier recording of 3-30 lines. Then:

* **first-use build**: the first ``--from-casts`` episodes are written as asciicast files and indexed by
  ``build_index`` (read, replay through the terminal core, index) — episodes/s, against a baseline in
  the same process: the same casts only read and replayed through the emulator (``apply_events``), the
  floor any screen-based index pays;
* up to each ``--sizes`` point, the remaining episodes' documents are written straight from the
  generator's lines (the same SQL path: ``store.queries.search.replace_episode``), so 100,000 episodes do not
  need 100,000 replays here; at each size ``--probe`` more cast-backed episodes are then indexed by
  ``build_index`` (incremental build, as batches do) — episodes/s with the index at that size;
* **queries**: a mix a curator types (a unique id, phrases, prefixes, booleans, ``>>>``, a word in
  nearly every episode, filters by task / outcome / terminal), each ``--repeat`` times through
  ``engine.review.search.search`` (count, rank, read the hits, find the lines): p50, p95, max in ms, and
  per query; baseline: the same phrase by ``LIKE`` over the stored text (no FTS).

Goals (issue 33): p95 query < 100 ms at 100,000 episodes; the build faster than rollouts produce
episodes (bench_rollouts.py: 56-142 episodes/min on this machine, 1-2.4 episodes/s).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from bandpass.engine.core.workspace import Workspace
from bandpass.engine.review.replay import apply_events
from bandpass.engine.review.search import Filters, search
from bandpass.engine.review.search_index import build_index, encode_lines, facets_of
from bandpass.engine.review.search_query import index_text
from bandpass.engine.review.transcript import SCREEN, TRANSCRIPT_VERSION, TYPED, Line
from bandpass.engine.sandbox.asciicast import read_cast
from bandpass.engine.sandbox.emulator import Screen
from bandpass.store import queries
from bandpass.store.db import session
from bandpass.store.queries import search as sq

COLS, ROWS = 160, 40
AGENTS = ("qwen3-8b-step10", "qwen3-8b-step40", "oracle", "nop")
OUTCOMES = (
    "passed",
    "failed",
    "failed",
    "agent_error:turn_limit",
    "agent_error:parse_error",
    "infra_error:oom",
)
MODULES = ("requests", "numpy", "yaml", "pandas", "flask", "kvstore", "wordfreq", "catalog", "httpx", "toml")
WORDS = [
    "config",
    "server",
    "client",
    "cache",
    "index",
    "token",
    "parser",
    "worker",
    "report",
    "table",
    "schema",
    "record",
    "entry",
    "buffer",
    "socket",
    "thread",
    "queue",
    "handler",
    "request",
    "response",
    "session",
    "module",
    "package",
    "import",
    "export",
    "build",
    "deploy",
]
PROMPT = "\x1b]133;D;0\x07\x1b[?2004h\x1b]133;A\x07root@box:/app# "


@dataclass
class Step:
    keys: str
    out: list[str]


@dataclass
class Synthetic:
    """One episode as the generator knows it: what was typed and printed, per step."""

    task: str
    agent: str
    outcome: str
    steps: list[Step]
    verifier: list[str]
    uid: str = ""
    extra: dict[str, str] = field(default_factory=dict)


def _ip(r: random.Random) -> str:
    return f"{r.choice((10, 172, 192))}.{r.randint(0, 255)}.{r.randint(0, 255)}.{r.randint(1, 254)}"


def _word(r: random.Random) -> str:
    # a long-tailed vocabulary, as identifiers in real output are
    return f"{r.choice(WORDS)}_{int(r.paretovariate(1.2)) % 4000}"


def _output(r: random.Random, kind: str) -> tuple[str, list[str]]:
    if kind == "ls":
        return "ls -la /app", [
            f"-rw-r--r-- 1 root root {r.randint(10, 99999):>6} Mar 12 10:{r.randint(0, 59):02d} {_word(r)}.py"
            for _ in range(r.randint(3, 14))
        ]
    if kind == "pytest":
        failed = r.randint(0, 3)
        tests = [
            f"FAILED tests/test_{_word(r)}.py::test_{_word(r)} - AssertionError: expected {r.randint(0, 99)}"
            for _ in range(failed)
        ]
        return "python3 -m pytest -q", [
            "." * r.randint(3, 30) + "F" * failed,
            *tests,
            f"{failed} failed, {r.randint(1, 40)} passed in 0.{r.randint(10, 99)}s",
        ]
    if kind == "traceback":
        mod = r.choice(MODULES)
        return f"python3 /app/{_word(r)}.py", [
            "Traceback (most recent call last):",
            f'  File "/app/{_word(r)}.py", line {r.randint(1, 300)}, in <module>',
            f"    import {mod}",
            f"ModuleNotFoundError: No module named '{mod}'",
        ]
    if kind == "notfound":
        cmd = r.choice(("kvctl", "jq", "rg", "fd", "yq", "http"))
        return f"{cmd} --version", [f"bash: {cmd}: command not found"]
    if kind == "log":
        return "tail -n 20 /var/log/app.log", [
            f'{_ip(r)} - - [12/Mar/2024:10:{r.randint(0, 59):02d}:00 +0000] "GET /api/{_word(r)} HTTP/1.1"'
            f" {r.choice((200, 200, 404, 500))} {r.randint(100, 9999)}"
            for _ in range(r.randint(5, 20))
        ]
    if kind == "repl":
        return "python3", [">>> ls /app", "NameError: name 'ls' is not defined", ">>>"]
    if kind == "flood":
        n = r.randint(80, 400)
        return f"cat /app/data/{_word(r)}.csv", [f"{i},{_word(r)},{r.randint(0, 10**6)}" for i in range(n)]
    return f"cat /app/{_word(r)}.txt", [f"{_word(r)} {_word(r)} {_word(r)}" for _ in range(r.randint(1, 6))]


KINDS = ("ls", "pytest", "traceback", "notfound", "log", "repl", "flood", "text", "text", "ls")


def synthesize(r: random.Random, n: int, tasks: list[str]) -> Synthetic:
    steps = []
    for _ in range(r.randint(6, 12)):
        kind = r.choice(KINDS)
        if kind == "flood" and r.random() < 0.5:
            kind = "text"  # about one step in six floods the screen
        cmd, out = _output(r, kind)
        steps.append(Step(cmd, out))
    uid = f"trace{n:06d}x{r.getrandbits(32):08x}"
    steps[r.randrange(len(steps))].out.append(f"request id {uid}")
    outcome = r.choice(OUTCOMES)
    verifier = [
        "# /bin/bash /tests/test.sh",
        *(
            f"FAIL: {_word(r)}.txt N={r.randint(1, 50)}: exit {r.randint(0, 2)}"
            for _ in range(r.randint(1, 20))
        ),
        "reward: " + ("1" if outcome == "passed" else "0"),
    ]
    return Synthetic(r.choice(tasks), r.choice(AGENTS), outcome, steps, verifier, uid)


def agent_cast(ep: Synthetic) -> str:
    """The episode as the harness records it: asciicast v2, one marker per step, 4 KiB writes."""
    out = [json.dumps({"version": 2, "width": COLS, "height": ROWS, "env": {"TERM": "xterm-256color"}})]
    t = 0.05
    out.append(json.dumps([t, "o", PROMPT]))
    for n, st in enumerate(ep.steps):
        t += 0.5
        out.append(json.dumps([round(t, 6), "m", f"step {n}"]))
        t += 0.1
        out.append(json.dumps([round(t, 6), "i", st.keys + "\n"]))
        out.append(json.dumps([round(t + 0.001, 6), "o", st.keys + "\r\n\x1b[?2004l\r"]))
        body = "".join(line + "\r\n" for line in st.out)
        for k in range(0, len(body), 4096):
            t += 0.002
            out.append(json.dumps([round(t, 6), "o", body[k : k + 4096]]))
        out.append(json.dumps([round(t + 0.001, 6), "o", PROMPT]))
    return "\n".join(out) + "\n"


def verifier_cast(ep: Synthetic) -> str:
    out = [json.dumps({"version": 2, "width": COLS, "height": ROWS})]
    out.append(json.dumps([0.05, "o", "\x1b[?2004h# /bin/bash /tests/test.sh\r\n\x1b[?2004l\r"]))
    out.append(json.dumps([0.2, "o", "".join(line + "\r\n" for line in ep.verifier[1:])]))
    return "\n".join(out) + "\n"


def direct_docs(ep: Synthetic) -> list[sq.DocRow]:
    """The documents ``build_index`` would write, made from the generator's lines (no replay)."""
    lines: list[Line] = []
    t, frame = 0.05, 1
    for n, st in enumerate(ep.steps):
        t += 0.6
        lines.append(Line(st.keys, n, t, frame, TYPED))
        lines.append(Line("root@box:/app# " + st.keys, n, t, frame + 1, SCREEN))
        lines.extend(Line(o, n, t, frame + 2, SCREEN) for o in st.out)
        frame += 4
    ver = [Line(v, None, 0.2, 2, SCREEN) for v in ep.verifier]
    return [
        sq.DocRow(
            term,
            "\n".join(index_text(li.text) for li in ls),
            facets_of(ep.task, ep.agent, ep.outcome, term),
            encode_lines(ls),
        )
        for term, ls in ((sq.AGENT, lines), (sq.VERIFIER, ver))
    ]


class Corpus:
    def __init__(self, ws: Workspace, seed: int, n_tasks: int = 40) -> None:
        self.ws = ws
        self.r = random.Random(seed)
        self.tasks = [f"bench-task-{i:02d}" for i in range(n_tasks)]
        with session(ws.engine) as s:
            queries.bulk_insert(s, "task", [{"id": i + 1, "name": n} for i, n in enumerate(self.tasks)])
            queries.bulk_insert(
                s,
                "task_version",
                [
                    {"id": i + 1, "task_id": i + 1, "hash": f"{i:064x}", "path": f"tasks/{n}"}
                    for i, n in enumerate(self.tasks)
                ],
            )
        self.count = 0
        self.uids: list[str] = []

    def _rows(self, eps: list[Synthetic], first: int, casts: bool) -> list[dict]:
        rows = []
        for k, ep in enumerate(eps):
            eid = first + k
            row = {
                "id": eid,
                "task_version_id": self.tasks.index(ep.task) + 1,
                "agent": ep.agent,
                "batch_id": "bench",
                "status": "done",
                "outcome": ep.outcome,
                "reward": 1.0 if ep.outcome == "passed" else 0.0,
                "verifier_output": "\r\n".join(ep.verifier),
            }
            if casts:
                folder = self.ws.recordings_dir / f"episode-{eid}"
                folder.mkdir(parents=True, exist_ok=True)
                (folder / "agent.cast").write_text(agent_cast(ep))
                (folder / "verifier.cast").write_text(verifier_cast(ep))
                row["agent_cast"] = f"recordings/episode-{eid}/agent.cast"
                row["verifier_cast"] = f"recordings/episode-{eid}/verifier.cast"
            rows.append(row)
        return rows

    def add(self, n: int, *, casts: bool) -> list[int]:
        """``n`` more finished episodes; with ``casts`` as recordings for build_index, else indexed now
        straight from their lines."""
        ids: list[int] = []
        for start in range(0, n, 2000):
            eps = [synthesize(self.r, self.count + k, self.tasks) for k in range(min(2000, n - start))]
            first = self.count + 1
            with session(self.ws.engine) as s:
                queries.bulk_insert(s, "episode", self._rows(eps, first, casts))
                if not casts:
                    for k, ep in enumerate(eps):
                        sq.replace_episode(
                            s, first + k, direct_docs(ep), version=TRANSCRIPT_VERSION, lines=0, note="bench"
                        )
            self.uids.extend(ep.uid for ep in eps)
            ids.extend(range(first, first + len(eps)))
            self.count += len(eps)
        return ids


def replay_only(ws: Workspace, ids: list[int]) -> float:
    """Baseline: read the same casts and replay them through the emulator, nothing else."""
    t0 = time.perf_counter()
    for eid in ids:
        for name in ("agent.cast", "verifier.cast"):
            cast = read_cast(ws.recordings_dir / f"episode-{eid}" / name)
            screen = Screen(cast.cols, cast.rows)
            apply_events(screen, cast.events, 0, len(cast.events))
    return time.perf_counter() - t0


def timed_build(ws: Workspace, ids: list[int]) -> float:
    t0 = time.perf_counter()
    report = build_index(ws, episode_ids=ids)
    assert report.indexed == len(ids), report
    return time.perf_counter() - t0


@dataclass
class Query:
    label: str
    text: str
    filters: Filters = field(default_factory=Filters)


def query_mix(corpus: Corpus) -> list[Query]:
    uid = corpus.uids[len(corpus.uids) // 3]
    return [
        Query("unique id (1 episode)", uid),
        Query("phrase, ~1 in 8 steps", '"command not found"'),
        Query("phrase + boolean", '"No module named" AND (yaml OR toml)'),
        Query("prefix", "ModuleNotFound*"),
        Query("stuck REPL", '">>> ls /app"'),
        Query("word in most episodes", "root"),
        Query("word, NOT", "Traceback NOT numpy"),
        Query("two words", "expected AssertionError"),
        Query("filter: task", "Traceback", Filters(task=corpus.tasks[3])),
        Query("filter: outcome", "Traceback", Filters(outcome="agent_error")),
        Query("filter: verifier", '"exit 2"', Filters(terminal="verifier")),
        Query("filter: agent + prefix", "kvct*", Filters(agent=AGENTS[1])),
    ]


def measure_queries(ws: Workspace, mix: list[Query], repeat: int) -> tuple[list[float], list[str]]:
    all_ms: list[float] = []
    lines = []
    for q in mix:
        ms = []
        result = None
        for _ in range(repeat):
            t0 = time.perf_counter()
            result = search(ws, q.text, filters=q.filters, limit=20)
            ms.append((time.perf_counter() - t0) * 1000)
        assert result is not None
        all_ms.extend(ms)
        n = (">" if result.matched_more else "") + str(result.matched_docs)
        lines.append(
            f"  {q.label:<26} {q.text[:34]:<34} {n:>7} terminals  {result.ranked_by:<6}"
            f" median {statistics.median(ms):7.1f} ms  max {max(ms):7.1f} ms"
        )
    return all_ms, lines


def like_baseline(ws: Workspace, phrase: str) -> float:
    t0 = time.perf_counter()
    with session(ws.engine) as s:
        s.connection().exec_driver_sql(
            "SELECT count(*) FROM search_doc WHERE body LIKE ?", (f"%{phrase}%",)
        ).fetchall()
    return (time.perf_counter() - t0) * 1000


def timed_ms(fn: Callable[[], object]) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def pct(values: list[float], p: float) -> float:
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", type=int, nargs="+", default=[10_000, 100_000])
    ap.add_argument("--from-casts", type=int, default=10_000, help="episodes built from recordings first")
    ap.add_argument("--probe", type=int, default=1000, help="cast-backed episodes indexed at each size")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()
    say: Callable[[str], None] = lambda s: print(s, flush=True)  # noqa: E731 - a one-line helper
    say(f"load average at start: {os.getloadavg()[0]:.1f}")
    with tempfile.TemporaryDirectory(prefix="bandpass-bench-search-") as tmp:
        ws = Workspace.open(Path(tmp) / "ws")
        corpus = Corpus(ws, args.seed)
        first = min(args.from_casts, min(args.sizes))
        t0 = time.perf_counter()
        ids = corpus.add(first, casts=True)
        say(f"generated {first} episodes with recordings in {time.perf_counter() - t0:.1f} s")
        base = replay_only(ws, ids)
        built = timed_build(ws, ids)
        say(
            f"first-use build from recordings: {first} episodes in {built:.1f} s = {first / built:.0f}"
            f" episodes/s (read + replay only: {first / base:.0f} episodes/s; index costs {built / base:.2f}x"
            " the bare replay)"
        )
        for size in sorted(args.sizes):
            direct = size - corpus.count - args.probe
            if direct > 0:
                t0 = time.perf_counter()
                corpus.add(direct, casts=False)
                say(f"added {direct} episodes straight from their lines in {time.perf_counter() - t0:.1f} s")
            probe = corpus.add(max(0, size - corpus.count), casts=True) if size > corpus.count else []
            if probe:
                took = timed_build(ws, probe)
                say(
                    f"at {size}: {len(probe)} more episodes from recordings in {took:.1f} s ="
                    f" {len(probe) / took:.0f} episodes/s (incremental: the index held {size - len(probe)})"
                )
            with session(ws.engine) as s:
                st = sq.index_status(s, TRANSCRIPT_VERSION)
            db_mb = sum(p.stat().st_size for p in ws.root.glob("bandpass.db*")) / 1e6
            say(f"at {size}: index holds {st.indexed} episodes, {st.documents} terminals; db {db_mb:.0f} MB")
            ms, lines = measure_queries(ws, query_mix(corpus), args.repeat)
            say(
                f"at {size}: {len(ms)} queries: p50 {pct(ms, 50):.1f} ms, p95 {pct(ms, 95):.1f} ms,"
                f" max {max(ms):.1f} ms (goal at 100,000: p95 < 100 ms)"
            )
            for line in lines:
                say(line)
            fts = statistics.median(timed_ms(lambda: search(ws, '"command not found"')) for _ in range(3))
            like = statistics.median([like_baseline(ws, "command not found") for _ in range(3)])
            say(f"at {size}: baseline LIKE scan for one phrase {like:.0f} ms vs search {fts:.1f} ms")
        say(f"load average at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
