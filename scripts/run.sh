#!/usr/bin/env bash
# Sets up (first time) and starts the dashboard on http://127.0.0.1:8501 (localhost only).
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
cd "$ROOT"
exec streamlit run app.py --server.address 127.0.0.1 "$@"
