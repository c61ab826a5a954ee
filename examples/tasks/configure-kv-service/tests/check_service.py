"""Start the reference kvserver with the agent's config and check its behaviour over HTTP."""

import configparser
import json
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

CONFIG = Path("/app/kv.ini")
PORT = 8091
BASE = f"http://127.0.0.1:{PORT}"
TOKEN = Path("/tests/api_token").read_text(encoding="utf-8").strip()
INVENTORY = json.loads(Path("/tests/inventory.json").read_text(encoding="utf-8"))


def request(method: str, path: str, token: str | None = None, body: bytes | None = None) -> tuple[int, str]:
    req = urllib.request.Request(BASE + path, method=method, data=body)
    if token is not None:
        req.add_header("Authorization", f"Bearer {token}")
    if body is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(req, timeout=5) as resp:
            return resp.status, resp.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()


def wait_healthy(proc: subprocess.Popen[bytes]) -> bool:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            return False
        try:
            if request("GET", "/health")[0] == 200:
                return True
        except OSError:
            pass
        time.sleep(0.2)
    return False


def checks() -> list[str]:
    failures: list[str] = []
    cp = configparser.ConfigParser(interpolation=None)
    cp.read(CONFIG, encoding="utf-8")
    if cp.get("server", "bind", fallback=None) != "127.0.0.1":
        failures.append(f"bind is {cp.get('server', 'bind', fallback=None)!r}, expected '127.0.0.1'")
    for key, value in INVENTORY.items():
        status, body = request("GET", f"/items/{key}", TOKEN)
        if status != 200 or json.loads(body).get("value") != value:
            failures.append(f"GET /items/{key} with token: {status} {body.strip()!r}")
    status, _ = request("GET", "/items/no-such-key", TOKEN)
    if status != 404:
        failures.append(f"GET of a missing key: {status}, expected 404")
    for label, tok in (("no token", None), ("wrong token", TOKEN[:-1] + "x")):
        status, _ = request("GET", "/items/widget", tok)
        if status != 401:
            failures.append(f"GET /items/widget with {label}: {status}, expected 401")
    status, _ = request("PUT", "/items/widget", TOKEN, b'{"qty": 1}')
    if status != 405:
        failures.append(f"PUT with token: {status}, expected 405 (read-only)")
    status, body = request("GET", "/items/widget", TOKEN)
    if status != 200 or json.loads(body).get("value") != INVENTORY["widget"]:
        failures.append("widget changed after a PUT: the store is not read-only")
    return failures


def main() -> int:
    if not CONFIG.is_file():
        print(f"FAIL: {CONFIG} does not exist")
        return 1
    proc = subprocess.Popen(
        ["python3", "-I", "/tests/kvserver.py", str(CONFIG)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    try:
        if not wait_healthy(proc):
            out = proc.stdout.read().decode(errors="replace") if proc.poll() is not None else ""
            print(f"FAIL: service did not become healthy on {BASE}: {out.strip()}")
            return 1
        failures = checks()
        if proc.poll() is not None:
            failures.append("service exited during the checks")
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=5)
        except subprocess.TimeoutExpired:
            proc.kill()
    for f in failures:
        print("FAIL:", f)
    print("PASS" if not failures else f"{len(failures)} check(s) failed")
    return 0 if not failures else 1


if __name__ == "__main__":
    sys.exit(main())
