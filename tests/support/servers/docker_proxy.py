"""A Docker engine API proxy on a unix socket that can refuse chosen requests, for fault injection.

Why: a removal that fails (a loaded engine answers "device or resource busy" while it unmounts a layer) is
what left containers behind, and a test must make one fail *for real*, through the real docker client over
real HTTP, without patching the client. Everything else is forwarded byte for byte to the real engine
(upgraded connections such as ``exec start`` included), so containers, execs and bind mounts behave as on
the engine itself.

Each forwarded request gets its own upstream connection (``Connection: close`` is set on it unless the
client asks for an upgrade), so every request passes the rules, whatever the client's connection reuse.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

UPSTREAM = "/var/run/docker.sock"


@dataclass
class Rule:
    """Refuse the next ``times`` requests whose method is ``method`` and whose path matches ``path``."""

    method: str
    path: str  # a regular expression searched in the request path
    times: int
    status: int = 500
    message: str = "simulated by tests/support/servers/docker_proxy.py: device or resource busy"
    refused: list[str] = field(default_factory=list)


class DockerProxy:
    def __init__(self, upstream: str = UPSTREAM) -> None:
        self.upstream = upstream
        self._dir = tempfile.mkdtemp(prefix="bpdp")  # short: a socket path must stay under 108 bytes
        self.path = Path(self._dir) / "docker.sock"
        self.url = f"unix://{self.path}"
        self.requests: list[str] = []  # "METHOD /path" of every request seen
        self.rules: list[Rule] = []
        self._lock = threading.Lock()
        self._server: socket.socket | None = None
        self._thread: threading.Thread | None = None

    # --- control -------------------------------------------------------------------------------------

    def refuse(self, method: str, path: str, times: int = 1) -> Rule:
        rule = Rule(method.upper(), path, times)
        with self._lock:
            self.rules.append(rule)
        return rule

    def seen(self, method: str, path: str) -> list[str]:
        with self._lock:
            return [r for r in self.requests if r.startswith(method.upper() + " ") and re.search(path, r)]

    def start(self) -> DockerProxy:
        srv = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        srv.bind(str(self.path))
        srv.listen(64)
        self._server = srv
        self._thread = threading.Thread(target=self._accept, name="docker-proxy", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            with contextlib.suppress(OSError):
                self._server.shutdown(socket.SHUT_RDWR)
            self._server.close()
            self._server = None
        with contextlib.suppress(OSError):
            self.path.unlink()
            os.rmdir(self._dir)

    def __enter__(self) -> DockerProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- serving -------------------------------------------------------------------------------------

    def _accept(self) -> None:
        while self._server is not None:
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        buf = b""
        while b"\r\n\r\n" not in buf:
            chunk = conn.recv(65536)
            if not chunk:
                conn.close()
                return
            buf += chunk
        head, _, rest = buf.partition(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        method, target = (lines[0].split(" ") + ["", ""])[:2]
        path = re.sub(r"^/v[0-9.]+", "", target.split("?")[0])
        with self._lock:
            self.requests.append(f"{method} {path}")
            matching = (r for r in self.rules if r.method == method and re.search(r.path, path))
            rule = next((r for r in matching if r.times > 0), None)
            if rule is not None:
                rule.times -= 1
                rule.refused.append(path)
        if rule is not None:
            body = json.dumps({"message": rule.message}).encode()
            conn.sendall(
                f"HTTP/1.1 {rule.status} Refused\r\nContent-Type: application/json\r\n"
                f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode()
                + body
            )
            conn.close()
            return
        upgrade = any(line.lower().startswith("upgrade:") for line in lines[1:])
        if not upgrade:
            lines = [line for line in lines if not line.lower().startswith("connection:")]
            lines.append("Connection: close")
        up = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            up.connect(self.upstream)
        except OSError:
            conn.close()
            return
        up.sendall("\r\n".join(lines).encode("latin-1") + b"\r\n\r\n" + rest)
        t = threading.Thread(target=_pipe, args=(up, conn), daemon=True)
        t.start()
        _pipe(conn, up)
        t.join()
        conn.close()
        up.close()


def _pipe(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := src.recv(65536):
            dst.sendall(chunk)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)


__all__ = ["DockerProxy", "Rule"]
