#!/usr/bin/env python3
"""kvserver: a small read/write key-value HTTP service configured by an INI file.

usage: kvserver.py CONFIG.ini

See /app/README.md for the configuration format and the HTTP API.
"""

import configparser
import json
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

SCHEMA = {
    "server": {"bind": True, "port": True},
    "store": {"data_file": True, "read_only": False},
    "auth": {"token_file": False},
}


class ConfigError(Exception):
    pass


def load_config(path):
    cp = configparser.ConfigParser(interpolation=None)
    if not cp.read(path, encoding="utf-8"):
        raise ConfigError(f"cannot read {path}")
    for section in cp.sections():
        if section not in SCHEMA:
            raise ConfigError(f"unknown section [{section}]")
        for key in cp[section]:
            if key not in SCHEMA[section]:
                raise ConfigError(f"unknown key {key!r} in [{section}]")
    for section, keys in SCHEMA.items():
        for key, required in keys.items():
            if required and not cp.has_option(section, key):
                raise ConfigError(f"missing [{section}] {key}")
    try:
        port = cp.getint("server", "port")
        read_only = cp.getboolean("store", "read_only", fallback=False)
    except ValueError as exc:
        raise ConfigError(str(exc)) from exc
    if not 1 <= port <= 65535:
        raise ConfigError(f"port {port} out of range")
    data_file = Path(cp.get("store", "data_file"))
    if not data_file.is_file():
        raise ConfigError(f"data_file {data_file} does not exist")
    token = None
    if cp.has_option("auth", "token_file"):
        token_path = Path(cp.get("auth", "token_file"))
        if not token_path.is_file():
            raise ConfigError(f"token_file {token_path} does not exist")
        token = token_path.read_text(encoding="utf-8").strip()
        if not token:
            raise ConfigError(f"token_file {token_path} is empty")
    return {
        "bind": cp.get("server", "bind"),
        "port": port,
        "data_file": data_file,
        "read_only": read_only,
        "token": token,
    }


def make_handler(cfg, data, lock):
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, fmt, *args):
            sys.stderr.write("kvserver: " + (fmt % args) + "\n")

        def reply(self, status, body=None):
            payload = b"" if body is None else (json.dumps(body) + "\n").encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def authorized(self):
            if cfg["token"] is None:
                return True
            return self.headers.get("Authorization", "") == f"Bearer {cfg['token']}"

        def key(self):
            if not self.path.startswith("/items/") or len(self.path) <= len("/items/"):
                return None
            return self.path[len("/items/"):]

        def do_GET(self):
            if self.path == "/health":
                return self.reply(200, {"status": "ok"})
            key = self.key()
            if key is None:
                return self.reply(404, {"error": "not found"})
            if not self.authorized():
                return self.reply(401, {"error": "unauthorized"})
            with lock:
                if key not in data:
                    return self.reply(404, {"error": f"no such key {key!r}"})
                return self.reply(200, {"key": key, "value": data[key]})

        def do_PUT(self):
            key = self.key()
            if key is None:
                return self.reply(404, {"error": "not found"})
            if not self.authorized():
                return self.reply(401, {"error": "unauthorized"})
            if cfg["read_only"]:
                return self.reply(405, {"error": "store is read-only"})
            length = int(self.headers.get("Content-Length", "0"))
            try:
                value = json.loads(self.rfile.read(length) or b"null")
            except json.JSONDecodeError:
                return self.reply(400, {"error": "body must be JSON"})
            with lock:
                data[key] = value
                cfg["data_file"].write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
            return self.reply(204)

    return Handler


def main(argv):
    if len(argv) != 2:
        print(__doc__, file=sys.stderr)
        return 2
    try:
        cfg = load_config(argv[1])
        data = json.loads(cfg["data_file"].read_text(encoding="utf-8"))
    except (ConfigError, json.JSONDecodeError) as exc:
        print(f"kvserver: config error: {exc}", file=sys.stderr)
        return 2
    server = ThreadingHTTPServer((cfg["bind"], cfg["port"]), make_handler(cfg, data, threading.Lock()))
    print(f"kvserver: serving {cfg['data_file']} on {cfg['bind']}:{cfg['port']}", file=sys.stderr)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
