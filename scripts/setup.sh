#!/usr/bin/env bash
# Creates .venv and installs Bandpass with its dev and cluster (Ray) extras: CI tests the Ray executor for
# real. Re-running is cheap: the install is skipped while pyproject.toml and the extras are unchanged.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "[setup] creating .venv" >&2
  "$PY" -m venv .venv
fi
stamp=.venv/.bandpass-installed
EXTRAS="dev,cluster"
want="$(sha256sum pyproject.toml | cut -d' ' -f1) $EXTRAS"
if [ ! -f "$stamp" ] || [ "$(cat "$stamp")" != "$want" ] || ! .venv/bin/python -c "import bandpass.engine, bandpass.store, bandpass.tui" 2>/dev/null; then
  echo "[setup] installing bandpass[$EXTRAS] into .venv" >&2
  .venv/bin/python -m pip install -q --upgrade pip >/dev/null
  .venv/bin/python -m pip install -q -e ".[$EXTRAS]"
  echo "$want" > "$stamp"
fi
