#!/usr/bin/env bash
# Sets up (first time) and runs the whole test suite, slow and browser tests included.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
cd "$ROOT"
# Browser tests drive Debian's chromium; install it when we are root and it is missing.
if ! command -v chromium >/dev/null 2>&1 && [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
  echo "memprobe tests: installing Debian's chromium for the browser tests" >&2
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
    || echo "memprobe tests: could not install chromium; browser tests will report it" >&2
fi
# Linters first (seconds): lint, format and types must be clean. Skipped when pytest arguments are
# given, so `bash scripts/test.sh tests/unit -q` runs just those tests.
if [ "$#" -eq 0 ]; then
  echo "memprobe tests: ruff check, ruff format --check, mypy" >&2
  ruff check .
  ruff format --check .
  mypy
fi
exec python -m pytest "$@"
