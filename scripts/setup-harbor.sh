#!/usr/bin/env bash
# Creates .venv-harbor: the real Harbor 0.25.0 (it needs Python >= 3.12) that the differential test
# (tests/engine/tasks/test_harbor_parity.py) runs as the reference: Harbor's own loader must load every task Bandpass
# writes, and every task Harbor ships must import into Bandpass. Re-running is cheap: the install is
# skipped while the pinned version is unchanged. PYTHON312 picks the interpreter (default: python3.12 on
# PATH, else pyenv's newest 3.12).
set -euo pipefail
cd "$(dirname "$0")/.."
HARBOR_VERSION=0.25.0
venv=.venv-harbor
stamp=$venv/.bandpass-harbor-installed
want="harbor==$HARBOR_VERSION datasets"
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ] && "$venv/bin/python" -c "import harbor" 2>/dev/null; then
  exit 0
fi
is312() { [ -n "$1" ] && "$1" -c 'import sys; assert sys.version_info >= (3, 12)' 2>/dev/null; }
py=${PYTHON312:-}
if ! is312 "$py"; then
  py=""
  # a pyenv shim named python3.12 may exist without a 3.12 selected: try each candidate for real
  for cand in "$(command -v python3.12 || true)" $(ls -d "$HOME"/.pyenv/versions/3.1[2-9]*/bin/python3 2>/dev/null | sort -V); do
    if is312 "$cand"; then py=$cand; break; fi
  done
fi
if [ -z "$py" ]; then
  echo "[setup-harbor] Harbor $HARBOR_VERSION needs Python >= 3.12: set PYTHON312 or install python3.12" >&2
  exit 1
fi
echo "[setup-harbor] installing harbor==$HARBOR_VERSION into $venv (with $py)" >&2
rm -rf "$venv"
"$py" -m venv "$venv"
"$venv/bin/python" -m pip install -q --upgrade pip >/dev/null
# datasets: Harbor's traces exporter (harbor[huggingface]) writes rows through it; the traces test compares
# Bandpass's traces with Harbor's own output for the same job.
"$venv/bin/python" -m pip install -q "harbor==$HARBOR_VERSION" datasets
echo "$want" > "$stamp"
