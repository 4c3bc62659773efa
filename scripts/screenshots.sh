#!/usr/bin/env bash
# Regenerates the README's screenshots in docs/screenshots/ on purpose: probe-live.png,
# compare.png and ner.png (tests/e2e/test_browser_dashboard.py, on the embedded models) and
# html-report.png and html-report-dashboard.png (tests/e2e/test_browser_html_report.py), and the
# first-use walkthrough, walkthrough-*.png (tests/e2e/test_browser_walkthrough.py), and the
# Document page with the document canary's map, document-map.png, document-text.png and
# document-cost.png (tests/e2e/test_browser_document.py; MEMPROBE_DOCUMENT_CANARY=1 builds the canary on first
# use: about 30 minutes on a 2-core CPU), and the Home page served by `memprobe dashboard` from
# the wheel in a fresh virtualenv, dashboard-from-wheel.png (tests/e2e/test_wheel_dashboard.py).
#
# A plain test run (scripts/test.sh, pytest) writes screenshots to the ignored test-artifacts/
# only. This script sets MEMPROBE_SCREENSHOTS_DIR=docs/screenshots, which those browser tests read
# to copy the README's pictures there too (tests/e2e/browser_fixtures.py, publish_screenshot),
# and runs just those tests. Needs Debian's chromium (apt-get install chromium; or set
# MEMPROBE_CHROMIUM); takes a few minutes. Then look at the pictures and commit them yourself:
#   git status docs/screenshots
#
# Usage: bash scripts/screenshots.sh [more pytest arguments, e.g. -x]
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
source "$ROOT/scripts/setup.sh"
cd "$ROOT"
CHROMIUM="${MEMPROBE_CHROMIUM:-/usr/bin/chromium}"
if [ ! -x "$CHROMIUM" ]; then
  # The tests would skip, and the screenshots would silently stay as they are.
  echo "memprobe screenshots: no chromium at $CHROMIUM (apt-get install chromium)" >&2
  exit 1
fi
export MEMPROBE_SCREENSHOTS_DIR="$ROOT/docs/screenshots"
export MEMPROBE_DOCUMENT_CANARY=1
exec python -m pytest tests/e2e/test_browser_dashboard.py tests/e2e/test_browser_html_report.py \
  tests/e2e/test_browser_walkthrough.py tests/e2e/test_browser_document.py \
  tests/e2e/test_wheel_dashboard.py \
  -q -rs "$@"
