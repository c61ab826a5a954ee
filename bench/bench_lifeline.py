"""What the container lifeline costs and how fast it acts (engine/sandbox/lifeline.py, leftovers.py).

1. start + remove of a sandbox with its lifeline (pipe, two read-only bind mounts, the watchdog, its main
   pid learnt at start) against the same sandbox without one and against ``docker run --rm IMAGE true``,
   in the same run;
2. an owner process SIGKILLed while its container runs a busy loop: seconds until the engine says the
   container is no longer running (polled every 10 ms);
3. reaping on start: N running containers of a dead owner, removed by ``leftovers.reap``.

Run: .venv/bin/python bench/bench_lifeline.py [N]
"""

from __future__ import annotations

import os
import signal
import statistics
import subprocess
import sys
import time
import uuid
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("BANDPASS_REAP_ON_START", "0")

from bandpass.engine.sandbox import labels as L
from bandpass.engine.sandbox import leftovers, lifeline
from bandpass.engine.sandbox import owner as owner_mod
from bandpass.engine.sandbox.container import Sandbox, SandboxSpec, gc
from bandpass.engine.sandbox.docker_engine import get_client
from bandpass.engine.tasks.images import BASE_TAG

TAG = {"bandpass.bench": f"lifeline-{uuid.uuid4().hex[:8]}"}
OWNER = """
import sys, time
from bandpass.engine.sandbox.container import Sandbox, SandboxSpec
from bandpass.engine.sandbox.docker_engine import get_client
sb = Sandbox(get_client(), SandboxSpec(image=sys.argv[1], labels={"bandpass.bench": sys.argv[2]})).start()
sb.exec("nohup sh -c 'while :; do :; done' >/dev/null 2>&1 &")
print(sb.id, flush=True)
time.sleep(3600)
"""


def _start_remove(client: object) -> float:
    t = time.perf_counter()
    sb = Sandbox(client, SandboxSpec(image=BASE_TAG, labels=dict(TAG))).start()
    sb.remove()
    return time.perf_counter() - t


def _without_lifeline(client: object) -> float:
    real = lifeline.local_engine
    lifeline.local_engine = lambda _c: False  # type: ignore[assignment] - as on a remote engine
    try:
        return _start_remove(client)
    finally:
        lifeline.local_engine = real  # type: ignore[assignment]


def main(n: int = 10) -> None:
    client = get_client(reap=False)
    root = str(Path(__file__).resolve().parents[1])
    print(f"load at start: {os.getloadavg()[0]:.1f}")

    runs, with_line, without = [], [], []
    for _ in range(n):  # interleaved, so a change of load hits the three alike
        t = time.perf_counter()
        subprocess.run(["docker", "run", "--rm", "--network", "none", BASE_TAG, "true"], check=True)
        runs.append(time.perf_counter() - t)
        with_line.append(_start_remove(client))
        without.append(_without_lifeline(client))
    d, w, o = (statistics.median(x) for x in (runs, with_line, without))
    print(f"docker run --rm IMAGE true            median {d * 1000:6.0f} ms  (n={n})")
    print(f"sandbox start+remove, no lifeline     median {o * 1000:6.0f} ms  ({o / d:.2f}x docker run)")
    print(f"sandbox start+remove, with lifeline   median {w * 1000:6.0f} ms  ({w / d:.2f}x docker run)")

    stops = []
    for _ in range(max(3, n // 2)):
        proc = subprocess.Popen(
            [sys.executable, "-c", OWNER, BASE_TAG, TAG["bandpass.bench"]],
            cwd=root,
            env={**os.environ, "PYTHONPATH": root},
            stdout=subprocess.PIPE,
            text=True,
        )
        cid = proc.stdout.readline().strip() if proc.stdout else ""
        t = time.perf_counter()
        proc.send_signal(signal.SIGKILL)
        while client.api.inspect_container(cid)["State"]["Running"]:
            time.sleep(0.01)
        stops.append(time.perf_counter() - t)
        proc.wait()
    print(
        f"owner SIGKILLed -> container stopped    median {statistics.median(stops) * 1000:6.0f} ms, "
        f"max {max(stops) * 1000:.0f} ms  (n={len(stops)}, a busy loop inside)"
    )

    dead = subprocess.Popen(["true"])
    dead.wait()
    me = owner_mod.current()
    label = owner_mod.Owner(me.host, dead.pid, 1, me.boot, me.pidns).label()
    for _ in range(n):
        c = client.containers.run(
            BASE_TAG, ["sleep", "600"], labels={L.LABEL: "1", L.OWNER: label, **TAG}, detach=True
        )
        assert c.status in ("created", "running")
    t = time.perf_counter()
    report = leftovers.reap(client)
    took = time.perf_counter() - t
    k = len(report.removed)
    each = took / max(1, k) * 1000
    print(f"reap {k} containers of dead owners: {took:.2f} s ({each:.0f} ms each)")
    gc(client, TAG)
    print(f"load at end: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main(int(sys.argv[1]) if len(sys.argv) > 1 else 10)
