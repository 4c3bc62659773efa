#!/usr/bin/env bash
# Sets up (first time) and starts the dashboard on http://127.0.0.1:8501 (localhost only), as
# `memprobe dashboard` does from an installed package: the same command, with the settings of
# .streamlit/config.toml. Arguments go to it: `bash scripts/run.sh --port 8600`.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
cd "$ROOT"
# This clone's memprobe_core (the working directory comes first on sys.path), even if the
# editable install in .venv is older than the checkout.
exec python -m memprobe_core.cli dashboard "$@"
