#!/usr/bin/env bash
# Make sure a Docker engine answers on this machine. On a fresh machine of the project's kind there is
# only the docker client: install docker.io, start dockerd with overlay2 (vfs is ~20x slower), wait for it.
set -euo pipefail
log() { echo "[ensure-docker] $*" >&2; }

if docker info >/dev/null 2>&1; then
  exit 0
fi
if [ -n "${DOCKER_HOST:-}" ]; then
  log "DOCKER_HOST=$DOCKER_HOST is set but the engine does not answer"; exit 1
fi
if ! command -v dockerd >/dev/null 2>&1; then
  log "installing docker.io (apt)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq >/dev/null
  apt-get install -y -qq docker.io >/dev/null
fi
if ! pgrep -x dockerd >/dev/null 2>&1; then
  log "starting dockerd (overlay2)"
  mkdir -p /var/log
  nohup dockerd --storage-driver=overlay2 --iptables=false --bridge=none \
    >/var/log/bandpass-dockerd.log 2>&1 &
fi
for _ in $(seq 1 60); do
  if docker info >/dev/null 2>&1; then log "engine up"; exit 0; fi
  sleep 0.5
done
log "dockerd did not answer within 30 s; see /var/log/bandpass-dockerd.log"
tail -n 20 /var/log/bandpass-dockerd.log >&2 || true
exit 1
